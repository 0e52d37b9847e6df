// Hopper block-sparse x dense linear for short reductions (K <= 768): x rows resident in shared
// memory, the weight's stored blocks streamed past them, wgmma (sm_90a).
//
// Why a second kernel: at 90% sparsity the ViT MLP's 768 -> 3072 layer has ~1.2 stored blocks per
// block-row, so bsr_gemm.cu's CTA per (token tile, block-row) spends most of its life on per-CTA
// set-up, x-tile reloads and the epilogue (ncu, 3072 x 768 b64 @ 0.9: 25% occupancy, issue slots
// 44% busy for 10% of the dense work). Its floor is the bytes it must move (x 77.5 MB in, y 310 MB
// out at M = 50432; bench/store_pattern_bench.cu writes that y in this kernel's order at 3.6 TB/s),
// so this kernel is built to stream them:
//  - a persistent CTA owns a tile of 128 tokens at a time and keeps all of its x rows in shared
//    memory as 64-column slabs (128 x K bf16, 192 KB at K = 768), read from HBM exactly once, by
//    TMA in the 128-byte swizzle layout wgmma reads;
//  - the weight's stored blocks are consumed in storage order (block-row by block-row, the order of
//    `values`), so one producer thread streams them through a ring of slots from the copy of the
//    values in wgmma's core-matrix order (bsr_core_matrix_order, made by bsr_to_cuda), one bulk copy
//    per block, or per chunk of consecutive blocks (VITRT_BSR_XRES_CHUNK; XresRing), full / empty
//    mbarriers per slot;
//  - two consumer warpgroups own 64 tokens each: for every block-row they start from the bias, run
//    one wgmma (m64 x B x 16, both operands in shared memory) per k16 step of each stored block,
//    then write that 64 x B tile of y (GELU, bf16) through a per-warp staging buffer (stmatrix) as
//    full 128-byte lines; an empty block-row writes act(bias) at once;
//  - each x slab of each half has its own full / empty barrier pair: a warpgroup releases a slab
//    after its last use in the tile (a flag on that block's column index), and the producer loads
//    the next tile's slab into it while the rest of the tile is computed, so the x load overlaps.
// tests/protocol/test_bsr_xres_protocol.py models this barrier protocol (random interleavings: no
// deadlock, no buffer read early or refilled while read); keep the two in step.
// History (BENCHMARKS.md, 2026-12-03 sessions): the first form (x by cp.async from the producer
// warp once per tile, zeroed accumulators, per-value epilogue stores) measured 0.211 ms against
// the mma.sync kernel's 0.205 ms at 3072 x 768 b64 @ 0.9; its ncu source profile showed the
// consumers waiting ~17% of the time for each tile's x and issuing ~520 instructions per
// block-row per warp (212 in the block loop, 200 in the epilogue), which this form cuts: 0.148 ms.
// What limits it now (ncu): waits for W fills (14% of the consumers' samples). The ring has only 3
// slots of 8 KB at block 64 next to 192 KB of x, and every consumer warp must pass every slot.
// Tried and taken out (measured 2026-12-03, BENCHMARKS.md): 64-token tiles that both warpgroups
// share, on alternate block-rows, with a 14-slot W ring (0.165 ms); W blocks as wgmma's A operand,
// loaded into registers by every thread, computing y^T (0.20 ms: the loads' L2 latency exposed);
// (2026-12-05, H100) y written by TMA stores from a 128-byte-swizzled per-warp staging, one 8 x 64
// box per warp and pass: 3-8% slower than the lanes' 16-byte stores at every block size.
// (2026-12-05 evening, H100, commit 4fbc3d8) two accumulator sets, the next group's wgmmas in
// flight during each group's epilogue, a group's W chunks handed back when it retires: slower at
// every block size (block 64 x-resident at 0.8 / 0.9: 0.319 / 0.195 ms against 0.230 / 0.167; block
// 32 0.284 against 0.217 at 0.9). A retired group's slots come back only after the next epilogue,
// and the ring (3 slots at block 64, all the x slabs leave) then cannot run ahead: each group
// waits for its W blocks' fill from L2.
// (2026-12-05 evening, H100, commit 7f2542a) one pair writing y as whole lines from registers, as
// two pairs do, its staging's 9 KB given to the W ring (4 slots at block 64): block 64 at 0.8 / 0.86
// / 0.9 0.259 / 0.226 / 0.207 ms, against 0.230-0.233 / 0.189-0.197 / 0.165-0.177 staged in other
// calls (the same call's staged runs were lost; its other figures ran ~10% slow), and with 64-byte
// half lines 0.315 / 0.289 / 0.264 against 0.233 / 0.197 / 0.177 in one call: one pair keeps its
// staging.
// (2026-12-06, H200, commit 23a6248) block 64 with two pairs, each on alternate block-rows from its
// own ring of two 8 KB W slots (all that fits next to the x): correct, and 8-15% slower than one
// pair on three slots (fc1 at 0.8 / 0.86 / 0.9: 0.224-0.225 / 0.200-0.201 / 0.178-0.181 ms against
// 0.215-0.217 / 0.179 / 0.155-0.156): each pair waits on its W fills more often.
// Added on 2026-12-05 (measured on the H200 the same day, BENCHMARKS.md): a group's next block
// issued before the current one retires (Pipe, VITRT_BSR_XRES_PIPE; at 80% sparsity a block-row has
// ~2.4 blocks, each retired alone otherwise); blocks 32 and 16 in groups of 2 / 4 block-rows, so that
// they issue a group's blocks back to back and store 64-column tiles as block 64 does
// (VITRT_BSR_XRES_GROUP); block 16 at all (m64n16k16, a 16-slot ring of 512-byte blocks). Block 32
// grouped with Pipe is 4-12% faster than the streamed kernel on the fc1 shape (1.41x of cuBLASLt at
// 0.9, against 1.8x asked); block 16 is no faster than the mma.sync kernel (0.5x at 0.9; not
// profiled: presumably the producer's one bulk copy and the consumers' barrier round trip per
// 512-byte block, ~340 cycles each by the timing). Hence (2026-12-05, afternoon, measured on an H100
// the same day): the W ring in chunks of consecutive blocks (VITRT_BSR_XRES_CHUNK, _RING), one bulk
// copy and one barrier round trip per chunk; a chunk's blocks retired together, with no wait between
// them (VITRT_BSR_XRES_PIPE=chunk); each x slab's xfull waited for once per warp and tile instead of
// at every block. Block 16 with 4 KB chunks retired chunk by chunk: 32-37% less time than with single
// blocks, and faster than the mma.sync kernel (0.63x of cuBLASLt at 0.9 against 0.52x for its best
// variant). Block 32: chunks changed nothing measurable (8 KB chunks did not fit, see xres_ring).
// The GELU in bf16x2 arithmetic (VITRT_BSR_XRES_GELU=bf16x2) gained 0-3% on the --epilogue shapes
// and stayed off (it costs half a bf16 step of accuracy; taken out 2026-12-06). Later the same day (H100): the chunk loop
// made table-driven (per-block x descriptor offsets and per-group slab masks precomputed: ~22 SASS
// instructions per block at block 16 against ~59) and block 16 given two pairs of consumer
// warpgroups (VITRT_BSR_XRES_PAIRS; 4 warps per scheduler instead of 2): block 16 at 0.9 from 0.508
// to 0.330 ms (0.97x of cuBLASLt), block 32 with 2-block chunks 0.212 ms, 11-13% ahead of the
// streamed kernel, so block 32 takes this kernel on every card. That evening (H100): two pairs'
// y written as whole 128-byte lines from registers (two transposes across lanes) instead of 4-byte
// pairs: block 16 at 0.9 0.265 ms (1.15x of cuBLASLt), and block 32 with two pairs 0.200 ms (1.5x).
// Status: the default for blocks 16 and 32 in groups (chunk by chunk, table-driven, two pairs of
// consumer warpgroups) and for block 64 at 85% sparsity or more on cards of 4 TB/s or more (the
// H200; below it the streamed kernel wins, 2026-12-06), at 90% or more on slower ones (the H100),
// given one 128-token tile per SM at least (xres_auto_selected, below).
// Scope: bf16 in and out, block 16, 32 or 64, K <= 768, no residual (the 768 -> 3072 layer's epilogue
// is bias + GELU), the view's core-matrix copy present; everything else runs bsr_gemm.cu's
// kernel. The GELU is the tanh form with the hardware tanh, as bsr_gemm.cu's bf16-output path, so
// both kernels give the same model.
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/bsr_wgmma.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/env_choice.h"
#include "ops/cuda/mbarrier.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/wgmma.cuh"
#include "vitrt/error.h"

