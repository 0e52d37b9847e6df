// Hopper block-sparse x dense linear for short reductions (K <= 768): x rows resident in shared
// memory, the weight's stored blocks streamed past them, wgmma (sm_90a).
//
// Why a second kernel: at 90% sparsity the ViT MLP's 768 -> 3072 layer has ~1.2 stored blocks per
// block-row, so bsr_gemm.cu's CTA per (token tile, block-row) spends most of its life on per-CTA
// set-up, x-tile reloads and the epilogue (ncu, 3072 x 768 b64 @ 0.9: 25% occupancy, 0.71 eligible
// warps per scheduler, issue slots 44% busy for 10% of the dense work). Its floor is the bytes it
// must move (x 77.5 MB in, y 310 MB out at M = 50432), so this kernel is built to stream them:
//  - a persistent CTA owns a tile of 128 tokens at a time and keeps all of its x rows in shared
//    memory (128 x K bf16, 192 KB at K = 768), read from HBM exactly once;
//  - the weight's stored blocks are consumed in storage order (block-row by block-row, which is
//    the order of `values`), so one producer warp streams them through an S-slot ring with
//    cp.async, whatever the sparsity pattern; full / empty mbarriers per slot;
//  - two consumer warpgroups own 64 tokens each (P pairs of them, see XresCfg): for every block-row
//    they run one wgmma (m64 x B x 16, both operands from shared memory) per k16 step of each
//    stored block, then write that 64 x B tile of y (bias, GELU, bf16) through a per-warp staging
//    buffer as full 128-byte lines; an empty block-row writes act(bias) at once;
//  - each x half has its own full / empty barrier pair, so when its warpgroups finish a tile the
//    producer refills it while the others still compute (as far as the S-slot ring lets them drift
//    apart: every warp passes every W block).
// x and the W blocks sit in the no-swizzle core-matrix layout of wgmma.cuh ([row / 8][16-byte
// chunk][row % 8]). x is written chunk by chunk with cp.async (8 lanes per 128 contiguous bytes, so
// the shared-memory writes are conflict-free and each global row segment is read in whole
// sectors) and published by cp.async.mbarrier.arrive (each producer lane's arrival fires when its
// copies land); the consumers fence the async proxy once per tile. A W block is one bulk copy
// (cp.async.bulk, complete_tx on its full barrier) of the copy of the values bsr_to_cuda keeps in
// that order (bsr_core_matrix_order): the async proxy writes it, so no fence, and one producer
// instruction per block. (Without that copy, or with VITRT_BSR_XRES_W=cpasync, W blocks go by
// cp.async like x, and the consumers fence after each wait.)
// tests/protocol/test_bsr_xres_protocol.py models this barrier protocol (random interleavings: no
// deadlock, no buffer read early or refilled while read); keep the two in step.
// Status: an experiment, off by default (VITRT_BSR_XRES, below). Its first form was correct (tests)
// but measured slower than bsr_gemm.cu's kernel: each consumer warp ran its block-rows as one
// serial chain (barrier wait, proxy fence, MMA, wait, epilogue) with two consumer warps per
// scheduler, and the proxy fence (a MEMBAR.ALL.CTA) waited for the previous block-row's output
// stores (BENCHMARKS.md, 2026-12-03 13:45 session). Written since and not yet run on a GPU: the
// fence moved before the stores (the next blocks are waited for early), two warpgroup pairs, and
// the W blocks by bulk copies.
// Scope: bf16 in and out, block 32 or 64, no residual (the 768 -> 3072 layer's epilogue is bias +
// GELU); everything else runs bsr_gemm.cu's kernel. The GELU is the tanh form with the hardware
// tanh, as bsr_gemm.cu's bf16-output path, so both kernels give the same model.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/mbarrier.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/wgmma.cuh"
#include "vitrt/error.h"

// The config table carries members the sm_80 pass (kernel body compiled out) does not read.
#pragma nv_diag_suppress 177

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileM = 128;          // tokens per tile: two consumer warpgroups of 64 (per pair)
constexpr int kMaxK = 768;           // 128 x 768 bf16 = 192 KB of x per CTA
constexpr size_t kMaxSmem = 227 * 1024;  // sm_90's opt-in limit per CTA

