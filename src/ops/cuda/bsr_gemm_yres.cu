// Hopper block-sparse x dense linear for small blocks and long reductions: a 128 x 256 (block 16) or
// 128 x 384 (block 32) tile of y resident in registers, x streamed past it in 64-column slabs, wgmma (sm_90a).
//
// Why a fourth kernel: the MLP's second linear (3072 -> 768 in ViT-B) at block 16 ran on
// bsr_gemm.cu's mma.sync kernel at 0.36-0.62x of cuBLASLt (0.8-0.9 sparsity, BENCHMARKS.md), and
// the streamed kernel (bsr_gemm_stream.cu) does not take block 16: its unit is one (token tile,
// block-row) and one x tile per stored block, so at block 16 each x byte would cross from L2 once
// per stored block of its column (~4.8 times at 90%) in 4 KB pieces, with one barrier round trip
// per 16 x 16 block. The x-resident kernel, which made block 16 pay on the first linear, keeps all
// of x's K columns in shared memory: K <= 768. This kernel turns that around. A unit is one
// 128-token tile and one group of 256 output columns at block 16 (16 block-rows), 384 at block 32
// (12; YresCfg says why):
//  - the CTA keeps the unit's 128 x 256 (384) fp32 accumulators in registers (two consumer warpgroups
//    of 64 tokens, 128 (192) per thread) and walks x's 64-column slabs in order; a slab is loaded (TMA, one
//    16 KB box in the 128-byte swizzle) only when some stored block of the group's rows lies in it,
//    and every such block is multiplied while it is there (m64 x B x 16 wgmmas, operands in shared
//    memory), so x crosses from L2 once per group (three times at N = 768 at block 16, twice at
//    block 32), whatever the density;
//  - which blocks a (group, slab) holds is one 64-bit mask (bit q * (64 / B) + j: block-row q of the
//    group, block-column j of the slab), built per CTA in shared memory from row_ptr / col_idx;
//    the accumulator set of block-row q is then picked by an unrolled loop over q (registers
//    cannot be indexed at run time), each q testing its bits;
//  - the producer warp streams, per (group, slab) and in the same order, the x slab (lane 0) and the
//    stored blocks (from the core-matrix copy: a row's blocks in one slab are consecutive there, so
//    one bulk copy per row, each row's by its own lane) into one slot of an 8-slot ring of [x slab 16 KB][W 8 KB]; a (group,
//    slab) with more blocks than 8 KB holds (dense-ish weights) takes several slots, each with the
//    slab again (from L2);
//  - each slot's blocks are one commit group, retired after the next slot's are issued (as
//    bsr_gemm_stream.cu); the epilogue adds bias, GELU (optional) and a bf16 residual in fp32,
//    rounds once, and writes whole 128-byte lines from registers (rows_to_lines), 64 columns at a
//    time.
// The ring's protocol is the streamed kernel's (tests/protocol/test_bsr_stream_protocol.py models
// it: a slot is filled, waited for by every consumer warp, handed back by each, refilled);
// tests/protocol/test_bsr_yres_layout.py models what a slot holds against what the consumers take it
// to be (masks, parts, row cursors). Keep both in step.
// Status (2026-12-06, H100): correct (every CudaBsr test through it, also forced); block 16's default
// for K > 768 (fc2 at 0.8-0.9: 0.71-1.03x of dense with the producer warp, 0.54-0.72x before it),
// block 32's there without a residual (fc2 @ 0.9 1.70x, the streamed kernel 1.42x).
// Tried and taken out: the epilogue loading the next 64 columns' residual right after each pass's
// stores (2026-12-06, H100, commit e0f699d): ptxas spilled 24-52 bytes per thread at 168 registers,
// the plain linear ran ~5% slower (block 32 fc2 @ 0.9 0.1925 against 0.1817-0.1843 ms, block 16
// 0.3154 against 0.2989-0.3021) and bias + residual only ~3% faster (0.243-0.245 against 0.2505).
// Looked at in the SASS only (2026-12-06): the consumers walking a part's set bits instead of its 16
// rows, each block's accumulator set picked by a switch: ptxas makes it a 64-bit find-first-set, a
// three-level compare tree and an indirect branch, ~35 instructions per block against ~25 (the rows'
// tests shared out) for the row walk at block 16, 90%: not pursued.
// A cluster form (2026-12-05, H100), in which the groups' CTAs of one token tile
// shared each x slab by TMA multicast (x from L2 once per tile instead of once per group): correct,
// and 1.5-2x slower than this form; removed on 2026-12-06 (commit e554abb has it).
// Scope: sm_90, bf16 in and out, block 16 or 32, N and K multiples of 64, the mask table small
// enough for shared memory (groups x slabs <= kMaxMaskWords), the view's core-matrix copy present.
// bsr_linear_bf16 takes it per bsr_yres_selected (bsr_gemm.h).
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/bsr_wgmma.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/env_choice.h"
#include "ops/cuda/fragment_lines.cuh"
#include "ops/cuda/mbarrier.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/wgmma.cuh"
#include "vitrt/error.h"