// The config table carries members the sm_80 pass (kernel body compiled out) does not read.
#pragma nv_diag_suppress 177

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileM = 128;              // tokens per tile: two consumer warpgroups of 64
constexpr int kMaxK = 768;               // 128 x 768 bf16 = 192 KB of x per CTA
constexpr int kSlabCols = 64;            // x is held as slabs of 64 columns (128-byte rows)
constexpr int kSlabBytes = 64 * 128;     // one half's slab: 64 rows x 128 bytes, a TMA box
constexpr int kMaxSlabs = kMaxK / kSlabCols;
// P pairs of consumer warpgroups (XresPairs): 8 P consumer warps and P producer warps (one thread
// of each works).
constexpr int consumer_warps(int pairs) { return 8 * pairs; }
constexpr int xres_threads(int pairs) { return 32 * (consumer_warps(pairs) + pairs); }
constexpr size_t kMaxSmem = 227 * 1024;  // sm_90's opt-in limit per CTA
constexpr size_t kAlignSlack = 1024;     // the x slabs start 1024-byte aligned (128-byte swizzle)
constexpr uint8_t kLastUse = 0x80;       // col_idx table flag: the last block of the tile reading its slab

// A block's x slab, and its x descriptor's start-address offset (16-byte units, from the half's
// first slab: 8 KB slabs, 32 bytes per 16 columns), from its col_idx table entry c (flag ignored).
template <int B>
__device__ __forceinline__ unsigned xres_slab_of(unsigned c) {
  return (c & ~unsigned{kLastUse}) * B / kSlabCols;
}
template <int B>
__device__ __forceinline__ unsigned xres_x_offset(unsigned c) {
  const unsigned a = (c & ~unsigned{kLastUse}) * B;  // the block's first x column
  return ((a / kSlabCols) * kSlabBytes + (a % kSlabCols) * 2) >> 4;
}

// Two pairs' epilogue writes whole 128-byte lines from registers (rows_to_lines), as one
// pair's staging does. Why: this kernel's y traffic is its floor, and the width of each store
// instruction's row segments decides how close it gets. Measured on the H100 (2026-12-05 evening,
// fc1 shape, M = 50432, ms at 0.8 / 0.86 / 0.9): block 16 (two pairs) 0.387 / 0.314 / 0.265 with
// whole lines, against 0.439-0.447 / 0.362-0.371 / 0.315-0.322 with 64-byte half lines (one
// transpose) and 0.453-0.458 / 0.381-0.387 / 0.331-0.336 with the lanes' 4-byte pairs, the form
// before; block 32 with two pairs and whole lines 0.276 / 0.225 / 0.200, against one pair's
// 0.317-0.323 / 0.256-0.260 / 0.216-0.225 (staged), so block 32 now runs two pairs too. One pair
// without its staging (the 9 KB given to the W ring) was 30-55% slower with half lines or 4-byte
// pairs (block 64 at 0.9: 0.264 / 0.325 ms against 0.177 staged), and not faster with whole lines
// either (see the tried-and-taken-out list above).

template <int B>
struct XresCfg {
  static constexpr int S = B == 64 ? 3 : B == 32 ? 8 : 16;  // W ring slots of one block (24 / 16 / 8 KB)
  static constexpr int kBlockBytes = B * B * 2;
  static constexpr int kChunks = B / 8;              // 16-byte chunks per W row
  // Per warp: one output row group's staging (blocks 16 / 32 may run 4 / 2 rows: 64 columns).
  static constexpr int kStageBytes = bsr_wgmma::WarpTileStore<64>::kStageBytes;
  static constexpr int kAcc = B / 2;                 // fp32 accumulators per thread (m64 x B)
};

// The matrix's structure is copied into shared memory at the start (row_ptr as int, col_idx as
// bytes: K / B <= 48, plus the kLastUse flag), so that no global load sits on a block-row's critical
// path. The col_idx table holds the view's nnz, or every block when that is unknown. Retire::kAtChunk
// also reads, per block, its x descriptor's offset (u16, one entry of padding: read one block
// ahead), and per block-row group the slabs its blocks read and those it releases (u16 each).
size_t xres_row_ptr_bytes(int64_t block_rows) { return (static_cast<size_t>(block_rows + 1) * 4 + 15) / 16 * 16; }
int64_t xres_col_capacity(const BsrDeviceView& w) { return w.nnz >= 0 ? w.nnz : (w.rows / w.block) * (w.cols / w.block); }
__host__ __device__ constexpr int64_t xres_col_bytes(int64_t nnz_cap) { return (nnz_cap + 15) / 16 * 16; }
__host__ __device__ constexpr int64_t xres_aoff_bytes(int64_t nnz_cap) { return (2 * (nnz_cap + 1) + 15) / 16 * 16; }
__host__ __device__ constexpr int64_t xres_mask_bytes(int64_t block_rows) { return (2 * block_rows + 15) / 16 * 16; }
enum class Retire;
Retire xres_retire(int block);
bool xres_chunked(int block);
// The chunk-by-chunk loop's tables (aoff, masks) are reserved where it may run: blocks 16 / 32
// (their default, and the only loop of two pairs) and block 64 when asked for. (Reserving them
// at block 64 would not fit at K = 768: its 24 KB ring leaves ~576 bytes for tables.)
size_t xres_table_bytes(const BsrDeviceView& w) {
  const int64_t cap = xres_col_capacity(w), block_rows = w.rows / w.block;
  const size_t chunk_tables = w.block != 64 || xres_chunked(64) ? xres_aoff_bytes(cap) + 2 * xres_mask_bytes(block_rows) : 0;
  return xres_row_ptr_bytes(block_rows) + xres_col_bytes(cap) + chunk_tables;
}
int xres_slabs(int64_t K) { return static_cast<int>((K + kSlabCols - 1) / kSlabCols); }

// The W ring's unit: one bulk copy brings `blocks` consecutive stored blocks (a chunk; the last one
// of a tile may be shorter), guarded by one full / empty barrier pair, into one of `slots` slots.
// By default chunks of one block get the ring of XresCfg::S slots and longer chunks as many slots
// as that ring's bytes hold; ring_bytes > 0 asks for that many bytes instead. Three slots at least
// (two in flight while one is read), 24 KB at most (block 64's ring: the x slabs leave no more).
struct XresRing {
  int chunk_log2;  // blocks per chunk: 1 << chunk_log2
  int slots;
};
constexpr int kMaxChunkBytes = 8 * 1024;  // block 64's slot
constexpr int kMaxRingBytes = 3 * kMaxChunkBytes;

template <int B>
XresRing xres_ring_for(int chunk_blocks, int ring_bytes) {
  using C = XresCfg<B>;
  int lg = 0;
  while ((2 << lg) <= chunk_blocks && (2 << lg) * C::kBlockBytes <= kMaxChunkBytes) ++lg;
  const int chunk_bytes = C::kBlockBytes << lg;
  const int bytes = ring_bytes > 0 ? std::min(ring_bytes, kMaxRingBytes) : C::S * C::kBlockBytes;
  return {lg, std::max(3, bytes / chunk_bytes)};
}

