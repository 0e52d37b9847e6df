// Hopper block-sparse x dense linear for any reduction length: x tiles and W blocks streamed through
// shared memory by TMA, multiplied with wgmma (sm_90a).
//
// Why a third kernel: bsr_gemm_xres.cu keeps a tile's x rows resident and so covers K <= 768 only;
// the MLPs' second linears (3072 -> 768 in ViT-B, 5120 -> 1280 in ViT-H) and every block-32 layer
// ran on bsr_gemm.cu's mma.sync kernel, whose ldmatrix / mma.sync / cp.async instruction stream is
// what bounds it. This kernel keeps bsr_gemm.cu's work split and moves the data with Hopper's
// asynchronous copies, so the consumer warps issue little besides the wgmmas:
//  - a work item is one (128-token tile, block-row) pair: the CTA owns that 128 x B tile of y
//    outright and walks the block-row's stored blocks. Items are numbered tile-major with the
//    block-rows of a tile in row_order (most stored blocks first, rotated by the tile index);
//    persistent CTAs (two per SM) take items i, i + grid, ..., so the items in flight share a few
//    token tiles and each x tile comes from HBM about once and from L2 for every other block-row
//    that reads it (y is written with streaming stores, so that it does not evict x);
//  - one producer thread issues, per stored block, the TMA load of x[m0 .. m0 + 127][c B .. c B + B)
//    (in the swizzle wgmma reads; rows past M read as zeros) and the bulk copy of the W block's
//    core-matrix copy (bsr_core_matrix_order) into one slot of an S-slot ring, both counted on the
//    slot's full mbarrier; the consumers hand slots back on its empty mbarrier;
//  - two consumer warpgroups own 64 tokens each. Each block is one commit group of B / 16 wgmmas
//    (both operands in shared memory), and the group before it is retired (its slot released)
//    only after the next one is issued, so the tensor cores always have the next block queued.
//    The bias and residual are loaded when the item starts (under the MMAs); bias, activation and
//    residual are applied in fp32, the sum rounded once, staged per warp (stmatrix) and written as
//    whole 128-byte lines.
// tests/protocol/test_bsr_stream_protocol.py models the barrier protocol (random interleavings: no
// deadlock, no slot read early or refilled while read); keep the two in step.
// Scope: sm_90, bf16 in and out, block 32 (64-byte swizzle) or 64 (128-byte swizzle), optional
// bf16 residual, the view's core-matrix copy present. bsr_linear_bf16 takes it per
// bsr_stream_selected (bsr_gemm.h).
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/bsr_stream_schedule.h"
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

constexpr int kTileM = 128;         // tokens per item: two consumer warpgroups of 64
constexpr int kConsumerWarps = 8;
constexpr int kThreads = 32 * kConsumerWarps + 32;  // + the producer warp (one thread of it works)
constexpr int kCtasPerSm = 2;       // an item's epilogue and set-up hide under the other CTA's MMAs
constexpr size_t kAlignSlack = 1024;  // the x tiles start 1024-byte aligned (the swizzles' period)

template <int B>
struct StreamCfg {
  static constexpr int S = B == 64 ? 4 : 8;             // ring slots
  static constexpr int kXBytes = kTileM * B * 2;        // one x tile: 128 rows x B columns
  static constexpr int kXHalfBytes = kXBytes / 2;       // a consumer warpgroup's 64 rows
  static constexpr int kWBytes = B * B * 2;             // one W block
  static constexpr int kChunks = B / 8;                 // 16-byte chunks per W row
  static constexpr int kStageBytes = bsr_wgmma::WarpTileStore<B>::kStageBytes;  // per warp
  static constexpr int kAcc = B / 2;                    // fp32 accumulators per thread (m64 x B)
  static constexpr uint32_t kSbo = B == 64 ? 1024 : 512;  // 8-row group stride of the swizzled x tile
  static_assert(kXHalfBytes % 1024 == 0, "each warpgroup's half of the x tile starts on a swizzle period");
  static constexpr size_t smem_bytes() {
    return kAlignSlack + static_cast<size_t>(S) * (kXBytes + kWBytes) + kConsumerWarps * kStageBytes +
           2 * S * sizeof(uint64_t);
  }
};

