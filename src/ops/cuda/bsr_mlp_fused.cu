// Hopper fused block-sparse MLP: y = fc2(GELU(fc1(x) + b1)) + b2 + residual with both weights BSR in
// 64 x 64 blocks, the hidden activation never leaving the SM (sm_90a, wgmma).
//
// Why: at 90% sparsity the two block-sparse linears of a ViT-B MLP are bound by memory, not math.
// fc1 writes its [M, 3072] bf16 output (310 MB at M = 50432: 0.086 ms at the measured store rate)
// and fc2 reads it back; together they take 0.30 ms per layer for 10% of the dense work. Fusing the
// pair removes both transfers, at the cost of recomputing ~20% of fc1 (bsr_mlp_schedule.h).
// Structure (the x-resident kernel's, bsr_gemm_xres.cu, with a second GEMM in the loop), as first
// built (the resident form; the streamed forms below differ in where x comes from and in the unit of
// work: a tile and one fc2 block-row, MlpForm::units):
//  - a persistent CTA takes tiles of 128 tokens (a contiguous range of them); each tile's x rows ([128, D] bf16, D <= 768) are
//    loaded once by TMA into shared memory as 64-column slabs in the 128-byte swizzle, only the
//    slabs some fc1 block reads; each half is reloaded for the next tile as soon as its warpgroup
//    has retired the tile's last fc1 block (the "last" flag of the schedule);
//  - the schedule (host-built, bsr_mlp_schedule.h) is copied into shared memory; one producer thread
//    streams the stored blocks of both weights in its order through a 4-slot ring (bulk copies of
//    the core-matrix copies, bsr_core_matrix_order; full / empty mbarriers per slot);
//  - two consumer warpgroups own 64 tokens each and walk the same schedule: per fc2 block-row i (a 64-wide
//    slice of y, 32 fp32 accumulators per thread, starting from 2 b2 (halved in the epilogue); the residual
//    loaded when the block-row starts), per hidden block j that row reads: h_j = x W1[j, :]^T on wgmma (A =
//    the x slabs, B = W1's blocks in the ring), + b1 and GELU in registers, packed to bf16 as the A fragments
//    of the next wgmma (the accumulator layout of m64n64 is the A fragment layout of m64nNk16, as P in flash
//    attention), then y_i += h_j W2[i, j]^T (A from registers, B from the ring). Each ring slot's wgmma group
//    is retired after the next one is issued (as bsr_gemm_stream.cu); the GELU waits for every group (it
//    reads h).
// h is rounded to bf16 where the unfused path rounds fc1's output, so with fp32 GELUs the two paths
// differ by accumulation-order rounding only (2-4e-5 relative, BENCHMARKS.md); the streamed forms'
// default bf16x2 GELUs (VITRT_BSR_MLP_GELU, below) add about a bf16 step per hidden value (1.2e-3).
// Measured (BENCHMARKS.md, 2026-12-04 18:18 session): the resident form is latency-bound. The 192 KB of
// resident x leave room for two consumer warpgroups only (ncu: 0.44 eligible warps per scheduler);
// slower than the two linears for ViT-B at 90% (0.320 against 0.302 ms). The streamed form (MlpForm,
// the default since the 20:22 session) gives up the residency for a third warpgroup: 0.241 ms there
// (two linears 0.302, dense 0.685), 0.235 with the software-pipelined step order (PIPE, below; its
// default in the streamed form, slower in the resident one). ops::mlp_bsr takes the fused kernel by
// measurement. ncu of the streamed plain form (20:22 session, call 2): 17% of the warp samples issuing,
// long-scoreboard 23% (the largest single stall: b1's loads at each step, 8%), wgmma waits 22%.
// Tried and taken out (call 6 of that session): b2 and the residual as volatile ("pinned") loads at
// each block-row's start, y from zero, and b1 loaded one step ahead: 7-13% slower at every shape
// (ViT-B @ 0.9 0.343 against 0.320 ms; 162 registers against 152).
// tests/protocol/test_bsr_mlp_protocol.py models the barrier protocol of both step orders (random
// interleavings: no deadlock, no buffer read early or refilled while read); keep the two in step.
// Scope: sm_90, bf16, block 64, D = fc1.cols <= 768 (resident form) / 1024 (streamed forms: the
// schedule's 4-bit column block; ViT-L), fc2.rows a multiple of 64, a schedule that fits
// shared memory (resident form, next to x: ViT-B at 90% sparsity yes, at 80% no; streamed, next to its
// ring: ~8.6K words with three warpgroups, ~6.6K with four); the core-matrix copies present.
// Everything else runs the two linears unfused (ops::mlp_bsr).
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/bsr_mlp_units.h"
#include "ops/cuda/bsr_wgmma.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/env_choice.h"
#include "ops/cuda/mbarrier.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/wgmma.cuh"
#include "vitrt/error.h"

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kB = 64;                    // block size
constexpr int kMaxK = 768;                // resident form: 128 x 768 bf16 = 192 KB of resident x per CTA
constexpr int kMaxKStream = 1024;         // streamed forms: the schedule's 4-bit column block (ViT-L's 1024)
constexpr int kSlabCols = 64;             // x slabs of 64 columns (128-byte rows)
constexpr int kSlabBytes = 64 * 128;      // one warpgroup's slab: 64 rows x 128 bytes
constexpr int kMaxSlabs = kMaxK / kSlabCols;
constexpr int kBlockBytes = kB * kB * 2;  // one W block
constexpr size_t kMaxSmem = 227 * 1024;
constexpr size_t kAlignSlack = 1024;  // the x slabs start 1024-byte aligned (128-byte swizzle)