// pairs = 2 (XresPairs): a W ring per pair, and no staging (its epilogue stores from registers).
template <int B>
size_t xres_smem_bytes(int64_t K, size_t table_bytes, XresRing ring, int pairs = 1) {
  using C = XresCfg<B>;
  return kAlignSlack + 2 * static_cast<size_t>(xres_slabs(K)) * kSlabBytes +
         static_cast<size_t>(pairs * ring.slots) * (C::kBlockBytes << ring.chunk_log2) +
         (pairs == 1 ? consumer_warps(1) * C::kStageBytes : 0) +
         (4 * kMaxSlabs + 2 * pairs * ring.slots + 2) * sizeof(uint64_t) + table_bytes;
}

struct XresArgs {
  CUtensorMap x_map;  // x [M, K] bf16, boxes of 64 x 64, 128-byte swizzle (first: 64-byte aligned)
  int64_t M;
  int N;
  int slabs;  // ceil(K / 64)
  int block_rows;
  int rp_bytes;  // row_ptr table bytes in shared memory (16-byte multiple); col_idx follows
  int nnz_cap;   // col_idx table capacity (the view's nnz, or every block)
  int chunk_log2;  // the W ring (XresRing): blocks per bulk copy, 1 << chunk_log2
  int ring_slots;
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const bf16* values_cm;  // the blocks in core-matrix order (bsr_core_matrix_order)
  const bf16* bias;
  bf16* y;
  int tiles;
};

// Cache policy of y's stores: streaming (evict-first) at blocks 16 / 32, plain at block 64, fixed at
// compile time (a run-time choice cost seven issue slots per 16-byte store: both forms predicated).
// Why streaming: every CTA reads all of W once per tile from L2 while 310 MB of y stream through it
// at M = 50432, and the consumers' waits for W slots are the kernel's largest stall (ncu, H200,
// 2026-12-06). Measured on an H100 (2026-12-06, fc1 shape, M = 50432, ms at 0.8 / 0.86 / 0.9,
// alternating runs): streaming stores take block 16 from 0.397-0.401 / 0.325-0.326 / 0.271-0.274 to
// 0.381-0.391 / 0.306-0.308 / 0.253-0.258 (1.19-1.23x of cuBLASLt at 0.9) and block 32 from
// 0.286-0.290 / 0.236-0.239 / 0.208-0.213 to 0.268-0.278 / 0.216-0.221 / 0.189-0.192 (1.60-1.69x);
// block 64 (x-resident forced) 0.239 / 0.198 / 0.177 against 0.235-0.236 / 0.196-0.197 / 0.173-0.176,
// no better (again 2026-12-06 ~05:25: 0.237-0.241 / 0.199-0.200 / 0.177-0.179 against 0.243-0.244 /
// 0.199-0.200 / 0.177-0.179). W's bulk copies marked evict-last in L2 were within 1-2% either way at
// blocks 32 / 64 and were taken out with the switches (VITRT_BSR_XRES_STCS, _WKEEP).
template <int B>
constexpr bool xres_streaming_stores() {
  return B != 64;
}

// When a block's wgmmas are retired (wgmma.wait_group), which hands back its W chunk (if it ends
// one) and its x slab (at its last use in the tile): kEach before the next block is issued; kAtChunk
// at the end of its W chunk or of its row group, whichever comes first (no wait between the blocks
// of a chunk), with the x slabs waited for at the start of a group and released at its end
// (per-group masks) and each block's x descriptor read from a table. (A third form, Pipe: a block
// retired once the next block of its group was issued, wait_group 1; block 32's default from
// 2026-12-05 midday until the table-driven chunk loop beat it by 18% on the H100, equal or 1-2%
// slower at block 64 on the H200; deleted that evening, commit 8f58dbd has it.)
enum class Retire { kEach, kAtChunk };
bool xres_chunked(int block) { return xres_retire(block) == Retire::kAtChunk; }

// The epilogue's activation: none, or GELU (tanh form) in fp32 with tanh.approx.f32. (The same in
// bf16x2 arithmetic gained 0-3% and cost half a bf16 step of accuracy; taken out on 2026-12-06.)
enum class XresAct { kNone, kGelu };