// P: consumer warpgroup pairs. Each pair covers the tile's 128 tokens (one warpgroup per x half)
// and computes the block-rows r with r % P == its index, so P = 2 keeps two block-rows in flight
// per x half, as long as the W ring holds both rows' blocks (VITRT_BSR_XRES=2; not yet measured on
// a GPU).
template <int B, int P>
struct XresCfg {
  static constexpr int S = B == 64 ? 3 : 8;          // W ring slots
  static constexpr int kBlockBytes = B * B * 2;
  static constexpr int kChunks = B / 8;              // 16-byte chunks per W row / per x row of a block
  static constexpr int kConsumerWarps = 8 * P;
  static constexpr int kThreads = 32 * kConsumerWarps + 32;  // + one producer warp
  static constexpr int kStageRow = 2 * B + 16;       // bytes per staged output row (+16: conflict-free)
  static constexpr int kStageRows = 8 / P;           // rows per warp and staging pass
  static constexpr int kStageBytes = kStageRows * kStageRow;
  static constexpr int kAcc = B / 2;                 // fp32 accumulators per thread (m64 x B)
};

// The matrix's structure is copied into shared memory at the start (row_ptr as int, col_idx as
// bytes: K / B <= 24), so that no global load sits on a block-row's critical path. The col_idx
// table holds the view's nnz, or every block when that is unknown.
size_t xres_row_ptr_bytes(int64_t block_rows) { return (static_cast<size_t>(block_rows + 1) * 4 + 15) / 16 * 16; }
int64_t xres_col_capacity(const BsrDeviceView& w) { return w.nnz >= 0 ? w.nnz : (w.rows / w.block) * (w.cols / w.block); }
size_t xres_table_bytes(const BsrDeviceView& w) {
  return xres_row_ptr_bytes(w.rows / w.block) + (static_cast<size_t>(xres_col_capacity(w)) + 15) / 16 * 16;
}

template <int B, int P>
size_t xres_smem_bytes(int64_t K, size_t table_bytes) {
  using C = XresCfg<B, P>;
  return static_cast<size_t>(kTileM) * K * 2 + C::S * C::kBlockBytes + C::kConsumerWarps * C::kStageBytes +
         (4 + 2 * C::S) * sizeof(uint64_t) + table_bytes;
}

struct XresArgs {
  const bf16* x;
  int64_t M;
  int K, N;
  int block_rows;
  int rp_bytes;  // row_ptr table bytes in shared memory (16-byte multiple); col_idx follows
  int nnz_cap;   // col_idx table capacity (the view's nnz, or every block)
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const bf16* values;
  const bf16* values_cm;  // core-matrix order (one bulk copy per block), or null: cp.async of values
  const bf16* bias;
  bool gelu;
  bf16* y;
  int tiles;
};

#if VITRT_WGMMA_ENABLED
template <int B>
__device__ __forceinline__ void wgmma_block_k16(float (&acc)[B / 2], uint64_t da, uint64_t db) {
  if constexpr (B == 64) wgmma::wgmma_m64n64k16_ss(acc, da, db);
  else wgmma::wgmma_m64n32k16_ss(acc, da, db);
}
#endif