// The config carries members the sm_80 pass (kernel body compiled out) does not read.
#pragma nv_diag_suppress 177

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileM = 128;                       // tokens per unit: two consumer warpgroups of 64
constexpr int kSlabCols = 64;                     // x slabs: 64 columns (128-byte rows)
constexpr int kXBytes = kTileM * kSlabCols * 2;   // one slab of the tile: 16 KB
constexpr int kXHalfBytes = kXBytes / 2;          // a consumer warpgroup's 64 rows
constexpr int kWBytes = 8 * 1024;                 // a slot's W blocks
constexpr int kSlotBytes = kXBytes + kWBytes;
constexpr int kSlots = 8;
constexpr int kConsumerWarps = 8;
constexpr size_t kAlignSlack = 1024;                // the x slabs start 1024-byte aligned (128-byte swizzle)
constexpr size_t kMaxSmem = 227 * 1024;
constexpr int kMaxMaskWords = 4096;                 // groups x slabs (32 KB of masks; with the slab bytes, see yres_mask_words)
static_assert(kSlotBytes % 1024 == 0, "every slot's x slab starts on a swizzle period");

template <int B>
struct YresCfg {
  // Output columns per unit: 256 at block 16 (its 16 block-rows x 4 block-columns of a slab fill the
  // 64-bit (group, slab) mask); 384 at block 32, so that x crosses from L2 twice at N = 768 instead of
  // three times (806 MB of L2 reads at M = 50432 and 90% sparsity instead of 1116: the kernel was
  // reading L2 at ~5 TB/s, H100, 2026-12-06). Its 192 accumulators per thread need the producers'
  // registers: a producer warpgroup (one thread of it works) hands them over (setmaxnreg).
  static constexpr int kGroupCols = B == 32 ? 384 : 256;
  static constexpr bool kWide = kGroupCols > 256;
  static constexpr int kProducerWarps = kWide ? 4 : 1;
  static constexpr int kThreads = 32 * (kConsumerWarps + kProducerWarps);
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;  // (168 at 384 threads)
  static constexpr int kConsumerRegs = 232, kProducerRegs = 40;  // (wide form)
  static_assert(!kWide || 32 * (kConsumerWarps * kConsumerRegs + kProducerWarps * kProducerRegs) <= kThreads * kLaunchRegs,
                "setmaxnreg must redistribute the launch's registers, not ask for more");
  static constexpr int RG = kGroupCols / B;          // block-rows per group
  static constexpr int KB = kSlabCols / B;           // block-columns per slab
  static constexpr unsigned kKbMask = (1u << KB) - 1;
  static constexpr int kBlockBytes = B * B * 2;
  static constexpr int kCap = kWBytes / kBlockBytes;  // blocks per slot: 16 at block 16, 4 at 32
  static constexpr int kAcc = B / 2;                  // fp32 accumulators per thread per block-row (m64 x B)
  static constexpr int kChunks = B / 8;               // 16-byte chunks per W row (core-matrix layout)
  static_assert(RG * KB <= 64, "a (group, slab) mask is one 64-bit word");
  static_assert(RG * kAcc == kGroupCols / 2, "a unit's accumulators: 64 rows x kGroupCols per warpgroup");
};