// P: pairs of consumer warpgroups (1, or 2 for XresPairs' form: chunk by chunk and in groups only).
// HasBias: whether p.bias is set, a template parameter so that the plain linear starts its
// accumulators from zero instead of loading, unpacking and copying zeros per block-row (~60 SASS
// instructions of ~370 per block-row at block 64, 0.9).
// FixedRing: the W ring of XresCfg<B>::S one-block slots known at compile time (block 64's default),
// so that each block's slot offset, chunk place and hand-back fold into constants instead of being
// derived from p.chunk_log2 / p.ring_slots per block (SASS per block at block 64 98 -> 84, per
// block-row 213 -> 194 instructions; not yet measured on a GPU).
template <int B, XresAct A, Retire Mode, int RG, int P, bool HasBias, bool FixedRing = false>
__global__ void __launch_bounds__(xres_threads(P), 1) bsr_xres_kernel(const __grid_constant__ XresArgs p) {
#if VITRT_WGMMA_ENABLED
  constexpr bool Batched = Mode == Retire::kAtChunk;  // fenced once per group; table-driven
  static_assert(P == 1 || (P == 2 && Batched && RG > 1), "two pairs run groups, chunk by chunk");
  constexpr int CW = consumer_warps(P), kThreads = xres_threads(P);
  using C = XresCfg<B>;
  const int S = FixedRing ? C::S : p.ring_slots;
  const int cb_mask = FixedRing ? 0 : (1 << p.chunk_log2) - 1;  // a block's place in its chunk: k & cb_mask
  const int chunk_bytes = FixedRing ? C::kBlockBytes : C::kBlockBytes << p.chunk_log2;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((kAlignSlack - (ptx::smem_u32(smem_raw) & (kAlignSlack - 1))) & (kAlignSlack - 1));
  const int ns = p.slabs;
  unsigned char* xs = smem;                                   // [2 halves][ns slabs][64 rows x 128 B], swizzled
  unsigned char* ws = xs + 2 * ns * kSlabBytes;               // [P][S][chunk of B x B blocks], core-matrix layout
  unsigned char* stage = ws + P * S * chunk_bytes;            // P == 1: [warp][8 rows][kStageRow]
  uint64_t* bars = reinterpret_cast<uint64_t*>(stage + (P == 1 ? CW * C::kStageBytes : 0));
  uint64_t* xfull = bars;                   // [2][kMaxSlabs] slab landed (TMA complete_tx)
  uint64_t* xempty = bars + 2 * kMaxSlabs;  // [2][kMaxSlabs] the warps on that half reading it are done with it
  uint64_t* wfull = bars + 4 * kMaxSlabs;   // [P][S] W chunk landed (bulk copy complete_tx)
  uint64_t* wempty = wfull + P * S;         // [P][S] every consumer warp of that pair has passed it
  unsigned* used_slabs = reinterpret_cast<unsigned*>(wempty + P * S);  // [pair] bit s: a block of the pair reads slab s
  int* rp_s = reinterpret_cast<int*>(wempty + P * S + 2);     // [block_rows + 1]
  uint8_t* col_s = reinterpret_cast<uint8_t*>(rp_s) + p.rp_bytes;  // [nnz] column | kLastUse
  uint16_t* aoff_s = reinterpret_cast<uint16_t*>(col_s + xres_col_bytes(p.nnz_cap));  // [nnz + 1] x descriptor offset
  uint16_t* gneed_s = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(aoff_s) + xres_aoff_bytes(p.nnz_cap));
  uint16_t* grel_s = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(gneed_s) + xres_mask_bytes(p.block_rows));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) used_slabs[0] = used_slabs[1] = 0;
  const int nnz = __ldg(p.row_ptr + p.block_rows);
  if (nnz > p.nnz_cap) __trap();  // a view whose nnz disagrees with its row_ptr (never from device_view)
  for (int i = threadIdx.x; i <= p.block_rows; i += kThreads) rp_s[i] = __ldg(p.row_ptr + i);
  for (int i = threadIdx.x; i < nnz; i += kThreads) col_s[i] = static_cast<uint8_t>(__ldg(p.col_idx + i));
  __syncthreads();
  // Each slab's last reader among each pair's blocks (warp s scans for slab s, its lanes the
  // block-rows; P == 2: pair q owns the RG-row groups q, q + 2, ...): that block releases it.
  for (int s = warp; s < ns; s += kThreads / 32) {
    int last0 = -1, last1 = -1;
    for (int r = lane; r < p.block_rows; r += 32) {
      const bool second = P == 2 && (r / RG) % 2 == 1;
      for (int i = rp_s[r]; i < rp_s[r + 1]; ++i)
        if (xres_slab_of<B>(col_s[i]) == static_cast<unsigned>(s)) (second ? last1 : last0) = i;  // i ascends
    }
    last0 = __reduce_max_sync(0xffffffffu, last0);
    last1 = __reduce_max_sync(0xffffffffu, last1);
    if (lane == 0 && last0 >= 0) col_s[last0] |= kLastUse, atomicOr(&used_slabs[0], 1u << s);
    if (lane == 0 && last1 >= 0) col_s[last1] |= kLastUse, atomicOr(&used_slabs[1], 1u << s);
  }
  __syncthreads();
  if constexpr (Batched) {  // per block its x descriptor's offset; per group the slabs it reads / releases
    for (int i = threadIdx.x; i <= nnz; i += kThreads)
      aoff_s[i] = static_cast<uint16_t>(i < nnz ? xres_x_offset<B>(col_s[i]) : 0u);  // (+ the padding entry)
    for (int gi = threadIdx.x; gi * RG < p.block_rows; gi += kThreads) {
      unsigned need = 0, rel = 0;
      for (int i = rp_s[gi * RG]; i < rp_s[gi * RG + RG]; ++i) {
        const unsigned bit = 1u << xres_slab_of<B>(col_s[i]);
        need |= bit;
        if (col_s[i] & kLastUse) rel |= bit;
      }
      gneed_s[gi] = static_cast<uint16_t>(need), grel_s[gi] = static_cast<uint16_t>(rel);
    }
  }
  if (threadIdx.x == 0) {  // a slab's xempty counts the 4 warps of each pair that reads it, per half
    for (int i = 0; i < 2 * kMaxSlabs; ++i) {
      const int s = i % kMaxSlabs;
      const int readers = 4 * (((used_slabs[0] >> s) & 1) + ((used_slabs[1] >> s) & 1));
      mbar::init(&xfull[i], 1), mbar::init(&xempty[i], readers > 0 ? readers : 4);
    }
    for (int s = 0; s < P * S; ++s) mbar::init(&wfull[s], 1), mbar::init(&wempty[s], 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // publishes the barriers' initialisation, the tables and the flags

  if (warp >= CW) {
    // ---- producers: one thread of producer warp q issues pair q's W copies, producer 0 also the x
    // slabs. Pair q's W blocks (P == 1: all of them; P == 2: those of its groups) go in storage
    // order, tile after tile, in chunks of 1 << chunk_log2 blocks (a tile's last chunk, and with
    // P == 2 a group's, may be shorter; one never spans tiles, nor with P == 2 groups); the x slabs
    // of a tile are loaded as the previous tile releases them (polled while waiting for a W slot).
    // Blocking on the previous tile's pending slabs at the start of a tile cannot deadlock: by then
    // every x slab of the tile before it has been issued, and every W block of pair 0's; pair 1's
    // come from their own producer, which waits on nothing but pair 1.
    if (lane != 0) return;
    const int pq = warp - CW;  // this producer's pair
    const unsigned used = pq == 0 ? used_slabs[0] | used_slabs[1] : 0u;  // producer 0 loads x
    const uint32_t used_mask = used | (used << 16);  // bit 16 h + s: slab s of half h
    uint32_t pending = 0;
    int pend_tc = 0;
    int64_t pend_m0 = 0;
    auto issue_x = [&](int bit) {
      const int h = bit / 16, s = bit % 16;
      uint64_t* full = &xfull[h * kMaxSlabs + s];
      mbar::arrive_expect_tx(full, kSlabBytes);
      mbar::tma_load_2d(xs + (h * ns + s) * kSlabBytes, &p.x_map, s * kSlabCols, static_cast<int>(pend_m0 + 64 * h), full);
      pending &= ~(1u << bit);
    };
    // Pending slab loads: all of them, waiting for each release (block), or at most one per call,
    // round robin (poll): a poll sits between two looks at the W slot a consumer waits for, so it
    // must be short (testing every pending slab each time delayed the W refills).
    int poll_bit = -1;
    auto try_x = [&](bool block) {
      if (block || pend_tc == 0) {
        for (uint32_t m = pending; m != 0; m &= m - 1) {
          const int bit = __ffs(m) - 1;
          if (pend_tc > 0) mbar::wait(&xempty[(bit / 16) * kMaxSlabs + bit % 16], (pend_tc - 1) & 1);
          issue_x(bit);
        }
        return;
      }
      if (pending == 0) return;
      uint32_t m = poll_bit < 0 ? 0u : pending & ~((2u << poll_bit) - 1);  // pending bits after the last polled
      if (m == 0) m = pending;
      poll_bit = __ffs(m) - 1;
      if (mbar::test(&xempty[(poll_bit / 16) * kMaxSlabs + poll_bit % 16], (pend_tc - 1) & 1)) issue_x(poll_bit);
    };
    int slot = 0, n = 0;
    unsigned round = 0;  // parity of the ring round of `slot`
    int tc = 0;
    uint64_t* pfull = wfull + pq * S;
    uint64_t* pempty = wempty + pq * S;
    unsigned char* pring = ws + pq * S * chunk_bytes;
    const int seg_rows = P == 1 ? p.block_rows : RG;  // block-rows of a segment of chunks
    for (int tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++tc) {
      try_x(true);
      pending = used_mask, pend_tc = tc, pend_m0 = static_cast<int64_t>(tile) * kTileM;
      try_x(false);
      for (int r = pq * seg_rows; r < p.block_rows; r += P * seg_rows) {
        const int kend = rp_s[r + seg_rows];
        for (int k0 = rp_s[r]; k0 < kend; k0 += cb_mask + 1, ++n) {
          if (n >= S) {  // the slot's previous chunk must have been passed by every consumer warp of the pair
            while (!mbar::test(&pempty[slot], round ^ 1)) {
              try_x(false);
              if (pending == 0) {
                mbar::wait(&pempty[slot], round ^ 1);
                break;
              }
              __nanosleep(32);
            }
          }
          const unsigned bytes = static_cast<unsigned>(min(cb_mask + 1, kend - k0) * C::kBlockBytes);
          mbar::arrive_expect_tx(&pfull[slot], bytes);
          unsigned char* dst = pring + slot * chunk_bytes;
          const bf16* src = p.values_cm + static_cast<int64_t>(k0) * B * B;
          mbar::bulk_copy_to_smem(dst, src, bytes, &pfull[slot]);
          if (++slot == S) slot = 0, round ^= 1;
        }
      }
    }
    try_x(true);
    return;
  }

  // ---- consumer warpgroups: warpgroup 2 q + h (pair q) owns rows 64 h .. 64 h + 63 of each tile (x
  // half h), warp w4 rows 16 w4 .. 16 w4 + 15 of those; a thread holds rows g and g + 8 of its warp's
  // 16. The block-rows go in groups of RG (RG = 2 at block 32, 4 at block 16: the rows' blocks issued
  // back to back into RG accumulator sets, one epilogue for their 64 adjacent columns); with P == 2
  // pair q takes groups q, q + 2, ... from its own W ring.
  constexpr int W = RG * B;  // output columns of a group
  const int wg = warp / 4, h = wg % 2, pq = wg / 2, w4 = warp % 4, g = lane / 4, t = lane % 4;
  unsigned char* st = stage + (P == 1 ? warp * C::kStageBytes : 0);
  const uint64_t xdesc = wgmma::make_smem_desc_sw128(xs + h * ns * kSlabBytes, 1024);
  const uint64_t wdesc = wgmma::make_smem_desc(ws + pq * S * chunk_bytes, 128, C::kChunks * 128);
  const bsr_wgmma::DescWords xd(xdesc), wd(wdesc);  // (offsets added to the low words: see DescWords)
  if constexpr (P == 2) wfull += pq * S, wempty += pq * S;  // this pair's ring
  // The barriers by shared-memory address (8 bytes each), opaque as the descriptors' low words are,
  // and whether this lane arrives for its warp: otherwise ptxas rebuilds them from the thread index
  // at every block (~15 SASS instructions per W chunk at block 32).
  uint32_t wfull_a = ptx::smem_u32(wfull), wempty_a = ptx::smem_u32(wempty);
  uint32_t xfull_a = ptx::smem_u32(xfull + h * kMaxSlabs), xempty_a = ptx::smem_u32(xempty + h * kMaxSlabs);
  unsigned leader = lane == 0;
  asm volatile("" : "+r"(wfull_a), "+r"(wempty_a), "+r"(xfull_a), "+r"(xempty_a), "+r"(leader));
  // Epilogue: lane writes chunk (lane % kChunks) of rows (lane / kChunks) + i * kRowsPerStore.
  using Out = bsr_wgmma::WarpTileStore<W>;
  static_assert(Out::kStageBytes <= C::kStageBytes, "the staging buffer holds a group's rows");
  const Out out(st, lane);
  constexpr int kRowsPerStore = Out::kRowsPerStore;
  const int st_row = out.row, st_chunk = lane % Out::kChunks;
  const unsigned char* st_load = out.load;
  // The staging addresses as shared-memory addresses, opaque as the barriers' are (else ptxas
  // rebuilds them from the thread index at every block-row: ~20 SASS instructions at block 64).
  uint32_t st_matrix_a = ptx::smem_u32(out.matrix), st_load_a = ptx::smem_u32(st_load);
  asm volatile("" : "+r"(st_matrix_a), "+r"(st_load_a));
  int slot = 0;
  unsigned round = 0;
  int tc = 0;
  for (int tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++tc) {
    const int64_t row0 = static_cast<int64_t>(tile) * kTileM + 64 * h + 16 * w4;  // this warp's first row
    // This warp's rows inside the matrix (16 but in the last tile), compared in 32 bits per store.
    const int64_t rows_left = p.M - row0;
    const int rows_in = rows_left >= 16 ? 16 : rows_left > 0 ? static_cast<int>(rows_left) : 0;
    bf16* yrow = p.y + (row0 + st_row) * p.N + st_chunk * 8;
    const unsigned xparity = tc & 1;
    unsigned xseen = 0;  // bit s: this warp has seen slab s of this tile land (its xfull waited for)
    int chunk_left = 0;  // kAtChunk: blocks of the current W chunk still to issue (0: none begun)
    uint32_t wcur = 0;   // kAtChunk: the low word of the next block's W descriptor
    // This thread's bias values (columns 8 j + 2 t, + 1) of the group's block-rows, loaded one
    // group ahead.
    __nv_bfloat162 bias_next[RG][B / 8];
    auto load_bias = [&](int r) {
      if constexpr (HasBias) {
#pragma unroll
        for (int q = 0; q < RG; ++q)
#pragma unroll
          for (int j = 0; j < B / 8; ++j)
            bias_next[q][j] = r + q < p.block_rows
                                  ? *reinterpret_cast<const __nv_bfloat162*>(p.bias + static_cast<int64_t>(r + q) * B +
                                                                             8 * j + 2 * t)
                                  : __floats2bfloat162_rn(0.f, 0.f);
      }
    };
    load_bias(pq * RG);
    for (int r = pq * RG; r < p.block_rows; r += P * RG) {
      int rb[RG + 1];  // the group's row pointers (read first, as the ungrouped form always did)
#pragma unroll
      for (int i = 0; i <= RG; ++i) rb[i] = rp_s[r + i];
      float acc[RG][C::kAcc];
#pragma unroll
      for (int q = 0; q < RG; ++q)
#pragma unroll
        for (int j = 0; j < B / 8; ++j) {
          const float2 b2 = HasBias ? __bfloat1622float2(bias_next[q][j]) : make_float2(0.f, 0.f);
          acc[q][4 * j] = acc[q][4 * j + 2] = b2.x;  // rows g and g + 8 start from the bias
          acc[q][4 * j + 1] = acc[q][4 * j + 3] = b2.y;
        }
      load_bias(r + P * RG);
      // The group's blocks, one commit group each. (Keeping MMAs in flight across groups, or
      // across the stores, makes ptxas serialise every wgmma: it takes values read from shared
      // memory and the warp index for divergent (C7518; a __shfl_sync from lane 0 makes them
      // uniform for it), and it cannot follow wait_group 1 across a row whose block count it does
      // not know (C7514); a two-rows-in-flight form tried on 2026-12-03 did not get past that, and
      // the overlap form of 2026-12-05, which did, lost on its W ring: see the header.)
      // (Batched: every accumulator set fenced once, before the group's first wgmma: an operand
      // fence of the second set while the first set's wgmma runs makes ptxas serialise them, C7515.)
      if constexpr (Batched) {
#pragma unroll
        for (int q = 0; q < RG; ++q) wgmma::fence_operands(acc[q]);
        // Chunk by chunk, table-driven: the group's slabs waited for before its first block (the
        // warp's slabs seen so far skipped), released after its last; per block one table read (a
        // block ahead), one add for the x descriptor, the W descriptor advanced, the chunk counted
        // down (~22 SASS instructions per block at block 16, against ~43 for the loop it replaced,
        // which read the column and derived slab, offset and release per block, and ~59 before
        // that); the descriptors move in their low words only (DescWords). (One wgmma.fence per group
        // instead of per block made ptxas serialise every wgmma, C7520: it wants the fence in the
        // loop.)
        const int seg_end = P == 1 ? nnz : rb[RG];  // chunks end there (the producer's segments)
        const unsigned gneed = gneed_s[r / RG];
        for (unsigned m = gneed & ~xseen; m != 0; m &= m - 1) mbar::wait_at(xfull_a + 8 * (__ffs(m) - 1), xparity);
        xseen |= gneed;
#pragma unroll
        for (int q = 0; q < RG; ++q) {
          const int kend = rb[q + 1];
          int k = rb[q];
          unsigned a = ptx::lds_u16(aoff_s + k);  // (the table's padding entry when the row is the last and empty)
          for (; k < kend; ++k) {
            const unsigned a_next = ptx::lds_u16(aoff_s + k + 1);
            if (chunk_left == 0) {  // a chunk starts: it lands whole
              mbar::wait_at(wfull_a + 8 * slot, round);
              chunk_left = min(cb_mask + 1, seg_end - k);
              wcur = wd.lo + static_cast<uint32_t>((slot * chunk_bytes) >> 4);
            }
            const uint32_t alo = xd.lo + a;
            wgmma::fence();
#pragma unroll
            for (int kk = 0; kk < B / 16; ++kk)
              bsr_wgmma::block_k16<B>(acc[q], xd.with_low(alo + 2 * kk), wd.with_low(wcur + 16 * kk));
            wgmma::commit();
            wcur += C::kBlockBytes >> 4;
            if (--chunk_left == 0) {  // the chunk's blocks retire together and hand back their slot
              wgmma::wait<0>();
              if (leader) mbar::arrive_at(wempty_a + 8 * slot);
              if (++slot == S) slot = 0, round ^= 1;
            }
            a = a_next;
          }
        }
      } else {
#pragma unroll
        for (int q = 0; q < RG; ++q) {
          for (int k = rb[q]; k < rb[q + 1]; ++k) {
            const int c = col_s[k];
            const int slab = static_cast<int>(xres_slab_of<B>(c));
            const int in_chunk = k & cb_mask;
            const bool chunk_ends = in_chunk == cb_mask || k + 1 == nnz;  // the chunk's last block
            if (in_chunk == 0) mbar::wait_at(wfull_a + 8 * slot, round);  // the whole chunk lands at once
            if (!((xseen >> slab) & 1)) {  // a slab, once landed, stays until this tile's last use of it
              mbar::wait_at(xfull_a + 8 * slab, xparity);
              xseen |= 1u << slab;
            }
            wgmma::fence_operands(acc[q]);
            wgmma::fence();
            const uint32_t alo = xd.lo + xres_x_offset<B>(c);
            const uint32_t blo = wd.lo + static_cast<uint32_t>((slot * chunk_bytes + in_chunk * C::kBlockBytes) >> 4);
#pragma unroll
            for (int kk = 0; kk < B / 16; ++kk)
              bsr_wgmma::block_k16<B>(acc[q], xd.with_low(alo + 2 * kk), wd.with_low(blo + 16 * kk));
            wgmma::commit();
            wgmma::wait<0>();
            wgmma::fence_operands(acc[q]);
            if (leader) {
              if (chunk_ends) mbar::arrive_at(wempty_a + 8 * slot);
              if (c & kLastUse) mbar::arrive_at(xempty_a + 8 * slab);
            }
            if (chunk_ends) {
              if (++slot == S) slot = 0, round ^= 1;
            }
          }
        }
      }
      if constexpr (Batched) {  // the group's blocks past its last chunk end retire before the epilogue
        wgmma::wait<0>();
#pragma unroll
        for (int q = 0; q < RG; ++q) wgmma::fence_operands(acc[q]);
        if (leader)  // every slab whose last use is in the group
          for (unsigned m = grel_s[r / RG]; m != 0; m &= m - 1) mbar::arrive_at(xempty_a + 8 * (__ffs(m) - 1));
      }
      // Epilogue: rows g (pass 0) and g + 8 (pass 1) -> staging (stmatrix) -> whole-line stores.
      bf16* yr = yrow + static_cast<int64_t>(r) * B;
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        unsigned v[W / 8];
#pragma unroll
        for (int j = 0; j < W / 8; ++j) {
          const float* a = acc[j / (B / 8)];
          const int jj = j % (B / 8);
          float v0 = a[4 * jj + 2 * pass], v1 = a[4 * jj + 2 * pass + 1];
          if constexpr (A == XresAct::kGelu) v0 = dev::gelu_tanh_approx(v0), v1 = dev::gelu_tanh_approx(v1);
          v[j] = bsr_wgmma::pack_bf16x2(v0, v1);
        }
        if constexpr (P == 2) {  // no staging (it does not fit next to two rings): whole lines from registers
          static_assert(W == 64, "two pairs run 64-column groups");
          unsigned a4[4], b4[4];
          rows_to_lines(v, lane, a4, b4);
          const int64_t row_a = row0 + pass * 8 + 2 * (lane / 8);  // a4: this row's 16 bytes; b4: the next row's
          bf16* ya = p.y + row_a * p.N + static_cast<int64_t>(r) * B + 8 * (lane % 8);
          const int row_w = pass * 8 + 2 * (lane / 8);  // row_a - row0
          if (row_w < rows_in) bsr_wgmma::store_line(ya, make_uint4(a4[0], a4[1], a4[2], a4[3]), xres_streaming_stores<B>());
          if (row_w + 1 < rows_in) bsr_wgmma::store_line(ya + p.N, make_uint4(b4[0], b4[1], b4[2], b4[3]), xres_streaming_stores<B>());
          continue;
        }
        if constexpr (W % 32 == 0) Out::stage_at(st_matrix_a, v);
        else out.stage(v);  // (block 16 ungrouped: two matrices per row)
#pragma unroll
        for (int i = 0; i < Out::kStoresPerPass; ++i) {
          if (!out.has_row()) break;  // (block 16 ungrouped: 16 lanes cover the 8 rows)
          const int row = pass * 8 + st_row + i * kRowsPerStore;  // of the warp's 16
          const uint4 val = W % 32 == 0 ? ptx::lds_v4_at(st_load_a + i * kRowsPerStore * Out::kStageRow)
                                        : *reinterpret_cast<const uint4*>(st_load + i * kRowsPerStore * Out::kStageRow);
          if (row < rows_in)
            bsr_wgmma::store_line(yr + static_cast<int64_t>(pass * 8 + i * kRowsPerStore) * p.N, val, xres_streaming_stores<B>());
        }
        __syncwarp();
      }
    }
  }
#endif
}