template <int B, int P>
__global__ void __launch_bounds__(XresCfg<B, P>::kThreads, 1) bsr_xres_kernel(const XresArgs p) {
#if VITRT_WGMMA_ENABLED
  using C = XresCfg<B, P>;
  constexpr int kConsumerWarps = C::kConsumerWarps, kThreads = C::kThreads;
  using ptx::cp_async16;
  extern __shared__ __align__(128) unsigned char smem[];
  const int xhalf_bytes = 64 * p.K * 2;
  const int x_chunks = p.K / 8;  // 16-byte chunks per x row
  unsigned char* xs = smem;                                // [2 halves][64 rows], core-matrix layout
  unsigned char* ws = smem + 2 * xhalf_bytes;              // [S][B x B], core-matrix layout
  unsigned char* stage = ws + C::S * C::kBlockBytes;       // [warp][kStageRows][kStageRow]
  uint64_t* bars = reinterpret_cast<uint64_t*>(stage + kConsumerWarps * C::kStageBytes);
  uint64_t* xfull = bars;       // [2] x half h of the current tile landed (32 producer lanes)
  uint64_t* xempty = bars + 2;  // [2] the P warpgroups on half h are done with it (4 P warps)
  uint64_t* wfull = bars + 4;   // [S] W block landed (32 producer lanes)
  uint64_t* wempty = bars + 4 + C::S;  // [S] every consumer warp has passed it
  int* rp_s = reinterpret_cast<int*>(bars + 4 + 2 * C::S);          // [block_rows + 1]
  uint8_t* col_s = reinterpret_cast<uint8_t*>(rp_s) + p.rp_bytes;   // [nnz]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int h = 0; h < 2; ++h) mbar::init(&xfull[h], 32), mbar::init(&xempty[h], 4 * P);
    // wfull: the 32 lanes' cp.async arrivals, or one expect_tx arrival for a bulk copy.
    for (int s = 0; s < C::S; ++s) mbar::init(&wfull[s], p.values_cm ? 1 : 32), mbar::init(&wempty[s], kConsumerWarps);
  }
  const int nnz = __ldg(p.row_ptr + p.block_rows);
  if (nnz > p.nnz_cap) __trap();  // a view whose nnz disagrees with its row_ptr (never from device_view)
  for (int i = threadIdx.x; i <= p.block_rows; i += kThreads) rp_s[i] = __ldg(p.row_ptr + i);
  for (int i = threadIdx.x; i < nnz; i += kThreads) col_s[i] = static_cast<uint8_t>(__ldg(p.col_idx + i));
  __syncthreads();  // publishes the barriers' initialisation and the tables

  if (warp == kConsumerWarps) {
    // ---- producer warp
    // A buffer is published by the hardware: each lane's cp.async.mbarrier.arrive fires once its
    // copies have landed (32 arrivals complete the phase). The consumers fence the async proxy
    // after their wait. (Publishing from the producer after a cp.async.wait_group held the ring's
    // blocks back: with three slots, only one block was ever visible ahead of the consumers.)
    auto copy_x_half = [&](int h, int64_t m0) {
      unsigned char* dst = xs + h * xhalf_bytes + (lane % 8) * 16;
      for (int rg = 0; rg < 8; ++rg) {
        const int64_t m = m0 + 64 * h + rg * 8 + lane % 8;
        const bool in = m < p.M;
        const bf16* src = p.x + (in ? m : 0) * p.K;
        unsigned char* d = dst + rg * x_chunks * 128;
        for (int c = lane / 8; c < x_chunks; c += 4) cp_async16(d + c * 128, src + c * 8, in ? 16 : 0);
      }
    };
    auto copy_w = [&](int slot, int k) {
      if (p.values_cm) {  // one bulk copy (async proxy: the consumers need no fence for it)
        if (lane == 0) {
          mbar::arrive_expect_tx(&wfull[slot], C::kBlockBytes);
          mbar::bulk_copy_to_smem(ws + slot * C::kBlockBytes, p.values_cm + static_cast<int64_t>(k) * B * B,
                                  C::kBlockBytes, &wfull[slot]);
        }
        return;
      }
      unsigned char* dst = ws + slot * C::kBlockBytes + (lane % 8) * 16;
      const bf16* src = p.values + static_cast<int64_t>(k) * B * B;
#pragma unroll
      for (int ng = 0; ng < B / 8; ++ng)
#pragma unroll
        for (int c = lane / 8; c < C::kChunks; c += 4)
          cp_async16(dst + (ng * C::kChunks + c) * 128, src + (ng * 8 + lane % 8) * B + c * 8, 16);
    };
    int n = 0, tcount = 0;
    for (int tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++tcount) {
      const int64_t m0 = static_cast<int64_t>(tile) * kTileM;
      bool xpend[2] = {true, true};
      // Loads x half h of this tile once the warpgroups on half h released the previous tile's
      // (blocking or not).
      auto try_x = [&](bool block) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!xpend[h]) continue;
          if (tcount > 0) {
            const unsigned parity = (tcount - 1) & 1;
            if (!mbar::test(&xempty[h], parity)) {
              if (!block) continue;
              mbar::wait(&xempty[h], parity);
            }
          }
          copy_x_half(h, m0);
          mbar::arrive_when_cp_async_lands(&xfull[h]);
          xpend[h] = false;
        }
      };
      try_x(false);
      for (int k = 0; k < nnz; ++k, ++n) {
        const int slot = n % C::S;
        if (n >= C::S) {
          const unsigned parity = ((n / C::S) - 1) & 1;
          // The slot frees once every consumer warp has passed its block; meanwhile keep trying the
          // x halves (a warp that needs this tile's x to get there would otherwise wait for ever).
          while (!mbar::test(&wempty[slot], parity)) {
            try_x(false);
            if (!xpend[0] && !xpend[1]) {
              mbar::wait(&wempty[slot], parity);
              break;
            }
            __nanosleep(64);
          }
        }
        copy_w(slot, k);
        if (!p.values_cm) mbar::arrive_when_cp_async_lands(&wfull[slot]);
        try_x(false);
      }
      try_x(true);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");  // no copies outlive their thread
    return;
  }

  // ---- consumer warpgroups: warpgroup wg of pair wg / 2 owns rows 64 h .. 64 h + 63 of each tile
  // (h = wg % 2, its x half) for the pair's block-rows; warp w4 rows 16 w4 .. 16 w4 + 15 of those.
  const int wg = warp / 4, pair = wg / 2, h = wg % 2, w4 = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const unsigned char* xh = xs + h * xhalf_bytes;
  unsigned char* st = stage + warp * C::kStageBytes;
  const uint32_t x_sbo = static_cast<uint32_t>(x_chunks) * 128;  // between 8-row groups of x
  float acc[C::kAcc];
  int n = 0, tcount = 0;
  for (int tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++tcount) {
    const int64_t row0 = static_cast<int64_t>(tile) * kTileM + 64 * h + 16 * w4;  // this warp's first row
    mbar::wait(&xfull[h], tcount & 1);
    wgmma::fence_proxy_async_smem();  // the cp.async writes -> wgmma's reads
    // This thread's bias values (columns 8 j + 2 t, + 1) of block-row r, loaded one row ahead.
    __nv_bfloat162 bias_next[B / 8];
    auto load_bias = [&](int r) {
#pragma unroll
      for (int j = 0; j < B / 8; ++j)
        bias_next[j] = p.bias && r < p.block_rows
                           ? *reinterpret_cast<const __nv_bfloat162*>(p.bias + static_cast<int64_t>(r) * B + 8 * j + 2 * t)
                           : __floats2bfloat162_rn(0.f, 0.f);
    };
    // Every warp waits for every fill of the ring in order, its own blocks and the other pairs'
    // alike (it releases the latter at once): a warp that skipped a phase of a slot would take a
    // later fill's parity for the one it waits for. `waited`: this tile's blocks [0, waited) done.
    const int n_base = n;
    int waited = 0, wrow = 0;  // wrow: the block-row of block `waited` (P > 1)
    auto wait_through = [&](int last, bool fence = true) {
      if (waited > last) return;
      for (; waited <= last; ++waited) {
        const int nn = n_base + waited;
        mbar::wait(&wfull[nn % C::S], (nn / C::S) & 1);
        if constexpr (P > 1) {
          while (rp_s[wrow + 1] <= waited) ++wrow;
          if (wrow % P != pair && lane == 0) mbar::arrive(&wempty[nn % C::S]);
        }
      }
      // The cp.async writes -> wgmma's reads (bulk copies need none). This is a MEMBAR.ALL.CTA:
      // issued after a block-row's output stores it waits for them, hence the early call before
      // each epilogue below.
      if (fence && !p.values_cm) wgmma::fence_proxy_async_smem();
    };
    load_bias(pair);
    for (int r = pair; r < p.block_rows; r += P) {
      const int kb = rp_s[r], ke = rp_s[r + 1];
      const int64_t n0 = static_cast<int64_t>(r) * B;
      float bias_r[B / 8][2];
#pragma unroll
      for (int j = 0; j < B / 8; ++j) bias_r[j][0] = __low2float(bias_next[j]), bias_r[j][1] = __high2float(bias_next[j]);
      load_bias(r + P);
#pragma unroll
      for (int i = 0; i < C::kAcc; ++i) acc[i] = 0.f;
      // The row's blocks, one commit group each. (A group spanning a loop of blocks, whose trip
      // count ptxas cannot prove uniform, makes it serialise every wgmma: one k16 step at a time.)
      for (int k = kb; k < ke; ++k) {
        const int slot = (n_base + k) % C::S;
        wait_through(k);
        wgmma::fence_operands(acc);
        wgmma::fence();
        const unsigned char* a = xh + col_s[k] * C::kChunks * 128;
        const unsigned char* b = ws + slot * C::kBlockBytes;
#pragma unroll
        for (int kk = 0; kk < B / 16; ++kk)
          wgmma_block_k16<B>(acc, wgmma::make_smem_desc(a + kk * 256, 128, x_sbo),
                             wgmma::make_smem_desc(b + kk * 256, 128, C::kChunks * 128));
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::fence_operands(acc);
        if (lane == 0) mbar::arrive(&wempty[slot]);
      }
      // Before this row's stores: wait for the next blocks this warp computes (this tile's only:
      // the producer starts the next tile's once every warp is done with this one) as far as the
      // ring allows without a slot this warp still holds (S - 1 past the next row's first).
      int rn = r + P;
      while (rn < p.block_rows && rp_s[rn] == rp_s[rn + 1]) rn += P;
      if (rn < p.block_rows) wait_through(min(rp_s[rn + 1] - 1, rp_s[rn] + C::S - 1));
      // Epilogue: the warp's 16 rows (a thread holds rows g and g + 8) in passes of kStageRows
      // through the staging rows, then stored as whole lines.
#pragma unroll
      for (int pass = 0; pass < 16 / C::kStageRows; ++pass) {
        const int half = pass * C::kStageRows / 8;                     // which of the thread's two rows
        const int g0 = (pass * C::kStageRows) % 8;                     // first g of this pass
        if (g >= g0 && g < g0 + C::kStageRows) {
#pragma unroll
          for (int j = 0; j < B / 8; ++j) {
            float v0 = acc[4 * j + 2 * half] + bias_r[j][0], v1 = acc[4 * j + 2 * half + 1] + bias_r[j][1];
            if (p.gelu) v0 = dev::gelu_tanh_approx(v0), v1 = dev::gelu_tanh_approx(v1);
            *reinterpret_cast<__nv_bfloat162*>(st + (g - g0) * C::kStageRow + (8 * j + 2 * t) * 2) =
                __floats2bfloat162_rn(v0, v1);
          }
        }
        __syncwarp();
#pragma unroll
        for (int q = lane; q < C::kStageRows * C::kChunks; q += 32) {
          const int rr = q / C::kChunks, c = q % C::kChunks;
          const int64_t m = row0 + half * 8 + g0 + rr;
          if (m < p.M)
            *reinterpret_cast<uint4*>(p.y + m * p.N + n0 + c * 8) =
                *reinterpret_cast<const uint4*>(st + rr * C::kStageRow + c * 16);
        }
        __syncwarp();
      }
    }
    if constexpr (P > 1) wait_through(nnz - 1, false);  // the other pairs' blocks after this pair's last row
    n = n_base + nnz;
    if (lane == 0) mbar::arrive(&xempty[h]);  // every wgmma reading this half has retired
  }