// [ring][full, empty barriers][masks]
constexpr size_t yres_smem_bytes(int mask_words) {
  return kAlignSlack + static_cast<size_t>(kSlots) * kSlotBytes + 2 * kSlots * sizeof(uint64_t) +
         static_cast<size_t>(mask_words) * sizeof(uint64_t);
}

struct YresArgs {
  CUtensorMap x_map;  // x [M, K] bf16, boxes of 64 columns x 128 rows, 128-byte swizzle
  int64_t M;
  int N;
  int block_rows;  // N / B
  int slabs;       // K / 64
  int groups;      // ceil(N / kGroupCols)
  int units;       // token tiles x groups
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const bf16* values_cm;  // the blocks in core-matrix order (bsr_core_matrix_order)
  const bf16* bias;       // [N] or null
  const bf16* residual;   // [M, N] or null (may be y itself: a warp reads its rows before it writes them)
  bf16* y;
  int prefetch_slab;      // the residual's lines into L2 when the consumers reach this slab (0: the unit's start)
};

// A (group, slab)'s blocks in slot-sized parts: the lowest kCap set bits of `rest`, in bit order (the
// order of the blocks in the slot). Producer and consumers cut the same parts.
template <int Cap>
__device__ __forceinline__ uint64_t next_part(uint64_t rest) {
  if (__popcll(rest) <= Cap) return rest;
  uint64_t r = rest;
#pragma unroll 1
  for (int i = 0; i < Cap; ++i) r &= r - 1;
  return rest ^ r;
}