struct StreamArgs {
  CUtensorMap x_map;  // x [M, K] bf16, boxes of B columns x 128 rows, swizzled (StreamCfg)
  int64_t M;
  int N;
  int block_rows;
  int items;  // token tiles x block_rows
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const int32_t* row_order;  // null: natural order
  const bf16* values_cm;     // the blocks in core-matrix order (bsr_core_matrix_order)
  const bf16* bias;          // [N] or null
  const bf16* residual;      // [M, N] or null (may be y itself: each element is read before it is written)
  bf16* y;
};

// Item `item`: its token tile, block-row and the row's stored blocks [kb, ke) (an empty range past
// the last item). Both roles read the next item's while they work on the current one: these are
// two dependent global loads, which at an item boundary would otherwise stall the ring.
struct ItemRange {
  int tile, row, kb, ke;
};
// The order is bsr_stream_item's (bsr_stream_schedule.h): tile by tile, row_order positions rotated
// by the tile index (without the rotation, ncu at 768 x 3072 b64 @ 0.8 counted 724 MB read from
// DRAM where x and y are 387 MB), stepped by a cursor (no division per item).
__device__ __forceinline__ ItemRange item_range(const StreamArgs& p, const BsrStreamCursor& cursor) {
  if (cursor.item >= p.items) return {0, 0, 0, 0};
  const BsrStreamItem it = cursor.current();
  const int row = p.row_order ? __ldg(p.row_order + it.position) : it.position;
  return {it.tile, row, __ldg(p.row_ptr + row), __ldg(p.row_ptr + row + 1)};
}