#endif
}

template <int B, int P>
void launch_xres(const XresArgs& a, int grid, size_t smem) {
  static std::once_flag flag;
  std::call_once(flag, [&] {
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(bsr_xres_kernel<B, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kMaxSmem)));
  });
  bsr_xres_kernel<B, P><<<grid, XresCfg<B, P>::kThreads, smem, current_stream()>>>(a);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

// VITRT_BSR_XRES: "1" (one warpgroup pair) or "2" (two pairs) wherever supported, "auto" (one
// pair) where there are enough tiles; unset / other: off. Off by default: the one-pair kernel
// measured slower than bsr_gemm.cu's (BENCHMARKS.md, 2026-12-03 13:45 session: 0.221 against
// 0.203 ms at 3072 x 768 b64 @ 0.9); the two-pair one has not run on a GPU yet.
enum class XresMode { Off, On, Auto };
// VITRT_BSR_XRES_W=cpasync: W blocks by cp.async even where the core-matrix copy exists (A/B).
struct XresEnv {
  XresMode mode = XresMode::Off;
  int pairs = 1;
  bool w_bulk = true;
};
XresEnv xres_env() {
  static const XresEnv v = [] {
    XresEnv r;
    const char* e = std::getenv("VITRT_BSR_XRES");
    if (e && (std::strcmp(e, "1") == 0 || std::strcmp(e, "2") == 0)) r.mode = XresMode::On, r.pairs = e[0] - '0';
    if (e && std::strcmp(e, "auto") == 0) r.mode = XresMode::Auto;
    const char* wm = std::getenv("VITRT_BSR_XRES_W");
    r.w_bulk = !(wm && std::strcmp(wm, "cpasync") == 0);
    return r;
  }();
  return v;
}

}  // namespace