template <int B, bool Gelu>
__global__ void __launch_bounds__(YresCfg<B>::kThreads, 1) bsr_yres_kernel(const __grid_constant__ YresArgs p) {
#if VITRT_WGMMA_ENABLED
  using C = YresCfg<B>;
  constexpr int RG = C::RG, KB = C::KB, kThreads = C::kThreads, kGroupCols = C::kGroupCols;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((kAlignSlack - (ptx::smem_u32(smem_raw) & (kAlignSlack - 1))) & (kAlignSlack - 1));
  unsigned char* ring = smem;                                                       // [kSlots][x slab | W blocks]
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kSlots * kSlotBytes);         // [kSlots] slab + blocks landed
  uint64_t* empty = full + kSlots;                                                  // [kSlots] every consumer warp is done
  unsigned long long* masks = reinterpret_cast<unsigned long long*>(empty + kSlots);  // [groups][slabs]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ns = p.slabs, nmask = p.groups * p.slabs;
  // The units u = tile * groups + group go to the CTAs u = blockIdx.x, + gridDim.x, ...

  // The masks of every (group, slab), from the CSR structure (a block-row's threads OR their bits in).
  for (int i = threadIdx.x; i < nmask; i += kThreads) masks[i] = 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s)
      mbar::init(&full[s], 1), mbar::init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  for (int r = threadIdx.x; r < p.block_rows; r += kThreads) {
    const int grp = r / RG, q = r % RG;
    const int kb = __ldg(p.row_ptr + r), ke = __ldg(p.row_ptr + r + 1);
    for (int k = kb; k < ke; ++k) {
      const int c = __ldg(p.col_idx + k);
      atomicOr(&masks[grp * ns + c / KB], 1ull << (q * KB + c % KB));
    }
  }
  __syncthreads();

  if (warp >= kConsumerWarps) {
    if constexpr (C::kWide) ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (warp > kConsumerWarps) return;  // (the wide form's other producer warps only hand their registers over)
    // ---- producer warp. Per unit, per (group, slab) with blocks, per part: lane 0 the slab, and lane q
    // (q < RG) block-row q's run of the part's blocks (a row's blocks of one slab are consecutive in
    // storage: its cursor cur), at its place in the slot: after the part's blocks of rows 0 .. q - 1,
    // whose count is the popcount of the part's bits below row q's. Why a warp: one thread walking the
    // RG rows per part (16 at block 16, with a branch and a copy per row holding blocks) was the
    // kernel's bottleneck at block 16: ncu (H100, 2026-12-06, fc2 @ 0.9) found the consumers waiting
    // for full slots in 29% of their samples, with L2 at 33% of its throughput (block 32, half the
    // rows per part: 23%, L2 67%).
    int slot = 0, n = 0;
    unsigned round = 0;  // parity of the ring round of `slot`
    const uint64_t below = lane < RG ? (uint64_t{1} << (lane * KB)) - 1 : 0;  // the bits of rows 0 .. lane - 1
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
      const int tile = u / p.groups, grp = u % p.groups;
      const int row = grp * RG + lane;
      int cur = lane < RG && row < p.block_rows ? __ldg(p.row_ptr + row) : 0;
      for (int s = 0; s < ns; ++s) {
        uint64_t rest = masks[grp * ns + s];
        while (rest != 0) {  // the slab's parts, until the group's mask is used up
          const uint64_t part = next_part<C::kCap>(rest);
          rest ^= part;
          if (n >= kSlots) mbar::wait(&empty[slot], round ^ 1);  // its previous part retired by every consumer warp
          unsigned char* dst = ring + slot * kSlotBytes;
          if (lane == 0) {
            mbar::arrive_expect_tx(&full[slot], kXBytes + __popcll(part) * C::kBlockBytes);
            mbar::tma_load_2d(dst, &p.x_map, s * kSlabCols, tile * kTileM, &full[slot]);
          }
          __syncwarp();  // (the rows' copies after the expected byte count)
          if (lane < RG) {
            const int cnt = __popc(static_cast<unsigned>(part >> (lane * KB)) & C::kKbMask);
            if (cnt > 0) {
              const int before = __popcll(part & below);
              mbar::bulk_copy_to_smem(dst + kXBytes + before * C::kBlockBytes,
                                      p.values_cm + static_cast<int64_t>(cur) * B * B, cnt * C::kBlockBytes, &full[slot]);
              cur += cnt;
            }
          }
          if (++slot == kSlots) slot = 0, round ^= 1;
          ++n;
        }
      }
    }
  } else {
    if constexpr (C::kWide) ptx::setmaxnreg_inc<C::kConsumerRegs>();
    // ---- consumer warpgroups: warpgroup h owns rows 64 h .. 64 h + 63 of each unit's tile, warp w4
    // rows 16 w4 .. 16 w4 + 15 of those; a thread holds rows g and g + 8 of its warp's 16, and of
    // each of the group's block-rows q the columns 8 j + 2 t and + 1 (acc[q]).
    const int h = __shfl_sync(0xffffffffu, warp / 4, 0), w4 = warp % 4, g = lane / 4, t = lane % 4;
    // (Offsets added to the descriptors' low words: see DescWords.)
    const bsr_wgmma::DescWords xd(wgmma::make_smem_desc_sw128(ring + h * kXHalfBytes, 1024), false);
    const bsr_wgmma::DescWords wd(wgmma::make_smem_desc(ring + kXBytes, 128, C::kChunks * 128), false);
    // A retired slot back to its producer.
    auto release = [&](int s) {
      if (lane == 0) mbar::arrive(&empty[s]);
    };
    int slot = 0;
    unsigned round = 0;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
      const int tile = u / p.groups, grp = u % p.groups;
      const int64_t wrow = static_cast<int64_t>(tile) * kTileM + 64 * h + 16 * w4;  // this warp's first row
      // The unit's residual lines into L2 (the warp's 16 rows x kGroupCols / 64 lines of 128 bytes: two
      // or three per lane), so that the epilogue's loads do not wait for HBM: at the unit's start, or
      // when the consumers reach slab p.prefetch_slab (VITRT_BSR_YRES_PREFETCH, below).
      auto prefetch_residual = [&]() {
        if (p.residual == nullptr) return;
        constexpr int kLines = kGroupCols / 64;
#pragma unroll
        for (int i = lane; i < 16 * kLines; i += 32) {
          const int64_t m = wrow + i / kLines;
          const int col = grp * kGroupCols + 64 * (i % kLines);
          if (m < p.M && col < p.N) ptx::prefetch_l2(p.residual + m * p.N + col);
        }
      };
      if (p.prefetch_slab == 0) prefetch_residual();
      float acc[RG][C::kAcc];
#pragma unroll
      for (int q = 0; q < RG; ++q)
#pragma unroll
        for (int i = 0; i < C::kAcc; ++i) acc[q][i] = 0.f;
#pragma unroll
      for (int q = 0; q < RG; ++q) wgmma::fence_operands(acc[q]);
      int prev_slot = -1;
      for (int s = 0; s < ns; ++s) {
        if (s == p.prefetch_slab && s > 0) prefetch_residual();
        uint64_t rest = masks[grp * ns + s];
        while (rest != 0) {
          const uint64_t part = next_part<C::kCap>(rest);
          rest ^= part;
          mbar::wait(&full[slot], round);
          const uint32_t xlo = xd.lo + static_cast<uint32_t>((slot * kSlotBytes) >> 4);
          uint32_t wlo = wd.lo + static_cast<uint32_t>((slot * kSlotBytes) >> 4);
#pragma unroll
          for (int q = 0; q < RG; ++q) {
            for (unsigned bits = static_cast<unsigned>(part >> (q * KB)) & C::kKbMask; bits != 0; bits &= bits - 1) {
              const uint32_t a = xlo + static_cast<uint32_t>((__ffs(bits) - 1) * (B / 8));  // the block-column's 2B bytes
              wgmma::fence();
#pragma unroll
              for (int kk = 0; kk < B / 16; ++kk)
                bsr_wgmma::block_k16<B>(acc[q], xd.with_low(a + 2 * kk), wd.with_low(wlo + 16 * kk));
              wlo += C::kBlockBytes >> 4;
            }
          }
          wgmma::commit();
          if (prev_slot >= 0) {  // the part before this one has retired: hand its slot back
            wgmma::wait<1>();
            release(prev_slot);
          }
          prev_slot = slot;
          if (++slot == kSlots) slot = 0, round ^= 1;
        }
      }
      wgmma::wait<0>();
#pragma unroll
      for (int q = 0; q < RG; ++q) wgmma::fence_operands(acc[q]);
      if (prev_slot >= 0) release(prev_slot);

      // Epilogue, 64 columns at a time: bias, GELU and residual in fp32, rounded once, then whole
      // lines (rows_to_lines: lanes 8 k .. 8 k + 7 hold rows 2 k and 2 k + 1 of each pass's 8).
#pragma unroll
      for (int piece = 0; piece < kGroupCols / 64; ++piece) {
        const int col0 = grp * kGroupCols + 64 * piece;
        if (col0 >= p.N) break;  // (the last group of an N that is not a multiple of kGroupCols)
        __nv_bfloat162 bias[8];  // (widened at use: 8 registers fewer next to the wide form's 192 accumulators)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          bias[j] = p.bias ? *reinterpret_cast<const __nv_bfloat162*>(p.bias + col0 + 8 * j + 2 * t)
                           : __floats2bfloat162_rn(0.f, 0.f);
        __nv_bfloat162 res[2][8];
#pragma unroll
        for (int pass = 0; pass < 2; ++pass) {
          const int64_t m = wrow + g + 8 * pass;
          const bool in = p.residual && m < p.M;
#pragma unroll
          for (int j = 0; j < 8; ++j)
            res[pass][j] = in ? *reinterpret_cast<const __nv_bfloat162*>(p.residual + m * p.N + col0 + 8 * j + 2 * t)
                              : __floats2bfloat162_rn(0.f, 0.f);
        }
#pragma unroll
        for (int pass = 0; pass < 2; ++pass) {
          unsigned v[8];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float* a = acc[piece * (64 / B) + j / (B / 8)];
            const int jj = j % (B / 8);
            const float2 b = __bfloat1622float2(bias[j]);
            float v0 = a[4 * jj + 2 * pass] + b.x, v1 = a[4 * jj + 2 * pass + 1] + b.y;
            if constexpr (Gelu) v0 = dev::gelu_tanh_approx(v0), v1 = dev::gelu_tanh_approx(v1);
            const float2 r = __bfloat1622float2(res[pass][j]);
            v[j] = bsr_wgmma::pack_bf16x2(v0 + r.x, v1 + r.y);
          }
          unsigned a4[4], b4[4];
          rows_to_lines(v, lane, a4, b4);  // (after every lane's residual loads: in place stays safe)
          const int64_t m = wrow + 8 * pass + 2 * (lane / 8);  // a4's row; b4's is the next
          bf16* ya = p.y + m * p.N + col0 + 8 * (lane % 8);
          if (m < p.M) __stcs(reinterpret_cast<int4*>(ya), make_int4(a4[0], a4[1], a4[2], a4[3]));
          if (m + 1 < p.M) __stcs(reinterpret_cast<int4*>(ya + p.N), make_int4(b4[0], b4[1], b4[2], b4[3]));
        }
      }
    }
  }