// VITRT_BSR_XRES_PIPE: "0" retires each block's wgmmas before the next block is issued, "chunk" (or
// "lean" / "tables", its names while they were A/B forms) retires them at the end of each W chunk
// and row group (Retire::kAtChunk, table-driven); unset / other: chunk by chunk for blocks 16 and
// 32, block by block for block 64 (two pairs run chunk by chunk whatever it says). ("1" was Pipe,
// deleted: see Retire.) Measured on the H100
// (2026-12-05 ~16:45 UTC, fc1 shape, M = 50432, ms at 0.8 / 0.86 / 0.9): block 16 (two pairs)
// 0.467 / 0.383 / 0.330 table-driven against 0.592 / 0.475 / 0.390 with the loop before it (itself
// 0.755 / 0.569 / 0.445 with one pair, against 0.907 / 0.666 / 0.510 for the loop before that);
// block 32 (one pair, 2-block chunks) 0.313 / 0.253 / 0.212, against 0.442 / 0.343 / 0.273 with
// Pipe and the streamed kernel's 0.350 / 0.285 / 0.243. On the H200 (2026-12-05, one block per
// copy, before the table-driven loop): block 32 with Pipe 0.3495 / 0.2738 / 0.2203 against
// 0.3663 / 0.2861 / 0.2298 block by block; block 64 1-2% slower with Pipe (0.2068 / 0.1700 against
// 0.2019 / 0.1688 ms at 0.8 / 0.86, equal at 0.9).
enum class RetireChoice { kEach, kAtChunk, kAuto };
Retire xres_retire(int block) {
  static const RetireChoice v = env_choice<RetireChoice>(
      "VITRT_BSR_XRES_PIPE",
      {{"0", RetireChoice::kEach}, {"chunk", RetireChoice::kAtChunk},
       {"lean", RetireChoice::kAtChunk}, {"tables", RetireChoice::kAtChunk}},
      RetireChoice::kAuto);
  switch (v) {
    case RetireChoice::kEach: return Retire::kEach;
    case RetireChoice::kAtChunk: return Retire::kAtChunk;
    default: return block == 64 ? Retire::kEach : Retire::kAtChunk;
  }
}