namespace {
// Shared memory for w (its tables sized for every block stored when nnz is unknown), or 0 when the
// kernel does not cover it.
size_t xres_smem_for(const BsrDeviceView& w) {
  if ((w.block != 32 && w.block != 64) || w.cols > kMaxK || w.cols % 32 != 0 || w.rows % w.block != 0) return 0;
  const int64_t block_rows = w.rows / w.block;
  if (block_rows >= (int64_t{1} << 20)) return 0;
  const size_t tables = xres_table_bytes(w);
  // (The same for one and two pairs: two pairs stage half as many rows per warp.)
  static_assert(XresCfg<64, 1>::kConsumerWarps * XresCfg<64, 1>::kStageBytes ==
                XresCfg<64, 2>::kConsumerWarps * XresCfg<64, 2>::kStageBytes);
  const size_t bytes = w.block == 64 ? xres_smem_bytes<64, 1>(w.cols, tables) : xres_smem_bytes<32, 1>(w.cols, tables);
  return bytes <= kMaxSmem ? bytes : 0;
}
}  // namespace

bool bsr_xres_supported(const BsrDeviceView& w, const void* residual, DType out_dtype) {
  return device_is_sm90() && residual == nullptr && out_dtype == DType::BF16 && xres_smem_for(w) > 0;
}