#else
  using C = YresCfg<B>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::RG > 0 && C::kCap > 0, "");
  (void)p;
  __trap();  // never launched: bsr_yres_supported needs an sm_90 device
#endif
}

// VITRT_BSR_YRES_PREFETCH: "start" prefetches each unit's residual into L2 at the unit's start; unset /
// other ("late"): when its consumers reach the last quarter of its slabs. Why late: a unit takes ~30 us
// at ViT-B's fc2 (M = 50432, 90%), in which ~150 MB pass through the 50 MB L2, so lines prefetched at
// its start are likely gone by its epilogue. Measured (H100, 2026-12-06 ~10:00 UTC, bias + residual,
// M = 50432, ms start / late): block 32 @ 0.9 0.2596-0.2617 / 0.2244-0.2257, @ 0.86 0.2956-0.2982 /
// 0.2557-0.2568; block 16 @ 0.9 0.3448-0.3474 / 0.3312-0.3317, @ 0.86 0.3794-0.3796 / 0.3664-0.3668;
// ViT-B/16 bs256 at block 16 0.97x -> 0.98x.
int yres_prefetch_slab(int slabs) {
  static const bool late = env_choice<bool>("VITRT_BSR_YRES_PREFETCH", {{"late", true}, {"start", false}}, true);
  return late ? std::max(0, slabs - std::max(1, slabs / 4)) : 0;
}