// VITRT_BSR_XRES_GROUP: "0" runs the block-rows one at a time; otherwise blocks 32 and 16 run them
// in groups of 64 columns (RG = 2 / 4) where the block-row count allows: one epilogue per group,
// block 64's store pattern, and the group's blocks issued back to back. Block 32's ungrouped form
// measured no faster than bsr_gemm.cu's kernel (BENCHMARKS.md 2026-12-03 15:54 session, call 3);
// grouped (two pairs, chunk by chunk) it is the default (xres_auto_selected).
bool xres_group() {
  static const bool v = kernel_mode_from_env("VITRT_BSR_XRES_GROUP") != KernelMode::Off;
  return v;
}

// Whether a weight's block-rows run in 64-column groups: blocks 32 / 16, grouping not switched off,
// and a block-row count that the group size divides.
bool xres_runs_grouped(int block, int64_t block_rows) {
  const int group = 64 / block;
  return group > 1 && xres_group() && block_rows % group == 0;
}

template <int B, XresAct Gelu, int RG, bool HasBias>
void launch_xres_rg(const XresArgs& a, int grid, size_t smem, int pairs) {
  constexpr int kT = xres_threads(1);
  if constexpr (RG > 1) {
    if (pairs == 2)
      return bsr_wgmma::launch<bsr_xres_kernel<B, Gelu, Retire::kAtChunk, RG, 2, HasBias>>(a, grid, xres_threads(2), smem,
                                                                                           kMaxSmem);
  }
  switch (xres_retire(B)) {
    case Retire::kAtChunk:
      return bsr_wgmma::launch<bsr_xres_kernel<B, Gelu, Retire::kAtChunk, RG, 1, HasBias>>(a, grid, kT, smem, kMaxSmem);
    default:
      if constexpr (B == 64 && RG == 1) {  // block 64's default ring: its shape fixed at compile time
        if (a.chunk_log2 == 0 && a.ring_slots == XresCfg<64>::S)
          return bsr_wgmma::launch<bsr_xres_kernel<B, Gelu, Retire::kEach, RG, 1, HasBias, true>>(a, grid, kT, smem,
                                                                                                  kMaxSmem);
      }
      return bsr_wgmma::launch<bsr_xres_kernel<B, Gelu, Retire::kEach, RG, 1, HasBias>>(a, grid, kT, smem, kMaxSmem);
  }
}