// The two forms (VITRT_BSR_MLP_STREAM, below).
//  - resident (STREAM false): a tile's x rows stay in shared memory ([2 warpgroups][slabs] of 64 x 64,
//    192 KB at D = 768) and a 4-slot ring streams W blocks only: two consumer warpgroups, 128 tokens;
//  - streamed (STREAM true): nothing resident. Every fc1 block's slot carries, next to the W block,
//    the x slab it multiplies (the tile's 192 rows of x's column block k: one TMA box, 24 KB, from
//    L2 after its first read); fc2 blocks use the W part of a slot only. Without the 192 KB of x the
//    CTA has room for three consumer warpgroups (192 tokens) and a 6-slot ring: the resident form is
//    latency-bound at two warps per scheduler (BENCHMARKS.md, 2026-12-04 18:18 session).
//  - streamed with four consumer warpgroups (WG = 4, VITRT_BSR_MLP_WARPGROUPS=4; plain step order only):
//    256 tokens per tile, 40 KB slots, a 5-slot ring; 640 threads launch at 96 registers, so the
//    consumers get 112 (setmaxnreg): the residual is loaded in the epilogue instead of ahead of the
//    block-row's MMAs, and the pipelined order's second h accumulator does not fit. Why: the
//    three-warpgroup form is latency-bound (1.03 eligible warps per scheduler, ncu: BENCHMARKS.md,
//    2026-12-04 20:22 session, call 2); a fourth warpgroup is a fourth chain of steps to hide it.
//    Measured fastest of the streamed forms: the default (VITRT_BSR_MLP_WARPGROUPS, below).
//  (Taken out on 2026-12-06: split rings, the x slabs in a ring of their own next to a ring of W blocks,
//  with the x slab of consecutive fc1 blocks reused: slower than one ring at every shape measured, on
//  H100s and the H200, ViT-B @ 0.9 0.199 against 0.188 ms (H100), 0.1885 against 0.1742 (H200);
//  BENCHMARKS.md, 2026-12-05 and 2026-12-06 sessions; `git show 6bd363f` has them.)
template <bool STREAM, bool PIPE = false, int WG = (STREAM ? 3 : 2)>
struct MlpForm {
  static_assert(STREAM ? (WG == 3 || (WG == 4 && !PIPE)) : WG == 2, "the forms that exist");
  static constexpr int kWarpgroups = WG;
  static constexpr int kTileM = 64 * kWarpgroups;       // tokens per tile
  static constexpr int kConsumerWarps = 4 * kWarpgroups;
  // + the producers: one warp (resident form), or a whole warpgroup (streamed form) so that it can hand
  // its registers to the consumers (setmaxnreg is per warpgroup): 13 warps would leave 128 registers
  // per thread (four warps of one scheduler share its 64 KB), the consumers need 152. One thread works.
  static constexpr int kProducerWarps = STREAM ? 4 : 1;
  static constexpr int kThreads = 32 * (kConsumerWarps + kProducerWarps);
  // (PIPE holds two h accumulators: 168 registers in the resident form; streamed, the producers keep
  // what is left once the consumers have 160: 32 (a producer spilled at 24).)
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kConsumerRegs = WG == 4 ? 112 : PIPE ? 160 : 152;
  static constexpr int kProducerRegs = PIPE || WG == 4 ? 32 : 40;
  static_assert(!STREAM || 32 * (kConsumerWarps * kConsumerRegs + kProducerWarps * kProducerRegs) <= kThreads * kLaunchRegs,
                "setmaxnreg must redistribute the launch's registers, not ask for more");
  // The ring (streamed: of [x slab][W block] slots; resident: of W blocks).
  static constexpr int kRing = !STREAM ? 4 : WG == 4 ? 5 : 6;
  static constexpr int kXSlotBytes = STREAM ? kTileM * 128 : 0;   // an x slab (streamed forms)
  static constexpr int kSlotBytes = kXSlotBytes + kBlockBytes;    // a slot
  static_assert(kSlotBytes % 1024 == 0 && kXSlotBytes % 1024 == 0, "x slabs stay 1024-byte aligned (128-byte swizzle)");
  // A unit of work (bsr_mlp_units.h): one tile's token rows and one fc2 block-row (streamed forms:
  // nothing of a tile is held in shared memory across its block-rows, so the block-rows of a tile can
  // go to different CTAs, and a batch with fewer tiles than SMs still fills the GPU); in the resident
  // form a whole tile (its x is loaded once for every block-row).
  __host__ __device__ static int64_t units(int64_t tiles, int groups) { return STREAM ? tiles * groups : tiles; }
  // The biases as fp32 in shared memory (streamed forms; the resident form's 192 KB of x leave no room):
  // b1, added at the GELU (plain order) or seeding the accumulators (pipelined order), then 2 b2, seeding
  // y. Why: from global memory each step's b1 took 8 loads, 16 conversions and 8 packs for a null b1
  // besides its 32 additions (ncu, H100, 2026-12-06: ~570 SASS instructions per warp and step), and the
  // loads' latency stalled the GELU. Measured (ncu, ViT-B @ 0.9): 103.9 -> 90.7 M warp instructions with
  // the residual's loads below, 181.7 -> 173.4 us; the fused MLP 2-5% faster, ViT-B/16 bs256 1.57x ->
  // 1.59x (H100), 1.64x on the H200 (BENCHMARKS.md, 2026-12-06 ~09:55-10:34 UTC).
  static constexpr bool kBiasSmem = STREAM;
  // [resident x slabs][ring][mbarriers][schedule: group_begin, words][biases] (the schedule's
  // words are read on every step's critical path, by the producer and the consumers; from global memory
  // they missed L1, which the 227 KB of shared memory leaves small: ~7% of the consumers' stall samples).
  // bias_floats: fc1.rows + fc2.rows.
  static size_t smem_bytes(int slabs, int64_t schedule_ints, int64_t bias_floats) {
    const size_t resident = STREAM ? 0 : 2 * static_cast<size_t>(slabs) * kSlabBytes;
    const size_t schedule = static_cast<size_t>(schedule_ints) * sizeof(int32_t);
    return kAlignSlack + resident + static_cast<size_t>(kRing) * kSlotBytes +
           (2 * kMaxSlabs + 2 + 2 * kRing) * sizeof(uint64_t) + schedule +
           (kBiasSmem ? 16 + static_cast<size_t>(bias_floats) * sizeof(float) : 0);
  }
};

struct MlpArgs {
  CUtensorMap x_map;  // x [M, D] bf16, boxes of 64 columns x 64 (resident) / 192 (streamed) rows, 128-byte swizzle
  int64_t M;
  int N;       // fc2.rows: y's width
  int H;       // fc1.rows: the hidden width
  int slabs;   // ceil(D / 64)
  unsigned k_mask;  // the slabs that fc1 blocks read (only those are loaded)
  int tiles;
  int groups;
  int whole_tiles;  // streamed forms: every CTA's range of units is whole tiles (host: bsr_mlp_bf16_fused)
  BsrMlpTileParts parts;  // streamed forms: tiles shared by parts.ctas CTAs (bsr_mlp_units.h); 0: ranges
  const int32_t* words;        // the schedule (bsr_mlp_schedule.h)
  const int32_t* group_begin;  // [groups + 1]
  int nwords;                  // group_begin[groups]
  const bf16* w1_cm;           // fc1's blocks in core-matrix order
  const bf16* w2_cm;           // fc2's
  const bf16* b1;              // [H] or null
  const bf16* b2;              // [N] or null
  const bf16* residual;        // [M, N] or null (may be y)
  bf16* y;                     // [M, N]
  int gelu_bf16x2;             // the GELUs in bf16x2 arithmetic (VITRT_BSR_MLP_GELU, below)
  int prefetch_residual;       // the four-warpgroup form: the residual's lines into L2 at each block-row's start
  // (y by streaming stores, as the x-resident kernel writes at blocks 16 / 32, changed nothing here:
  // ViT-B/16 bs256 1.53-1.55x per round either way, H100, 2026-12-06; taken out.)
};