// A kernel instance and its configuration, as a type (for the launcher).
template <int B, bool Gelu>
struct YresKernel {
  static constexpr auto value = bsr_yres_kernel<B, Gelu>;
  using Cfg = YresCfg<B>;
};

// VITRT_BSR_YRES: "1" wherever supported, "0" never; unset / other ("auto"): see bsr_yres_selected.
enum class YresMode { Off, On, Auto };
YresMode yres_mode() {
  static const YresMode v = env_choice<YresMode>(
      "VITRT_BSR_YRES", {{"0", YresMode::Off}, {"1", YresMode::On}}, YresMode::Auto);
  return v;
}

// Output columns per unit at w's block (YresCfg::kGroupCols).
int yres_group_cols(int block) { return block == 32 ? YresCfg<32>::kGroupCols : YresCfg<16>::kGroupCols; }

// The (group, slab) mask words of w, or -1 when they do not fit shared memory next to the ring.
int yres_mask_words(const BsrDeviceView& w) {
  const int gc = yres_group_cols(w.block);
  const int64_t groups = (w.rows + gc - 1) / gc, slabs = w.cols / kSlabCols;
  if (groups * slabs > kMaxMaskWords) return -1;
  return yres_smem_bytes(static_cast<int>(groups * slabs)) <= kMaxSmem ? static_cast<int>(groups * slabs) : -1;
}

}  // namespace

bool bsr_yres_supported(const BsrDeviceView& w, DType out_dtype) {
  if (!device_is_sm90() || out_dtype != DType::BF16 || (w.block != 16 && w.block != 32)) return false;
  if (w.rows <= 0 || w.cols <= 0 || w.rows % 64 != 0 || w.cols % kSlabCols != 0) return false;
  if (w.rows > INT32_MAX || yres_mask_words(w) < 0) return false;
  return w.values_core_matrix != nullptr || w.nnz == 0;  // the blocks go by bulk copies of that copy
}