template <int B, XresAct Gelu, bool HasBias>
void launch_xres(const XresArgs& a, int grid, size_t smem, int pairs) {
  constexpr int kGroup = 64 / B;  // rows of a 64-column group
  if constexpr (kGroup > 1) {
    if (xres_runs_grouped(B, a.block_rows)) return launch_xres_rg<B, Gelu, kGroup, HasBias>(a, grid, smem, pairs);
  }
  launch_xres_rg<B, Gelu, 1, HasBias>(a, grid, smem, 1);
}

template <int B, bool HasBias>
void launch_xres_act(XresAct act, const XresArgs& a, int grid, size_t smem, int pairs) {
  switch (act) {
    case XresAct::kNone: return launch_xres<B, XresAct::kNone, HasBias>(a, grid, smem, pairs);
    case XresAct::kGelu: return launch_xres<B, XresAct::kGelu, HasBias>(a, grid, smem, pairs);
  }
}
template <int B>
void launch_xres_bias(XresAct act, const XresArgs& a, int grid, size_t smem, int pairs) {
  if (a.bias) launch_xres_act<B, true>(act, a, grid, smem, pairs);
  else launch_xres_act<B, false>(act, a, grid, smem, pairs);
}

// VITRT_BSR_XRES: "0" off, "1" wherever supported; unset / other ("auto"): xres_auto_selected.
KernelMode xres_mode() {
  static const KernelMode v = kernel_mode_from_env("VITRT_BSR_XRES");
  return v;
}

// VITRT_BSR_XRES_CHUNK: blocks per bulk copy of W (rounded down to a power of two, at most 8 KB per
// copy: 16 gives 8 KB chunks at every block size); VITRT_BSR_XRES_RING: the ring's KB (at most 24).
// Unset: the measured defaults, 8 blocks per copy at block 16 (4 KB, 3 slots), 2 at block 32 (4 KB,
// 4 slots), one at block 64. On the H100 (2026-12-05, fc1 shape, M = 50432, BENCHMARKS.md) block 16
// (retired chunk by chunk) went from 1.436 / 1.009 / 0.747 ms at 0.8 / 0.86 / 0.9 (one block per
// copy) to 0.904 / 0.660 / 0.508 (4 blocks per copy in 4 slots: 0.974 / 0.713 / 0.544; later, with
// two pairs and the table-driven loop, 4 blocks per copy 0.492 / 0.404 / 0.346 against 8's 0.467 /
// 0.383 / 0.330); block 32 table-driven with 2 blocks per copy 0.313 / 0.253 / 0.212 against one's
// 0.363 / 0.292 / 0.241 (with Pipe it had measured as with one). A 24 KB ring does not fit next
// to the x slabs and the tables at blocks 32 and 16 (xres_smem_for then declines the weight and the
// other kernels run it: what the first A/B runs of 8 KB chunks at block 32 measured).
XresRing xres_ring(int block) {
  static const int chunk_env = int_from_env("VITRT_BSR_XRES_CHUNK"), ring_env = int_from_env("VITRT_BSR_XRES_RING") * 1024;
  const int chunk = chunk_env > 0 ? chunk_env : block == 16 ? 8 : block == 32 ? 2 : 1;
  return block == 64   ? xres_ring_for<64>(chunk, ring_env)
         : block == 32 ? xres_ring_for<32>(chunk, ring_env)
                       : xres_ring_for<16>(chunk, ring_env);
}

// Two pairs' rings (XresPairs): the ring of xres_ring, cut to 12 KB per pair (three slots at least).
constexpr int kPairRingBytes = 12 * 1024;
XresRing xres_pair_ring(int block) {
  XresRing ring = xres_ring(block);
  const int chunk_bytes = (block * block * 2) << ring.chunk_log2;
  ring.slots = std::max(3, std::min(ring.slots, kPairRingBytes / chunk_bytes));
  return ring;
}

// VITRT_BSR_XRES_PAIRS: "2" runs blocks 16 / 32 (in groups) with two pairs of consumer warpgroups,
// each pair on alternate groups from its own W ring and producer, retired chunk by chunk, y stored
// from registers as whole lines (rows_to_lines), where that fits in shared memory; "1"
// one pair; unset: two at blocks 16 and 32, one at block 64. Why: block 16's time goes to each
// warp's chain of dependent instructions per block (ncu, 2026-12-05: stalls on fixed-latency
// dependencies, two warps per scheduler), not to the tensor cores; a second pair gives each
// scheduler four warps to switch between. Measured on the H100 (2026-12-05 ~16:33 UTC, fc1 shape,
// M = 50432): block 16 0.590 / 0.468 / 0.386 ms at 0.8 / 0.86 / 0.9 against 0.755 / 0.569 / 0.445
// with one pair; block 32 then slower with two (0.370 / 0.309 / 0.286 against 0.372 / 0.297 / 0.247
// ms with one pair, 2-block chunks), while two pairs stored 4-byte pairs from registers; with
// whole-line stores (2026-12-05 evening) block 32 with two pairs takes 0.276 / 0.225 / 0.200 ms
// against one pair's 0.317-0.323 / 0.256-0.260 / 0.216-0.225 (see the note above XresCfg).
int xres_pairs_env() {
  static const int v = int_from_env("VITRT_BSR_XRES_PAIRS");
  return v;
}

// Shared memory for w (its tables sized for every block stored when nnz is unknown), or 0 when the
// kernel does not cover it.
size_t xres_smem_for(const BsrDeviceView& w);

// Shared memory for w's launch with `pairs` pairs and `ring` (its shape already checked).
size_t xres_smem_bytes_for(const BsrDeviceView& w, XresRing ring, int pairs) {
  const size_t tables = xres_table_bytes(w);
  return w.block == 64   ? xres_smem_bytes<64>(w.cols, tables, ring, pairs)
         : w.block == 32 ? xres_smem_bytes<32>(w.cols, tables, ring, pairs)
                         : xres_smem_bytes<16>(w.cols, tables, ring, pairs);
}

// 2 where VITRT_BSR_XRES_PAIRS asks for two pairs and w's launch can take them (blocks 16 / 32 in
// groups, both rings next to the x slabs and the tables), else 1.
int xres_pairs_for(const BsrDeviceView& w) {
  const int want = xres_pairs_env() > 0 ? xres_pairs_env() : w.block == 16 || w.block == 32 ? 2 : 1;
  if (want != 2 || (w.block != 16 && w.block != 32) || xres_smem_for(w) == 0 ||
      !xres_runs_grouped(w.block, w.rows / w.block))
    return 1;
  return xres_smem_bytes_for(w, xres_pair_ring(w.block), 2) <= kMaxSmem ? 2 : 1;
}