// PIPE: the software-pipelined form (VITRT_BSR_MLP_PIPE, below): a warpgroup issues the next hidden
// block's fc1 wgmmas before it computes the GELU of the current one, so that the GELU runs while
// the tensor cores work (two h accumulators); the producer then streams each step's fc2 block after
// the next step's fc1 blocks, the order in which the consumers take them. Without PIPE a step's
// fc1 blocks, GELU and fc2 block follow each other, and only the other warpgroup overlaps the GELU.
template <bool PIPE, bool STREAM, int WG>
__global__ void __launch_bounds__(MlpForm<STREAM, PIPE, WG>::kThreads, 1)
    bsr_mlp_fused_kernel(const __grid_constant__ MlpArgs p) {
#if VITRT_WGMMA_ENABLED
  using F = MlpForm<STREAM, PIPE, WG>;
  constexpr int kTileM = F::kTileM, kRing = F::kRing, kConsumerWarps = F::kConsumerWarps, kThreads = F::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((kAlignSlack - (ptx::smem_u32(smem_raw) & (kAlignSlack - 1))) & (kAlignSlack - 1));
  const int ns = p.slabs;
  unsigned char* xs = smem;  // resident: [2 halves][ns slabs][64 rows x 128 B], swizzled
  unsigned char* ring = xs + (STREAM ? 0 : 2 * ns * kSlabBytes);  // [kRing][x slab (streamed)][W block 64 x 64]
  unsigned char* ws = ring + F::kXSlotBytes;  // slot s's W block at ws + s * kSlotBytes (core-matrix layout)
  uint64_t* xfull = reinterpret_cast<uint64_t*>(ring + kRing * F::kSlotBytes);  // resident: [2][kMaxSlabs] slab landed
  uint64_t* xempty = xfull + 2 * kMaxSlabs;      // [2] the half's 4 warps are done with x
  uint64_t* wfull = xempty + 2;                  // [kRing] block landed
  uint64_t* wempty = wfull + kRing;              // [kRing] every consumer warp has retired it
  int32_t* gb_s = reinterpret_cast<int32_t*>(wempty + kRing);  // [groups + 1]
  int32_t* words_s = gb_s + p.groups + 1;                       // [nwords]
  for (int i = threadIdx.x; i <= p.groups; i += kThreads) gb_s[i] = __ldg(p.group_begin + i);
  for (int i = threadIdx.x; i < p.nwords; i += kThreads) words_s[i] = __ldg(p.words + i);
  // (streamed forms: b1 [H] and 2 b2 [N] as fp32, 16-byte aligned; MlpForm::kBiasSmem. By pointer
  // arithmetic from smem, not through an integer: the loads then stay shared-memory loads.)
  unsigned char* const bias_base = reinterpret_cast<unsigned char*>(words_s + p.nwords);
  float* const b1_s = reinterpret_cast<float*>(bias_base + ((16 - (ptx::smem_u32(bias_base) & 15)) & 15));
  float* const b2x2_s = b1_s + p.H;
  const unsigned b1_u32 = ptx::smem_u32(b1_s) + 8 * (threadIdx.x % 4), b2x2_u32 = ptx::smem_u32(b2x2_s);
  if constexpr (F::kBiasSmem) {
    for (int i = threadIdx.x; i < p.H; i += kThreads) b1_s[i] = p.b1 ? __bfloat162float(p.b1[i]) : 0.f;
    for (int i = threadIdx.x; i < p.N; i += kThreads) b2x2_s[i] = p.b2 ? 2.f * __bfloat162float(p.b2[i]) : 0.f;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This CTA's units (MlpForm::units): a contiguous range, or its part of shared tiles (bsr_mlp_units.h).
  const int unit_groups = STREAM ? 1 : p.groups;     // block-rows per unit
  const int tile_units = STREAM ? p.groups : 1;      // units per tile
  // (tiles shared by P CTAs: p.parts, the streamed forms only, where the host chose it)
  const BsrMlpUnitCursor units0(p.tiles, tile_units, p.whole_tiles != 0, p.parts, blockIdx.x, gridDim.x);
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2 * kMaxSlabs; ++i) mbar::init(&xfull[i], 1);
    for (int i = 0; i < 2; ++i) mbar::init(&xempty[i], 4);
    for (int s = 0; s < kRing; ++s) mbar::init(&wfull[s], 1), mbar::init(&wempty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp >= kConsumerWarps) {
    // ---- producer: one thread. Per tile: each half's x slabs (once that half released the previous
    // tile's; resident form), then every block of the schedule, group by group, in the consumers' order.
    if constexpr (STREAM) ptx::setmaxnreg_dec<F::kProducerRegs>();
    if (lane != 0 || warp - kConsumerWarps >= 1) return;  // (lane 0 of the first producer warp)
    int slot = 0, n = 0;
    unsigned round = 0;  // parity of the ring round of `slot`
    int tile = 0;
    // One block into the next slot; x_col >= 0 (streamed forms, fc1 blocks): with the tile's x slab of
    // column block x_col, counted on the same full barrier.
    auto emit = [&](const bf16* src, int x_col) {
      if (n >= kRing) mbar::wait(&wempty[slot], round ^ 1);  // its previous block retired by every consumer warp
      const bool x_here = STREAM && x_col >= 0;
      mbar::arrive_expect_tx(&wfull[slot], kBlockBytes + (x_here ? F::kXSlotBytes : 0));
      mbar::bulk_copy_to_smem(ws + slot * F::kSlotBytes, src, kBlockBytes, &wfull[slot]);
      if (x_here)
        mbar::tma_load_2d(ring + slot * F::kSlotBytes, &p.x_map, x_col * kSlabCols, tile * kTileM, &wfull[slot]);
      if (++slot == kRing) slot = 0, round ^= 1;
      ++n;
    };
    auto emit_fc1 = [&](int w, int n1) {
      for (int q = 0; q < n1; ++q) {
        const int32_t word = words_s[w + q];
        emit(p.w1_cm + static_cast<int64_t>(word >> 5) * (kB * kB), STREAM ? (word & 15) : -1);
      }
    };
    auto emit_fc2 = [&](int w, int n2) {
      for (int q = 0; q < n2; ++q) emit(p.w2_cm + static_cast<int64_t>(words_s[w + q] >> 1) * (kB * kB), -1);
    };
    BsrMlpUnitCursor units = units0;
    int grp0 = 0;
    for (int tc = 0; units.next(p.parts, tile, grp0); ++tc) {
      if (!STREAM && p.k_mask != 0)
        for (int h = 0; h < 2; ++h) {
          if (tc > 0) mbar::wait(&xempty[h], (tc - 1) & 1);
          for (int s = 0; s < ns; ++s)
            if (p.k_mask >> s & 1) {
              uint64_t* full = &xfull[h * kMaxSlabs + s];
              mbar::arrive_expect_tx(full, kSlabBytes);
              mbar::tma_load_2d(xs + (h * ns + s) * kSlabBytes, &p.x_map, s * kSlabCols, tile * kTileM + 64 * h, full);
            }
        }
      for (int grp = grp0; grp < grp0 + unit_groups; ++grp) {
        const int we = gb_s[grp + 1];
        int prev_fc2 = -1, prev_n2 = 0;  // PIPE: the previous step's fc2 words, sent after this step's fc1 blocks
        for (int w = gb_s[grp]; w < we;) {
          const int32_t hdr = words_s[w++];
          const int n1 = (hdr >> 16) & 255, n2 = (hdr >> 24) & 255;
          emit_fc1(w, n1);
          w += n1;
          if (!PIPE) {
            emit_fc2(w, n2);
          } else {
            if (prev_fc2 >= 0) emit_fc2(prev_fc2, prev_n2);
            prev_fc2 = w, prev_n2 = n2;
          }
          w += n2;
        }
        if (PIPE && prev_fc2 >= 0) emit_fc2(prev_fc2, prev_n2);
      }
    }
    return;
  }

  // ---- consumer warpgroups: warpgroup h owns rows 64 h .. 64 h + 63 of each tile (x half h), warp
  // w4 rows 16 w4 .. 16 w4 + 15 of those; a thread holds rows g and g + 8 of its warp's 16, columns
  // 8 c + 2 t and + 1 of each 64-wide block.
  if constexpr (STREAM) ptx::setmaxnreg_inc<F::kConsumerRegs>();
  // (h through a shuffle: ptxas then knows it is warp-uniform, and the x descriptors built from it stay in
  // uniform registers; from threadIdx it built them per thread, five 64-bit moves and adds per wgmma)
  const int h = __shfl_sync(0xffffffffu, warp / 4, 0), w4 = warp % 4, g = lane / 4, t = lane % 4;
  // x: resident, this warpgroup's slabs; streamed, its 64 rows of slot 0's slab (+ slot offsets).
  const uint64_t xdesc = wgmma::make_smem_desc_sw128(STREAM ? ring + h * kSlabBytes : xs + h * ns * kSlabBytes, 1024);
  const uint64_t wdesc = wgmma::make_smem_desc(ws, 128, (kB / 8) * 128);
  // The ring as this warp sees it: the next slot to take, and the oldest taken but not yet handed
  // back (slots are taken and handed back in ring order); x_slot: the slot of the tile's last fc1
  // block while it is pending (x is released with it), else -1.
  int slot = 0, rel_slot = 0, pending = 0, x_slot = -1;
  unsigned round = 0;
  auto take = [&]() {
    const int s = slot;
    mbar::wait(&wfull[s], round);
    if (++slot == kRing) slot = 0, round ^= 1;
    ++pending;
    return s;
  };
  // Hands back the k oldest slots of a ring of `size` (k <= size: no more are ever taken).
  // (k is 0 to 2 at nearly every call: a rolled loop, lane 0's alone; unrolled, with the lanes
  // stepping rel, it was a third of a step's instructions outside the GELU)
  auto hand_back = [&](uint64_t* empty, int& rel, int k, int size) {
    if (lane == 0) {
      int s = rel;
#pragma unroll 1
      for (int i = 0; i < k; ++i) {
        mbar::arrive(&empty[s]);
        s = s + 1 == size ? 0 : s + 1;
      }
    }
    rel += k;
    if (rel >= size) rel -= size;
  };
  auto release = [&](int k) {
    if (k <= 0) return;
    if constexpr (STREAM) {  // (no resident x to hand back)
      hand_back(wempty, rel_slot, k, kRing);
    } else {
#pragma unroll 1
      for (int i = 0; i < k; ++i) {
        if (lane == 0) {
          mbar::arrive(&wempty[rel_slot]);
          if (rel_slot == x_slot) mbar::arrive(&xempty[h]);
        }
        if (rel_slot == x_slot) x_slot = -1;
        if (++rel_slot == kRing) rel_slot = 0;
      }
    }
    pending -= k;
  };
  // (the waits are unconditional: a wgmma wait that ptxas sees on one path only serialises every
  // wgmma of the kernel, C7518)
  auto retire_all_but_newest = [&]() {
    wgmma::wait<1>();
    release(pending - 1);
  };
  auto retire_all = [&]() {
    wgmma::wait<0>();
    release(pending);
  };
  unsigned xparity = 0;
  // acc += x rows (this warpgroup's 64) x fc1 block `word`, one commit group.
  auto issue_fc1 = [&](float(&acc)[32], int32_t word) {
    const int k = word & 15;
    const int s = take();
    if (!STREAM) {
      mbar::wait(&xfull[h * kMaxSlabs + k], xparity);
      if ((word >> 4) & 1) x_slot = s;
    }
    wgmma::fence_operands(acc);
    wgmma::fence();
    const uint64_t da = xdesc + (((STREAM ? s * F::kSlotBytes : k * kSlabBytes)) >> 4);
    const uint64_t db = wdesc + ((s * F::kSlotBytes) >> 4);
#pragma unroll
    for (int kk = 0; kk < kB / 16; ++kk) wgmma::wgmma_m64n64k16_ss(acc, da + 2 * kk, db + 16 * kk);
    wgmma::commit();
  };
  float yacc[32];
  // yacc += GELU(h_j) (registers) x fc2 block, one commit group.
  auto issue_fc2 = [&](unsigned(&hf)[4][4]) {
    const int s = take();
    wgmma::fence_operands(hf);
    wgmma::fence();
    const uint64_t db = wdesc + ((s * F::kSlotBytes) >> 4);
#pragma unroll
    for (int kk = 0; kk < kB / 16; ++kk) wgmma::wgmma_m64n64k16_rs<0>(yacc, hf[kk], db + 16 * kk);
    wgmma::commit();
  };
  // b1's values for this thread's columns 64 j + 8 c + 2 t, + 1, read when the step starts and added
  // at the GELU (seeding the accumulators with them would put the loads in front of the first wgmma).
  auto load_b1 = [&](int j, __nv_bfloat162(&hb)[8]) {
#pragma unroll
    for (int c = 0; c < 8; ++c)
      hb[c] = p.b1 ? *reinterpret_cast<const __nv_bfloat162*>(p.b1 + j * kB + 8 * c + 2 * t)
                   : __floats2bfloat162_rn(0.f, 0.f);
  };
  // The GELUs are 2 GELU(v) (dev::gelu_tanh_approx_x2): one multiplication fewer per hidden value. The
  // kernel carries 2 h into fc2, and so 2 y from 2 b2, halved in the epilogue: every step of the way is
  // a power-of-two scaling, which rounding commutes with (away from overflow and the subnormals), so y
  // is bit for bit what h would give.
  using dev::gelu_tanh_approx_x2;
  using dev::gelu_tanh_approx_x2_bf16x2;
  // (p.gelu_bf16x2: a kernel parameter, so the branch is uniform and made once per 64 x 64 block; the
  // streamed forms only: in the resident pipelined one the second path made ptxas spill)
  // 2 GELU(h_j + b1) as bf16 A fragments, one k16 step of the hidden block each: hacc[8 kk + 2 r] is n8
  // tile 2 kk + r / 2 (columns 8 (2 kk + r / 2) + 2 t), row g + 8 (r % 2).
  // (acc's wgmmas must have been retired and acc fenced: wgmma::fence_operands after the wait)
  // bias(c): b1's float2 for n8 tile c (columns 8 c + 2 t, + 1).
  auto gelu_pack_with = [&](const float(&acc)[32], auto&& bias, unsigned(&hf)[4][4]) {
    if (STREAM && p.gelu_bf16x2) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float2 b = bias(2 * kk + r / 2);
          hf[kk][r] = gelu_tanh_approx_x2_bf16x2(acc[8 * kk + 2 * r] + b.x, acc[8 * kk + 2 * r + 1] + b.y);
        }
      return;
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float2 b = bias(2 * kk + r / 2);
        hf[kk][r] = bsr_wgmma::pack_bf16x2(gelu_tanh_approx_x2(acc[8 * kk + 2 * r] + b.x),
                                           gelu_tanh_approx_x2(acc[8 * kk + 2 * r + 1] + b.y));
      }
  };
  // The bias source of hidden block j for gelu_pack_with / seed_b1_with: the shared-memory b1
  // (MlpForm::kBiasSmem), else hb (load_b1's registers).
  // (b1 by 32-bit shared addresses: a generic pointer held two more registers through the steps, and the
  // four-warpgroup form's spills grew)
  auto b1_of = [&](int j, const __nv_bfloat162(&hb)[8]) {
    if constexpr (F::kBiasSmem) {
      const unsigned b1j = b1_u32 + 4 * (j * kB);
      return [b1j](int c) { return ptx::lds_f32x2_ro(b1j + 32 * c); };
    } else {
      return [&hb](int c) { return __bfloat1622float2(hb[c]); };
    }
  };
  auto zero = [](float(&acc)[32]) {
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  };
  // The pipelined order's accumulators start from b1 instead (its loads made a step ahead, under the
  // previous step's wait), so that its GELU has no bias to add: gelu_pack_with's layout. (With the leaner
  // slot release below, 11% fewer SASS instructions in the streamed pipelined kernel; measured the same
  // speed, 0.2384 against 0.2385 ms at ViT-B @ 0.9: BENCHMARKS.md, 2026-12-04 20:22 session, call 4.)
  // bias(c): as gelu_pack_with's.
  auto seed_b1_with = [](float(&acc)[32], auto&& bias) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float2 b = bias(2 * kk + r / 2);
        acc[8 * kk + 2 * r] = b.x;
        acc[8 * kk + 2 * r + 1] = b.y;
      }
  };
  // (With the shared-memory b1 only the pipelined order seeds, where no wgmma group is in flight: in the
  // plain order, seeded with the previous step's fc2 group running, ptxas made the next fc1 wgmma wait
  // for it, C7517.)
  auto gelu_pack_seeded = [&](const float(&acc)[32], unsigned(&hf)[4][4]) {
    if (STREAM && p.gelu_bf16x2) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          hf[kk][r] = gelu_tanh_approx_x2_bf16x2(acc[8 * kk + 2 * r], acc[8 * kk + 2 * r + 1]);
      return;
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        hf[kk][r] = bsr_wgmma::pack_bf16x2(gelu_tanh_approx_x2(acc[8 * kk + 2 * r]),
                                           gelu_tanh_approx_x2(acc[8 * kk + 2 * r + 1]));
  };
  // (values read from memory reach ptxas as divergent; from lane 0 by shuffle they are uniform, and
  // a wgmma behind a divergent branch would serialise every wgmma of the kernel: C7518)
  auto word_at = [&](int w) { return __shfl_sync(0xffffffffu, words_s[w], 0); };

  // The residual of this thread's rows g and g + 8 of a block-row's slice (volatile loads: they stay
  // where they are written; the compiler sank plain ones from the block-row's start into the epilogue,
  // where ncu found the warps waiting for them).
  auto load_residual = [&](int64_t row0, int64_t col0, unsigned(&res)[2][8]) {
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int64_t m = row0 + 8 * pass;
      if (p.residual && m < p.M) {
        ptx::ld_cs_b32x8(p.residual + m * p.N + col0, res[pass]);
      } else {
#pragma unroll
        for (int c = 0; c < 8; ++c) res[pass][c] = 0;
      }
    }
  };

  // (The cursor was spilled to local memory through the steps (3 words, reloaded from L2 at each unit's
  // start: ~6% of the warps' stall samples, ncu, H100, 2026-12-06 ~10:18 UTC) while the residual's load
  // had two places behind a run-time switch; with one place, no spill. Kept in shared memory instead, the
  // compiler had spilled more: 108 bytes with the whole cursor read and written back at each unit, 128
  // with only the unit's number in a register and each unit computed from the shared copy.)
  BsrMlpUnitCursor units = units0;
  int unit_tile = 0, grp0 = 0;  // (grp0: the unit's first block-row)
  for (int tc = 0; units.next(p.parts, unit_tile, grp0); ++tc) {
    const int tile = unit_tile;
    const int64_t row0 = static_cast<int64_t>(tile) * kTileM + 64 * h + 16 * w4 + g;  // this thread's first row
    xparity = tc & 1;  // (resident form: a unit per tile)
    for (int grp = grp0; grp < grp0 + unit_groups; ++grp) {
      const int64_t col0 = static_cast<int64_t>(grp) * kB + 2 * t;
      // y starts from 2 b2 (the GELUs' factor 2; its loads arrive before the group's first fc2 wgmma,
      // after an fc1 block and a GELU).
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        float2 b;
        if constexpr (F::kBiasSmem) {
          b = ptx::lds_f32x2_ro(b2x2_u32 + 4 * static_cast<unsigned>(col0 + 8 * c));
        } else {
          b = p.b2 ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p.b2 + col0 + 8 * c))
                   : make_float2(0.f, 0.f);
          b.x *= 2.f, b.y *= 2.f;
        }
        yacc[4 * c] = yacc[4 * c + 2] = b.x;
        yacc[4 * c + 1] = yacc[4 * c + 3] = b.y;
      }
      wgmma::fence_operands(yacc);  // (nothing in flight: the previous group ended with retire_all)
      // The epilogue's residual, loaded now where the registers allow it: it arrives under the group's
      // MMAs (loaded between the stores, they would wait for each store, since the residual may be y
      // itself).
      // (The four-warpgroup form loads it in the epilogue instead: its consumers have 112 registers, not
      // the 16 more this takes through the block-row.)
      constexpr bool kPreloadResidual = WG < 4;
      unsigned res[2][8];
      if constexpr (kPreloadResidual) load_residual(row0, col0, res);
      // Else its lines into L2 now (lane i: row i of the warp's 16, the block-row's 128 bytes), so that
      // the epilogue's loads wait for L2, not DRAM: no registers held. (ncu, H100, 2026-12-06: the
      // epilogue's residual loads held ~15% of the consumers' stall samples; p.prefetch_residual, from
      // VITRT_BSR_MLP_PREFETCH, for A/B.)
      if (!kPreloadResidual && p.prefetch_residual && p.residual && lane < 16) {
        const int64_t m = row0 - g + lane;
        if (m < p.M) ptx::prefetch_l2(p.residual + m * p.N + static_cast<int64_t>(grp) * kB);
      }
      const int we = __shfl_sync(0xffffffffu, gb_s[grp + 1], 0);
      int w = __shfl_sync(0xffffffffu, gb_s[grp], 0);
      unsigned hf[4][4];
      if constexpr (!PIPE) {
        float hacc[32];
        __nv_bfloat162 hb[8];
        // (shared-memory biases: added at the GELU, not seeded. Seeded at the step's start, with the
        // previous fc2 group still running, ptxas made the first fc1 wgmma wait for it (C7517); seeded
        // after the GELU, for the next step, it serialised the wgmmas (C7515) and the four-warpgroup form
        // spilled: the seed lives through the fc2 wgmmas.)
        while (w < we) {
          const int32_t hdr = word_at(w++);
          const int n1 = (hdr >> 16) & 255, n2 = (hdr >> 24) & 255;
          if constexpr (!F::kBiasSmem) load_b1(hdr & 0xffff, hb);
          zero(hacc);
          for (int q = 0; q < n1; ++q) {
            issue_fc1(hacc, word_at(w++));
            retire_all_but_newest();
          }
          retire_all();  // h_j complete (and the previous step's fc2 block, which read hf)
          wgmma::fence_operands(hacc);
          gelu_pack_with(hacc, b1_of(hdr & 0xffff, hb), hf);
          for (int q = 0; q < n2; ++q, ++w) {
            issue_fc2(hf);
            retire_all_but_newest();
          }
        }
      } else if (w < we) {
        float hacc0[32], hacc1[32];
        __nv_bfloat162 hb[8];
        int cur_n2 = 0;  // the current step's fc2 blocks (the producer reads their words)
        // Starts the step at w: its fc1 blocks into acc (each retired but the last), acc seeded with
        // the step's b1 (in hb); w then points past the step.
        auto start_step = [&](float(&acc)[32]) {
          const int32_t hdr = word_at(w++);
          const int n1 = (hdr >> 16) & 255;
          seed_b1_with(acc, b1_of(hdr & 0xffff, hb));
          for (int q = 0; q < n1; ++q) {
            issue_fc1(acc, word_at(w++));
            retire_all_but_newest();
          }
          cur_n2 = (hdr >> 24) & 255;
          w += cur_n2;
        };
        // One pipelined step: the current one's h in cur (fc1 issued), the next one's into nxt.
        auto step = [&](float(&cur)[32], float(&nxt)[32]) {
          const bool more = w < we;
          // (the next step's b1, from global memory: small, L1 hits, under the wait)
          if (!F::kBiasSmem && more) load_b1(word_at(w) & 0xffff, hb);
          const int n2 = cur_n2;
          retire_all();  // the current h, and the previous fc2 block (which read hf)
          wgmma::fence_operands(cur);
          if (more) start_step(nxt);
          gelu_pack_seeded(cur, hf);  // (while the next fc1 blocks run)
          for (int q = 0; q < n2; ++q) issue_fc2(hf);
          return more;
        };
        if constexpr (!F::kBiasSmem) load_b1(word_at(w) & 0xffff, hb);
        start_step(hacc0);
        while (step(hacc0, hacc1) && step(hacc1, hacc0)) {
        }
      }
      // (the four-warpgroup form: the residual loaded before the wait for the block-row's last fc2 group,
      // so that their latencies overlap. Its loads had stalled the epilogue at their first use: ~5% of
      // the warp samples, ncu, H100, 2026-12-06. Measured, ms here / after the wait at ViT-B @ 0.9:
      // 0.185-0.187 / 0.186-0.189 on an H100, 0.174-0.175 / 0.176 on the H200; at 0.95 1-1.5% less
      // time, at 0.8 within noise. Both places behind a run-time switch made ptxas spill 36 bytes (the
      // unit cursor, reloaded from L2 at each unit's start: ~6% of the stall samples); this one alone,
      // none.)
      if constexpr (!kPreloadResidual) load_residual(row0, col0, res);
      retire_all();
      wgmma::fence_operands(yacc);
      // (all of this block-row's stores come after all of its loads: the residual may be y)
      // Epilogue: y / 2 (exact: the GELUs' factor 2) + residual, rounded once, written as whole
      // 128-byte lines: per pass, the warp's 8 rows of the block-row's slice go through rows_to_lines
      // (two transposes across lanes), so that each store instruction writes 4 whole rows instead of
      // each lane's 4-byte pairs (8 rows of 16 bytes). Measured 3-9% faster than the pairs at ViT-B /
      // ViT-S @ 0.8 / 0.9 and ViT-B/16 bs256 1.46-1.47x -> 1.49x end to end (BENCHMARKS.md, 2026-12-05
      // 19:22 session, H100). In place stays safe: the stores come after all of the warp's residual
      // loads, which read only the warp's own rows.
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        unsigned v[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float2 r = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&res[pass][c]));
          v[c] = bsr_wgmma::pack_bf16x2(fmaf(0.5f, yacc[4 * c + 2 * pass], r.x), fmaf(0.5f, yacc[4 * c + 2 * pass + 1], r.y));
        }
        unsigned a4[4], b4[4];
        rows_to_lines(v, lane, a4, b4);
        const int64_t m = row0 - g + 8 * pass + 2 * (lane / 8);  // a4's row; b4's is the next
        bf16* ya = p.y + m * p.N + static_cast<int64_t>(grp) * kB + 8 * (lane % 8);
        if (m < p.M) bsr_wgmma::store_line(ya, make_uint4(a4[0], a4[1], a4[2], a4[3]), false);
        if (m + 1 < p.M) bsr_wgmma::store_line(ya + p.N, make_uint4(b4[0], b4[1], b4[2], b4[3]), false);
      }
    }
  }