// The epilogue's terms are template parameters, not run-time checks: an item is a few wgmmas and this
// epilogue, so what the item issues outside its block loop bounds the kernel at high sparsity. With
// the checks at run time the plain linear (no bias, no residual: the issue's benchmark) still loaded
// zeros, unpacked and added them: 510 SASS instructions per item at block 64 against 61 per block.
template <int B, bool Gelu, bool HasBias, bool HasResidual>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) bsr_stream_kernel(const __grid_constant__ StreamArgs p) {
#if VITRT_WGMMA_ENABLED
  using C = StreamCfg<B>;
  constexpr int S = C::S;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((kAlignSlack - (ptx::smem_u32(smem_raw) & (kAlignSlack - 1))) & (kAlignSlack - 1));
  unsigned char* xs = smem;                        // [S][128 rows x B columns], swizzled
  unsigned char* ws = xs + S * C::kXBytes;         // [S][B x B], core-matrix layout
  unsigned char* stage = ws + S * C::kWBytes;      // [warp][8 rows][kStageRow]
  uint64_t* full = reinterpret_cast<uint64_t*>(stage + kConsumerWarps * C::kStageBytes);  // [S] x tile + W block landed
  uint64_t* empty = full + S;                                                             // [S] every consumer warp is done
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) mbar::init(&full[s], 1), mbar::init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // ---- producer: one thread; the next block's column index and the next item's row bounds are
    // read before waiting for a slot, so their latency hides under the wait.
    if (lane != 0) return;
    int slot = 0, n = 0;
    unsigned round = 0;  // parity of the ring round of `slot`
    BsrStreamCursor cursor(blockIdx.x, gridDim.x, p.block_rows);
    ItemRange next = item_range(p, cursor);
    for (int item = blockIdx.x; item < p.items; item += gridDim.x) {
      const ItemRange cur = next;
      cursor.step();
      next = item_range(p, cursor);  // (its loads complete while this item's blocks go out)
      const int kb = cur.kb, ke = cur.ke;
      const int m0 = cur.tile * kTileM;
      int col = kb < ke ? __ldg(p.col_idx + kb) : 0;
      for (int k = kb; k < ke; ++k, ++n) {
        const int next_col = k + 1 < ke ? __ldg(p.col_idx + k + 1) : 0;
        if (n >= S) mbar::wait(&empty[slot], round ^ 1);  // its previous block retired by every consumer warp
        mbar::arrive_expect_tx(&full[slot], C::kXBytes + C::kWBytes);
        mbar::tma_load_2d(xs + slot * C::kXBytes, &p.x_map, col * B, m0, &full[slot]);
        mbar::bulk_copy_to_smem(ws + slot * C::kWBytes, p.values_cm + static_cast<int64_t>(k) * B * B, C::kWBytes,
                                &full[slot]);
        if (++slot == S) slot = 0, round ^= 1;
        col = next_col;
      }
    }
    return;
  }

  // ---- consumer warpgroups: warpgroup h owns rows 64 h .. 64 h + 63 of each item's tile, warp w4
  // rows 16 w4 .. 16 w4 + 15 of those; a thread holds rows g and g + 8 of its warp's 16, columns
  // 8 j + 2 t and + 1 of the block-row's B.
  const int h = warp / 4, w4 = warp % 4, g = lane / 4, t = lane % 4;
  unsigned char* st = stage + warp * C::kStageBytes;
  const uint64_t xdesc = B == 64 ? wgmma::make_smem_desc_sw128(xs + h * C::kXHalfBytes, C::kSbo)
                                 : wgmma::make_smem_desc_sw64(xs + h * C::kXHalfBytes, C::kSbo);
  const uint64_t wdesc = wgmma::make_smem_desc(ws, 128, C::kChunks * 128);
  const bsr_wgmma::DescWords xd(xdesc), wd(wdesc);  // (offsets added to the low words: see DescWords)
  // Epilogue: lane writes chunk (lane % kChunks) of rows (lane / kChunks) + i * kRowsPerStore.
  const bsr_wgmma::WarpTileStore<B> out(st, lane);
  using Out = bsr_wgmma::WarpTileStore<B>;
  constexpr int kRowsPerStore = Out::kRowsPerStore;
  const int st_row = out.row, st_chunk = lane % Out::kChunks;
  const unsigned char* st_load = out.load;
  int slot = 0;
  unsigned round = 0;
  BsrStreamCursor cursor(blockIdx.x, gridDim.x, p.block_rows);
  ItemRange next = item_range(p, cursor);
  for (int item = blockIdx.x; item < p.items; item += gridDim.x) {
    const ItemRange it = next;
    cursor.step();
    next = item_range(p, cursor);
    const int nblocks = it.ke - it.kb;
    const int64_t row0 = static_cast<int64_t>(it.tile) * kTileM + 64 * h + 16 * w4;  // this warp's first row
    const bool full_tile = static_cast<int64_t>(it.tile + 1) * kTileM <= p.M;
    const int64_t n0 = static_cast<int64_t>(it.row) * B;  // the block-row's first output column
    // The bias and residual of this thread's outputs, read now so that the loads complete under the
    // MMAs (the accumulators start from zero: starting them from the bias would put its load in
    // front of the first wgmma).
    __nv_bfloat162 bias2[B / 8];
    if constexpr (HasBias) {
#pragma unroll
      for (int j = 0; j < B / 8; ++j) bias2[j] = *reinterpret_cast<const __nv_bfloat162*>(p.bias + n0 + 8 * j + 2 * t);
    }
    __nv_bfloat162 res[2][B / 8];
    if constexpr (HasResidual) {
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        const int64_t m = row0 + g + 8 * pass;
#pragma unroll
        for (int j = 0; j < B / 8; ++j)
          res[pass][j] = m < p.M ? __ldcs(reinterpret_cast<const __nv_bfloat162*>(p.residual + m * p.N + n0 + 8 * j + 2 * t))
                                 : __floats2bfloat162_rn(0.f, 0.f);
      }
    }
    float acc[C::kAcc];