size_t xres_smem_for(const BsrDeviceView& w) {
  if ((w.block != 16 && w.block != 32 && w.block != 64) || w.cols > kMaxK || w.cols % w.block != 0 ||
      w.rows % w.block != 0)
    return 0;
  if (!w.values_core_matrix && w.nnz != 0) return 0;  // the blocks go by bulk copies of that copy
  const int64_t block_rows = w.rows / w.block;
  if (block_rows >= (int64_t{1} << 20)) return 0;
  const size_t bytes = xres_smem_bytes_for(w, xres_ring(w.block), 1);
  return bytes <= kMaxSmem ? bytes : 0;
}

// The default choice: one 128-token tile per SM at least (below that the tiles leave SMs idle), and
// blocks 32 / 16 in groups of 64 columns, or block 64 on >= 4 TB/s cards. Measured on the H100
// (2026-12-05 ~16:45 UTC, 3072 x 768, M = 50432, ms at 0.8 / 0.86 / 0.9): block 16 (two pairs,
// table-driven) 0.467 / 0.383 / 0.330 against the mma.sync kernel's 1.003 / 0.762 / 0.616; block
// 32 (table-driven, 2-block chunks) 0.313 / 0.253 / 0.212 against the streamed kernel's 0.350 /
// 0.285 / 0.243. (On the H200, block 32 with Pipe had beaten the streamed kernel too: 0.3495 /
// 0.2738 / 0.2203 against 0.3506-0.3598 / 0.2900-0.2924 / 0.2454-0.2505.)
bool xres_auto_selected(int64_t M, const BsrDeviceView& w) {
  // Block 64: on the H200 this kernel beat the streamed one (2.03x of cuBLASLt at 0.9 against
  // 1.86x, 2026-12-04 16:00 call 4); on the H100 the streamed kernel was faster: 0.199-0.204 /
  // 0.176-0.181 / 0.168-0.169 ms against 0.228-0.230 / 0.190-0.192 / 0.171-0.172 (two calls,
  // 2026-12-05 16:20 UTC). The rule keys on memory bandwidth (3.35 against 4.8 TB/s), the main
  // difference between the two cards; why the streamed kernel wins on the H100 is not profiled.
  // And only at 85% sparsity or more: below it the streamed kernel is faster on the H200 too
  // (2026-12-06, fc1 shape, M = 50432, two alternating runs each, ms at 0.8 / 0.82 / 0.84 / 0.86 /
  // 0.88 / 0.9: streamed 0.196-0.208 / 0.190-0.200 / 0.185-0.189 / 0.174-0.186 / 0.166-0.173 /
  // 0.160-0.164, this kernel 0.210-0.211 / 0.204 / 0.188-0.189 / 0.176 / 0.164 / 0.154-0.155): with
  // ~2.4 blocks per block-row at 0.8 the streamed kernel's CTA per (tile, block-row) amortises its
  // set-up, and this kernel's single 8 KB-slot ring (three slots next to the x) waits on W fills.
  // Since both kernels' epilogues lost their run-time checks (bb1f27a), the H100 too runs this
  // kernel faster at 90% sparsity (fc1, four alternating runs, 2026-12-06 ~05:40 UTC: 0.163-0.165
  // ms against the streamed 0.167-0.180), the streamed one below it (0.84: 0.157-0.160 against
  // 0.200-0.202; 0.87: 0.164-0.170 against 0.179-0.182; 0.88-0.89 within noise): both at the ~0.16
  // ms that this card's y writes take from 0.84 up. So: density <= 0.15 on >= 4 TB/s cards (not
  // re-measured there since), <= 0.11 below (90% sparsity with its rounding; 0.89 is a tie).
  const bool fast_memory = peak_memory_gbps() >= 4000.0;
  const int64_t block_count = (w.rows / w.block) * (w.cols / w.block);
  const bool sparse_enough =
      w.nnz < 0 || (fast_memory ? w.nnz * 20 <= block_count * 3 : w.nnz * 100 <= block_count * 11);
  const bool grouped = (w.block == 16 || w.block == 32) && xres_runs_grouped(w.block, w.rows / w.block);
  const bool block_ok = (w.block == 64 && sparse_enough) || grouped;
  return block_ok && (M + kTileM - 1) / kTileM >= sm_count();
}

}  // namespace

bool bsr_xres_supported(const BsrDeviceView& w, const void* residual, DType out_dtype) {
  return device_is_sm90() && residual == nullptr && out_dtype == DType::BF16 && xres_smem_for(w) > 0;
}

int bsr_xres_pairs(const BsrDeviceView& w) { return device_is_sm90() ? xres_pairs_for(w) : 1; }

bool bsr_xres_selected(int64_t M, const BsrDeviceView& w, const void* residual, DType out_dtype) {
  const KernelMode mode = xres_mode();
  if (mode == KernelMode::Off || !bsr_xres_supported(w, residual, out_dtype)) return false;
  return mode == KernelMode::On || xres_auto_selected(M, w);
}

void bsr_linear_bf16_xres(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y,
                          int max_ctas) {
  constexpr const char* kOp = "cuda bsr_linear_bf16 (x-resident)";
  check_bsr_linear_args(kOp, x, M, w, nullptr, y);
  VITRT_CHECK(bsr_xres_supported(w, nullptr, DType::BF16), InvalidArgument, kOp,
              ": needs sm_90, block 16, 32 or 64, K <= ", kMaxK, " and the core-matrix copy of the blocks (block ", w.block,
              ", K ", w.cols, ")");
  const int64_t tiles = (M + kTileM - 1) / kTileM;
  if (tiles == 0) return;
  VITRT_CHECK(reinterpret_cast<uintptr_t>(bias) % 4 == 0, InvalidArgument, kOp,
              ": the bias must be 4-byte aligned (read as bf16 pairs)");
  VITRT_CHECK(M <= INT32_MAX - kTileM, InvalidArgument, kOp, ": too many tokens (", M, ")");
  XresArgs a{};
  a.x_map = bf16_tensor_map_2d(x, M, w.cols, kSlabCols, 64, CU_TENSOR_MAP_SWIZZLE_128B);  // 64 x 64 boxes
  a.M = M;
  a.N = static_cast<int>(w.rows);
  a.slabs = xres_slabs(w.cols);
  a.block_rows = static_cast<int>(w.rows / w.block);
  a.rp_bytes = static_cast<int>(xres_row_ptr_bytes(a.block_rows));
  a.nnz_cap = static_cast<int>(xres_col_capacity(w));
  const int pairs = xres_pairs_for(w);
  const XresRing ring = pairs == 2 ? xres_pair_ring(w.block) : xres_ring(w.block);
  a.chunk_log2 = ring.chunk_log2;
  a.ring_slots = ring.slots;
  a.row_ptr = w.row_ptr;
  a.col_idx = w.col_idx;
  a.values_cm = static_cast<const bf16*>(w.values_core_matrix);
  a.bias = static_cast<const bf16*>(bias);
  a.y = static_cast<bf16*>(y);
  a.tiles = static_cast<int>(tiles);
  int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
  if (max_ctas > 0) grid = std::min(grid, max_ctas);
  const size_t smem = pairs == 1 ? xres_smem_for(w) : xres_smem_bytes_for(w, ring, 2);
  const XresAct act = gelu ? XresAct::kGelu : XresAct::kNone;
  if (w.block == 64) launch_xres_bias<64>(act, a, grid, smem, 1);
  else if (w.block == 32) launch_xres_bias<32>(act, a, grid, smem, pairs);
  else launch_xres_bias<16>(act, a, grid, smem, pairs);
}

}  // namespace vitrt::cuda