#else
  (void)p;
  __trap();  // never launched: bsr_mlp_fused_supported needs an sm_90 device
#endif
}

// The form a launch takes, as a type (FormTag below) for the templates and as values for the host.
template <bool STREAM, bool PIPE, int WG>
struct FormTag {
  using F = MlpForm<STREAM, PIPE, WG>;
  static constexpr bool kStream = STREAM, kPipe = PIPE;
  static constexpr int kWarpgroups = WG;
};

// The environment's choice, read once:
//  - VITRT_BSR_MLP_STREAM: "0" the resident form; unset / other: the streamed one, measured faster at
//    every shape (BENCHMARKS.md, 2026-12-04 20:22 session, call 1, M = 50432, ms streamed / resident:
//    ViT-B @ 0.9 0.241 / 0.322, @ 0.95 0.159 / 0.194, @ 0.8 0.459 / no plan; ViT-S @ 0.9 0.087 / 0.103);
//  - VITRT_BSR_MLP_WARPGROUPS: "3" the streamed form with three consumer warpgroups, "4" with four
//    (plain order only); unset / other: four, unless VITRT_BSR_MLP_PIPE=1 asks for the pipelined
//    order (three). Four measured fastest of the six streamed forms at all four MLP shapes
//    (BENCHMARKS.md, 2026-12-05 session, call 1; M = 50432, ms, four / three pipelined: ViT-B @ 0.9
//    0.2260 / 0.2297, @ 0.95 0.1517 / 0.1604; ViT-S @ 0.9 0.0822 / 0.0896);
//  - VITRT_BSR_MLP_PIPE: "1" the pipelined step order (three warpgroups), "0" the plain one; unset /
//    other: with three warpgroups pipelined in the streamed form, plain in the resident one, as
//    measured (2026-12-04 sessions: resident, 18:18 call 4, plain 0.320 against 0.357 ms at D = 768;
//    streamed, 20:22 calls 1-2, pipelined 0.235 against 0.241);
//  - VITRT_BSR_MLP_GELU: "f32" the GELUs in fp32; unset / other: in bf16x2 arithmetic
//    (dev::gelu_tanh_approx_x2_bf16x2: half the MUFU tanh ops, 6 instructions per pair of hidden values
//    against 11; streamed forms). Why: 2 GELU per hidden value per use is most of a step's instructions
//    (~186 M tanh at ViT-B @ 0.9 and M = 50432: ~50 us of the SMs' MUFU pipes in a ~230 us kernel).
//    Measured (2026-12-05, 03:33 session, call 2, M = 50432, ms bf16x2 / f32): ViT-B @ 0.9 0.2188 /
//    0.2275, @ 0.95 0.1503 / 0.1529; ViT-S @ 0.9 0.0802 / 0.0821. The price: 1.2e-3 relative against the
//    two linears instead of 4e-5 (a bf16 step of y is 4e-3).
// VITRT_BSR_MLP_TILE_CTAS: "0" each CTA a contiguous range of units; N (2-8) N CTAs per tile where it
// fits (bsr_mlp_units.h); unset / other: bsr_mlp_choose_tile_parts' choice (why, and what it measured:
// bsr_mlp_units.h; ViT-B @ 0.9 on an H100 0.193-0.196 ms against 0.227-0.234 with ranges).
int tile_ctas_from_env() {
  static const int v = [] {
    const char* e = std::getenv("VITRT_BSR_MLP_TILE_CTAS");
    if (e == nullptr || *e == 0) return -1;
    const int n = std::atoi(e);
    return e[0] == '0' ? 0 : n >= 2 && n <= kMaxTileParts ? n : -1;
  }();
  return v;
}
// The streamed forms' division of work for `tiles` tiles on a grid of at most `grid` CTAs (tile_ctas
// as bsr_mlp_bf16_fused's). Chosen at every launch: 1.4 us on the host for ViT-B's 12 block-rows (timed
// on the development CPU, 2026-12-06), against a ~0.18 ms kernel, and nothing in a CUDA graph; not
// worth a cache in the plan.
BsrMlpTileParts tile_parts_for(const BsrMlpDeviceSchedule& schedule, int64_t tiles, int grid, int tile_ctas) {
  const int want = tile_ctas >= 0 ? tile_ctas : tile_ctas_from_env();
  if (want == 0 || schedule.group_begin_host == nullptr) return {};
  std::vector<int64_t> cost(schedule.groups);  // a block-row's words (steps, fc1 and fc2 blocks) and its epilogue
  for (int g = 0; g < schedule.groups; ++g)
    cost[g] = schedule.group_begin_host[g + 1] - schedule.group_begin_host[g] + 1;
  return bsr_mlp_choose_tile_parts(cost, tiles, grid, want > 0 ? want : 0);
}
bool gelu_bf16x2_from_env() {
  enum class Gelu { F32, Bf16x2 };
  static const Gelu g = env_choice<Gelu>("VITRT_BSR_MLP_GELU", {{"f32", Gelu::F32}, {"bf16x2", Gelu::Bf16x2}}, Gelu::Bf16x2);
  return g == Gelu::Bf16x2;
}
struct FormChoice {
  bool stream, pipe;
  int warpgroups;
};
FormChoice form_from_env() {
  static const FormChoice f = [] {
    const char* wg = std::getenv("VITRT_BSR_MLP_WARPGROUPS");
    if (wg != nullptr && std::strcmp(wg, "4") == 0) return FormChoice{true, false, 4};
    const bool stream = kernel_mode_from_env("VITRT_BSR_MLP_STREAM") != KernelMode::Off;
    const KernelMode pipe = kernel_mode_from_env("VITRT_BSR_MLP_PIPE");
    const bool three = (wg != nullptr && std::strcmp(wg, "3") == 0) || pipe == KernelMode::On;
    if (stream && !three) return FormChoice{true, false, 4};
    return FormChoice{stream, pipe == KernelMode::Auto ? stream : pipe == KernelMode::On, stream ? 3 : 2};
  }();
  return f;
}