#pragma unroll
    for (int i = 0; i < C::kAcc; ++i) acc[i] = 0.f;
    int prev_slot = -1;
    for (int b = 0; b < nblocks; ++b) {
      mbar::wait(&full[slot], round);
      wgmma::fence_operands(acc);
      wgmma::fence();
      const uint32_t alo = xd.lo + static_cast<uint32_t>((slot * C::kXBytes) >> 4);
      const uint32_t blo = wd.lo + static_cast<uint32_t>((slot * C::kWBytes) >> 4);
#pragma unroll
      for (int kk = 0; kk < B / 16; ++kk) bsr_wgmma::block_k16<B>(acc, xd.with_low(alo + 2 * kk), wd.with_low(blo + 16 * kk));
      wgmma::commit();
      if (prev_slot >= 0) {  // the block before this one has retired: hand its slot back
        wgmma::wait<1>();
        if (lane == 0) mbar::arrive(&empty[prev_slot]);
      }
      prev_slot = slot;
      if (++slot == S) slot = 0, round ^= 1;
    }
    wgmma::wait<0>();
    wgmma::fence_operands(acc);
    if (prev_slot >= 0 && lane == 0) mbar::arrive(&empty[prev_slot]);

    // Epilogue: rows g (pass 0) and g + 8 (pass 1) -> staging (stmatrix) -> whole-line stores.
    bf16* yr = p.y + (row0 + st_row) * p.N + n0 + st_chunk * 8;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      unsigned v[B / 8];
#pragma unroll
      for (int j = 0; j < B / 8; ++j) {
        float v0 = acc[4 * j + 2 * pass], v1 = acc[4 * j + 2 * pass + 1];
        if constexpr (HasBias) {
          const float2 b2 = __bfloat1622float2(bias2[j]);
          v0 += b2.x, v1 += b2.y;
        }
        if constexpr (Gelu) v0 = dev::gelu_tanh_approx(v0), v1 = dev::gelu_tanh_approx(v1);
        if constexpr (HasResidual) {
          const float2 r2 = __bfloat1622float2(res[pass][j]);
          v0 += r2.x, v1 += r2.y;
        }
        v[j] = bsr_wgmma::pack_bf16x2(v0, v1);
      }
      __syncwarp();  // the previous pass's (or item's) staging loads are done
      out.stage(v);
#pragma unroll
      for (int i = 0; i < Out::kStoresPerPass; ++i) {
        const int row = pass * 8 + st_row + i * kRowsPerStore;  // of the warp's 16
        const uint4 val = *reinterpret_cast<const uint4*>(st_load + i * kRowsPerStore * Out::kStageRow);
        if (full_tile || row0 + row < p.M)  // (streaming stores: y must not push x out of L2)
          __stcs(reinterpret_cast<int4*>(yr + static_cast<int64_t>(pass * 8 + i * kRowsPerStore) * p.N),
                 *reinterpret_cast<const int4*>(&val));
      }
    }
  }
#else
  using C = StreamCfg<B>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::S > 0 && C::kAcc > 0 && C::kSbo > 0, "");
  (void)p;
  __trap();  // never launched: bsr_stream_supported needs an sm_90 device
#endif
}

template <int B, bool Gelu, bool HasBias, bool HasResidual>
void launch_stream(const StreamArgs& a, int grid) {
  constexpr size_t smem = StreamCfg<B>::smem_bytes();
  bsr_wgmma::launch<bsr_stream_kernel<B, Gelu, HasBias, HasResidual>>(a, grid, kThreads, smem, smem);
}
// The run-time epilogue (which of bias / GELU / residual are present) picks the instance.
template <int B>
void launch_stream_epilogue(const StreamArgs& a, int grid, bool gelu) {
  const int e = (gelu ? 4 : 0) | (a.bias ? 2 : 0) | (a.residual ? 1 : 0);
  switch (e) {
    case 0: return launch_stream<B, false, false, false>(a, grid);
    case 1: return launch_stream<B, false, false, true>(a, grid);
    case 2: return launch_stream<B, false, true, false>(a, grid);
    case 3: return launch_stream<B, false, true, true>(a, grid);
    case 4: return launch_stream<B, true, false, false>(a, grid);
    case 5: return launch_stream<B, true, false, true>(a, grid);
    case 6: return launch_stream<B, true, true, false>(a, grid);
    default: return launch_stream<B, true, true, true>(a, grid);
  }
}