bool bsr_xres_selected(int64_t M, const BsrDeviceView& w, const void* residual, DType out_dtype) {
  const XresMode mode = xres_env().mode;
  if (mode == XresMode::Off || !bsr_xres_supported(w, residual, out_dtype)) return false;
  // Auto: one tile per SM at least (below that its 128-token tiles leave SMs idle).
  return mode == XresMode::On || (M + kTileM - 1) / kTileM >= sm_count();
}

void bsr_linear_bf16_xres(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y,
                          int max_ctas, int pairs) {
  constexpr const char* kOp = "cuda bsr_linear_bf16 (x-resident)";
  if (pairs == 0) pairs = xres_env().pairs;
  VITRT_CHECK(pairs == 1 || pairs == 2, InvalidArgument, kOp, ": pairs must be 1 or 2, got ", pairs);
  check_bsr_linear_args(kOp, x, M, w, nullptr, y);
  VITRT_CHECK(bsr_xres_supported(w, nullptr, DType::BF16), InvalidArgument, kOp,
              ": needs sm_90, block 32 or 64 and K <= ", kMaxK, " (block ", w.block, ", K ", w.cols, ")");
  const int64_t tiles = (M + kTileM - 1) / kTileM;
  if (tiles == 0) return;
  VITRT_CHECK(reinterpret_cast<uintptr_t>(bias) % 4 == 0, InvalidArgument, kOp,
              ": the bias must be 4-byte aligned (read as bf16 pairs)");
  VITRT_CHECK(tiles <= INT32_MAX, InvalidArgument, kOp, ": too many tokens (", M, ")");
  XresArgs a{};
  a.x = static_cast<const bf16*>(x);
  a.M = M;
  a.K = static_cast<int>(w.cols);
  a.N = static_cast<int>(w.rows);
  a.block_rows = static_cast<int>(w.rows / w.block);
  a.rp_bytes = static_cast<int>(xres_row_ptr_bytes(a.block_rows));
  a.nnz_cap = static_cast<int>(xres_col_capacity(w));
  a.row_ptr = w.row_ptr;
  a.col_idx = w.col_idx;
  a.values = static_cast<const bf16*>(w.values);
  if (xres_env().w_bulk) a.values_cm = static_cast<const bf16*>(w.values_core_matrix);
  a.bias = static_cast<const bf16*>(bias);
  a.gelu = gelu;
  a.y = static_cast<bf16*>(y);
  a.tiles = static_cast<int>(tiles);
  int grid = static_cast<int>(std::min<int64_t>(tiles, sm_count()));
  if (max_ctas > 0) grid = std::min(grid, max_ctas);
  const size_t smem = xres_smem_for(w);
  if (w.block == 64) pairs == 1 ? launch_xres<64, 1>(a, grid, smem) : launch_xres<64, 2>(a, grid, smem);
  else pairs == 1 ? launch_xres<32, 1>(a, grid, smem) : launch_xres<32, 2>(a, grid, smem);
}

}  // namespace vitrt::cuda