// fn(FormTag<...>{}) for the chosen form.
template <class Fn>
decltype(auto) with_form(const FormChoice& f, Fn&& fn) {
  if (f.warpgroups == 4) return fn(FormTag<true, false, 4>{});
  if (f.stream) return f.pipe ? fn(FormTag<true, true, 3>{}) : fn(FormTag<true, false, 3>{});
  return f.pipe ? fn(FormTag<false, true, 2>{}) : fn(FormTag<false, false, 2>{});
}

size_t smem_bytes(int slabs, int64_t schedule_ints, int64_t bias_floats) {
  return with_form(form_from_env(),
                   [&](auto tag) { return decltype(tag)::F::smem_bytes(slabs, schedule_ints, bias_floats); });
}
int max_k() { return form_from_env().stream ? kMaxKStream : kMaxK; }
int tile_rows() {
  return with_form(form_from_env(), [](auto tag) { return decltype(tag)::F::kTileM; });
}

}  // namespace

bool bsr_mlp_fused_supported(const BsrDeviceView& fc1, const BsrDeviceView& fc2, int64_t schedule_words) {
  if (!device_is_sm90() || fc1.block != kB || fc2.block != kB) return false;
  if (fc1.cols > max_k() || fc1.cols % kB != 0 || fc1.rows % kB != 0 || fc2.cols != fc1.rows || fc2.rows % kB != 0)
    return false;
  if (fc2.rows > INT32_MAX) return false;
  const int64_t schedule_ints = schedule_words + fc2.rows / kB + 1;  // + group_begin
  if (smem_bytes(static_cast<int>(fc1.cols / kSlabCols), schedule_ints, fc1.rows + fc2.rows) > kMaxSmem) return false;
  return (fc1.values_core_matrix != nullptr || fc1.nnz == 0) && (fc2.values_core_matrix != nullptr || fc2.nnz == 0);
}