// VITRT_BSR_STREAM: "0" off, "1" wherever supported; unset / other ("auto"): see bsr_stream_selected.
KernelMode stream_mode() {
  static const KernelMode v = kernel_mode_from_env("VITRT_BSR_STREAM");
  return v;
}

}  // namespace

bool bsr_stream_supported(const BsrDeviceView& w, DType out_dtype) {
  if (!device_is_sm90() || out_dtype != DType::BF16 || (w.block != 32 && w.block != 64)) return false;
  if (w.rows % w.block != 0 || w.cols % w.block != 0 || w.rows > INT32_MAX || w.cols > INT32_MAX) return false;
  return w.values_core_matrix != nullptr || w.nnz == 0;  // the blocks go by bulk copies of that copy
}

bool bsr_stream_selected(int64_t M, const BsrDeviceView& w, DType out_dtype) {
  const KernelMode mode = stream_mode();
  if (mode == KernelMode::Off || !bsr_stream_supported(w, out_dtype)) return false;
  if (mode == KernelMode::On) return true;
  // Auto: enough items to give every CTA slot a few (below that bsr_gemm.cu's smaller tiles fill
  // the GPU better). Measured against bsr_gemm.cu's kernel (BENCHMARKS.md, 2026-12-04 16:00
  // session, call 4; M = 50432, speed-up over cuBLASLt): 768 x 3072 b64 @ 0.8 / 0.9 2.24x / 3.51x
  // against 1.49x / 2.51x, b32 1.14x / 1.93x against 0.86x / 1.51x; 3072 x 768 b32 1.23x against
  // 1.19x at 0.9 (that shape at block 64 stays with the x-resident kernel: 2.03x against 1.86x).
  const int64_t items = (M + kTileM - 1) / kTileM * (w.rows / w.block);
  return items >= 4 * kCtasPerSm * static_cast<int64_t>(sm_count());
}

void bsr_linear_bf16_stream(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                            const void* residual, void* y, int max_ctas) {
  constexpr const char* kOp = "cuda bsr_linear_bf16 (streamed)";
  check_bsr_linear_args(kOp, x, M, w, residual, y);
  VITRT_CHECK(bsr_stream_supported(w, DType::BF16), InvalidArgument, kOp,
              ": needs sm_90, block 32 or 64 and the core-matrix copy of the blocks (block ", w.block, ")");
  VITRT_CHECK(reinterpret_cast<uintptr_t>(bias) % 4 == 0, InvalidArgument, kOp,
              ": the bias must be 4-byte aligned (read as bf16 pairs)");
  VITRT_CHECK(M <= INT32_MAX - kTileM, InvalidArgument, kOp, ": too many tokens (", M, ")");
  const int64_t tiles = (M + kTileM - 1) / kTileM, block_rows = w.rows / w.block;
  // (Headroom for the CTAs' item counters, which step one grid past the last item in 32 bits.)
  VITRT_CHECK(tiles * block_rows <= INT32_MAX - 65536, InvalidArgument, kOp, ": too many work items");
  if (tiles * block_rows == 0) return;
  StreamArgs a{};
  a.x_map = bf16_tensor_map_2d(x, M, w.cols, w.block, kTileM,
                               w.block == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
  a.M = M;
  a.N = static_cast<int>(w.rows);
  a.block_rows = static_cast<int>(block_rows);
  a.items = static_cast<int>(tiles * block_rows);
  a.row_ptr = w.row_ptr;
  a.col_idx = w.col_idx;
  a.row_order = w.row_order;
  a.values_cm = static_cast<const bf16*>(w.values_core_matrix);
  a.bias = static_cast<const bf16*>(bias);
  a.residual = static_cast<const bf16*>(residual);
  a.y = static_cast<bf16*>(y);
  int grid = static_cast<int>(std::min<int64_t>(a.items, static_cast<int64_t>(kCtasPerSm) * sm_count()));
  if (max_ctas > 0) grid = std::min(grid, max_ctas);
  if (w.block == 64) launch_stream_epilogue<64>(a, grid, gelu);
  else launch_stream_epilogue<32>(a, grid, gelu);
}

}  // namespace vitrt::cuda