bool bsr_yres_selected(int64_t M, const BsrDeviceView& w, const void* residual, DType out_dtype) {
  const YresMode mode = yres_mode();
  if (mode == YresMode::Off || !bsr_yres_supported(w, out_dtype)) return false;
  if (mode == YresMode::On) return true;
  // Auto: block 16 where the x-resident kernel does not take it (K > 768: the MLP's second linear),
  // measured 16-33% faster there than the mma.sync kernel it replaces (H100, 2026-12-05 22:41 UTC,
  // BENCHMARKS.md). Block 32 in its 384-column units without a residual: 13-22% less time than the
  // streamed kernel at 0.8-0.9 on the fc2 shape (0.1817-0.1843 against 0.2205-0.2236 ms at 0.9, H100,
  // 2026-12-06); with one (ViT-B/16's fc2 + residual) the streamed kernel was faster (0.213 against
  // 0.247 ms per layer in the model), so it keeps those. (Measured at ViT-B's fc2 shape only; ViT-L /
  // ViT-H shapes and a GELU epilogue follow the rule unmeasured.) On cards of 4 TB/s or more, block 32
  // stays on the streamed kernel everywhere: on the H200 it ran the fc2 shape at 0.9 in 0.1700-0.1747 ms
  // against this kernel's 0.1984-0.1993 (1.86-1.88x of dense against 1.59-1.60x), at 0.8 0.262-0.265
  // against 0.292-0.308 (2026-12-06 ~10:29 UTC). M keeps the signature of the other kernels' rules.
  (void)M;
  return w.block == 16 || (w.block == 32 && residual == nullptr && peak_memory_gbps() < 4000.0);
}

void bsr_linear_bf16_yres(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                          const void* residual, void* y, int max_ctas) {
  constexpr const char* kOp = "cuda bsr_linear_bf16 (y-resident)";
  check_bsr_linear_args(kOp, x, M, w, residual, y);
  VITRT_CHECK(bsr_yres_supported(w, DType::BF16), InvalidArgument, kOp,
              ": needs sm_90, block 16 or 32, N and K multiples of 64, at most ", kMaxMaskWords,
              " (output-column group, 64-column slab) pairs and the core-matrix copy of the blocks (block ", w.block,
              ", N ", w.rows, ", K ", w.cols, ")");
  VITRT_CHECK(reinterpret_cast<uintptr_t>(bias) % 4 == 0, InvalidArgument, kOp,
              ": the bias must be 4-byte aligned (read as bf16 pairs)");
  VITRT_CHECK(M <= INT32_MAX - kTileM, InvalidArgument, kOp, ": too many tokens (", M, ")");
  const int gc = yres_group_cols(w.block);
  const int64_t tiles = (M + kTileM - 1) / kTileM, groups = (w.rows + gc - 1) / gc;
  VITRT_CHECK(tiles * groups <= INT32_MAX, InvalidArgument, kOp, ": too many work items");
  if (tiles * groups == 0) return;
  YresArgs a{};
  a.x_map = bf16_tensor_map_2d(x, M, w.cols, kSlabCols, kTileM, CU_TENSOR_MAP_SWIZZLE_128B);
  a.M = M;
  a.N = static_cast<int>(w.rows);
  a.block_rows = static_cast<int>(w.rows / w.block);
  a.slabs = static_cast<int>(w.cols / kSlabCols);
  a.groups = static_cast<int>(groups);
  a.units = static_cast<int>(tiles * groups);
  a.row_ptr = w.row_ptr;
  a.col_idx = w.col_idx;
  a.values_cm = static_cast<const bf16*>(w.values_core_matrix);
  a.bias = static_cast<const bf16*>(bias);
  a.residual = static_cast<const bf16*>(residual);
  a.y = static_cast<bf16*>(y);
  a.prefetch_slab = yres_prefetch_slab(a.slabs);
  const size_t smem = yres_smem_bytes(a.groups * a.slabs);
  int grid = static_cast<int>(std::min<int64_t>(a.units, sm_count()));
  if (max_ctas > 0) grid = std::min(grid, max_ctas);
  auto run = [&](auto kernel_tag) {
    constexpr auto kernel = decltype(kernel_tag)::value;
    using C = typename decltype(kernel_tag)::Cfg;
    if constexpr (C::kWide) bsr_wgmma::check_launch_registers<kernel>(C::kLaunchRegs, kOp, "VITRT_BSR_YRES=0 runs another kernel");
    bsr_wgmma::launch<kernel>(a, grid, C::kThreads, smem, kMaxSmem);
  };
  if (w.block == 16) {
    if (gelu) run(YresKernel<16, true>{});
    else run(YresKernel<16, false>{});
  } else {
    if (gelu) run(YresKernel<32, true>{});
    else run(YresKernel<32, false>{});
  }
}

}  // namespace vitrt::cuda