bool bsr_mlp_fused_fills_gpu(int64_t M, int groups) {
  const int tile_m = tile_rows();
  const int64_t tiles = (M + tile_m - 1) / tile_m;
  return with_form(form_from_env(), [&](auto tag) { return decltype(tag)::F::units(tiles, groups); }) >= sm_count();
}

// The persistent grid of form F for `tiles` tiles: a CTA per unit, at most one per SM (and max_ctas > 0).
template <class F>
int persistent_grid(int64_t tiles, int groups, int max_ctas) {
  const int grid = static_cast<int>(std::min<int64_t>(F::units(tiles, groups), sm_count()));
  return max_ctas > 0 ? std::min(grid, max_ctas) : grid;
}

int bsr_mlp_fused_tile_ctas(int64_t M, const BsrMlpDeviceSchedule& schedule, int max_ctas, int tile_ctas) {
  return with_form(form_from_env(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!T::kStream) {
      return 0;
    } else {
      const int64_t tiles = (M + T::F::kTileM - 1) / T::F::kTileM;
      const int grid = persistent_grid<typename T::F>(tiles, schedule.groups, max_ctas);
      return tiles > 0 ? tile_parts_for(schedule, tiles, grid, tile_ctas).ctas : 0;
    }
  });
}

void bsr_mlp_bf16_fused(const void* x, int64_t M, const BsrDeviceView& fc1, const void* b1, const BsrDeviceView& fc2,
                        const void* b2, const BsrMlpDeviceSchedule& schedule, const void* residual, void* y,
                        int max_ctas, int tile_ctas) {
  constexpr const char* kOp = "cuda bsr_mlp_bf16_fused";
  check_bsr_linear_args(kOp, x, M, fc1, nullptr, y);
  check_bsr_linear_args(kOp, y, M, fc2, residual, y);
  VITRT_CHECK(bsr_mlp_fused_supported(fc1, fc2, schedule.words_count), InvalidArgument, kOp,
              ": needs sm_90, 64-blocks, fc1.cols <= ", max_k(), ", chained shapes, the core-matrix copies and a "
              "schedule that fits shared memory (", schedule.words_count, " words; fc1 [",
              fc1.rows, ", ", fc1.cols, "] block ", fc1.block, ", fc2 [", fc2.rows, ", ", fc2.cols, "] block ",
              fc2.block, ")");
  VITRT_CHECK(schedule.words != nullptr && schedule.group_begin != nullptr &&
                  schedule.groups == static_cast<int>(fc2.rows / kB) && (schedule.k_mask >> (fc1.cols / kB)) == 0,
              InvalidArgument, kOp, ": the schedule was not made for these weights");
  VITRT_CHECK(reinterpret_cast<uintptr_t>(b1) % 4 == 0 && reinterpret_cast<uintptr_t>(b2) % 4 == 0, InvalidArgument,
              kOp, ": the biases must be 4-byte aligned (read as bf16 pairs)");
  const FormChoice form = form_from_env();
  const int tile_m = tile_rows();
  VITRT_CHECK(M <= INT32_MAX - tile_m, InvalidArgument, kOp, ": too many tokens (", M, ")");
  const int64_t tiles = (M + tile_m - 1) / tile_m;
  if (tiles == 0) return;
  MlpArgs a{};
  // (resident: one box per warpgroup's 64 rows; streamed: one box per slot, the tile's rows)
  a.x_map = bf16_tensor_map_2d(x, M, fc1.cols, kSlabCols, form.stream ? tile_m : 64, CU_TENSOR_MAP_SWIZZLE_128B);
  a.M = M;
  a.N = static_cast<int>(fc2.rows);
  a.H = static_cast<int>(fc1.rows);
  a.slabs = static_cast<int>(fc1.cols / kSlabCols);
  a.k_mask = schedule.k_mask;
  a.tiles = static_cast<int>(tiles);
  a.groups = schedule.groups;
  a.words = schedule.words;
  a.group_begin = schedule.group_begin;
  a.nwords = static_cast<int>(schedule.words_count);
  a.w1_cm = static_cast<const bf16*>(fc1.values_core_matrix);
  a.w2_cm = static_cast<const bf16*>(fc2.values_core_matrix);
  a.b1 = static_cast<const bf16*>(b1);
  a.b2 = static_cast<const bf16*>(b2);
  a.residual = static_cast<const bf16*>(residual);
  a.y = static_cast<bf16*>(y);
  a.gelu_bf16x2 = gelu_bf16x2_from_env() ? 1 : 0;
  static const bool prefetch = kernel_mode_from_env("VITRT_BSR_MLP_PREFETCH") != KernelMode::Off;
  a.prefetch_residual = prefetch ? 1 : 0;
  const size_t smem = smem_bytes(a.slabs, schedule.words_count + a.groups + 1, fc1.rows + fc2.rows);
  with_form(form, [&](auto tag) {
    using T = decltype(tag);
    const int64_t units = T::F::units(tiles, a.groups);
    VITRT_CHECK(units <= INT32_MAX, InvalidArgument, kOp, ": too many tokens x block-rows (", M, " x ", a.groups, ")");
    int grid = persistent_grid<typename T::F>(tiles, a.groups, max_ctas);
    a.whole_tiles = T::kStream && bsr_mlp_whole_tiles(tiles, grid) ? 1 : 0;
    if constexpr (T::kStream) a.parts = tile_parts_for(schedule, tiles, grid, tile_ctas);
    if (a.parts.ctas > 0) grid = grid / a.parts.ctas * a.parts.ctas;
    constexpr auto kernel = bsr_mlp_fused_kernel<T::kPipe, T::kStream, T::kWarpgroups>;
    if constexpr (T::kStream)
      bsr_wgmma::check_launch_registers<kernel>(T::F::kLaunchRegs, kOp, "VITRT_BSR_MLP_FUSED=0 runs the two linears instead");
    bsr_wgmma::launch<kernel>(a, grid, T::F::kThreads, smem, kMaxSmem);
  });
}

}  // namespace vitrt::cuda
