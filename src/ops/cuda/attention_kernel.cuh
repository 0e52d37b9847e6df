// Internals shared by the attention kernels (attention.cu: mma.sync and CUDA-core kernels;
// attention_wgmma.cu: the Hopper wgmma kernel for global attention with rel-pos): the kernel
// parameter block, device helpers, the rel-pos prologue and the shared-memory limit of a launch;
// include from .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "ops/cuda/ptx.cuh"
#include "ops/cuda/env_choice.h"
#include "ops/cuda/fragment_lines.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda::attn {

constexpr float kLog2e = 1.4426950408889634f;

// Kernel parameters (by value), filled by attention_launch from AttentionArgs.
struct KParams {
  const void* q;
  const void* k;
  const void* v;
  const void* pad_q;
  const void* pad_k;
  const void* pad_v;
  void* out;
  long long ldq, ldk, ldv, ldo;
  int heads, hd;
  int nq, nk;
  int q_share;
  int num_qtiles;
  float scale;       // natural units
  float scale_log2;  // scale * log2(e)
  const void* th;    // rel_pos_h rows [2*relH-1, hd]
  const void* tw;    // rel_pos_w rows [2*relW-1, hd]
  const void* th_lo;
  const void* tw_lo;
  int relH, relW;
  float inv_relW;
  int ws, Hg, Wg, nwy, nwx;
  float inv_ws;
  int win_dead_rows_softmax;  // windowed wgmma kernel: 1 = softmax on warps with no real rows too (A/B)
  int win_full_width_rows;    // windowed wgmma kernel: 1 = query rows over all 14 columns, padding too (A/B)
  int blocks_last_first;      // short wgmma kernel: 1 = CTA b takes the work of CTA gridDim.x - 1 - b (A/B)
};

// Exact t / d for 0 <= t < 2^22, d >= 1, from a float reciprocal plus one correction step.
__device__ __forceinline__ int fdiv(int t, int d, float inv_d) {
  int q = __float2int_rz((static_cast<float>(t) + 0.5f) * inv_d);
  const int r = t - q * d;
  if (r < 0) --q;
  else if (r >= d) ++q;
  return q;
}

// Row addressing of one sequence (see AttentionArgs), for the tensor-core kernels.
struct SeqAddr {
  long long q0 = 0, k0 = 0;  // dense: first output / k row of the sequence
  long long qs0 = 0;         // dense: first q row it reads (q0 unless sequences share q)
  long long brow = 0;        // windowed: b * Hg
  int gy0 = 0, gx0 = 0;      // windowed: first grid cell of the window

  __device__ void init(const KParams& p, int s) {
    if (p.ws == 0) {
      q0 = static_cast<long long>(s) * p.nq;
      qs0 = static_cast<long long>(s / p.q_share) * p.nq;
      k0 = static_cast<long long>(s) * p.nk;
    } else {
      const int nwin = p.nwy * p.nwx;
      const int b = s / nwin, w = s - b * nwin;
      const int wy = w / p.nwx, wx = w - wy * p.nwx;
      brow = static_cast<long long>(b) * p.Hg;
      gy0 = wy * p.ws;
      gx0 = wx * p.ws;
    }
  }
  // Row of window cell (ty, tx), or -1 for a cell in the padding past the grid.
  __device__ long long cell_row(const KParams& p, int ty, int tx) const {
    const int gy = gy0 + ty, gx = gx0 + tx;
    if (gy >= p.Hg || gx >= p.Wg) return -1;
    return (brow + gy) * p.Wg + gx;
  }
  // Row of token t (t < n), or -1 for a padding cell.
  __device__ long long win_row(const KParams& p, int t) const {
    const int ty = fdiv(t, p.ws, p.inv_ws), tx = t - ty * p.ws;
    return cell_row(p, ty, tx);
  }
  __device__ long long qrow(const KParams& p, int t) const { return p.ws == 0 ? q0 + t : win_row(p, t); }
  __device__ long long qsrc(const KParams& p, int t) const { return p.ws == 0 ? qs0 + t : win_row(p, t); }
  __device__ long long krow(const KParams& p, int t) const { return p.ws == 0 ? k0 + t : win_row(p, t); }
  // The same with the addressing mode known at compile time (the tensor-core kernel is
  // instantiated per mode, so dense sequences carry none of the window arithmetic).
  template <bool WIN>
  __device__ long long qrow_as(const KParams& p, int t) const {
    if constexpr (WIN) return win_row(p, t);
    else return q0 + t;
  }
  template <bool WIN>
  __device__ long long qsrc_as(const KParams& p, int t) const {
    if constexpr (WIN) return win_row(p, t);
    else return qs0 + t;
  }
  template <bool WIN>
  __device__ long long krow_as(const KParams& p, int t) const {
    if constexpr (WIN) return win_row(p, t);
    else return k0 + t;
  }
};

// Offset (elements) of 16-byte chunk c of row r in the wgmma kernels' no-swizzle core-matrix
// layout of a tile with CPR chunks per row: [r/8][c][r%8][8 elements] (8 rows x 16 bytes contiguous).
template <int CPR>
__device__ __forceinline__ int core_matrix_offset(int r, int c) {
  return ((r >> 3) * CPR + c) * 64 + (r & 7) * 8;
}


__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// f(integral_constant<int, I>) for I = 0, 1, ... in order (the key-chunk loops of the short and
// windowed kernels, with compile-time chunk indices).
template <int... I, class F>
__device__ __forceinline__ void static_for(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}
// Maximum / sum over the 4 lanes of a quad (the threads that share an accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
// op over t[0 .. N) as a balanced tree (N a power of two), in place; returns the result.
template <int N, class Op>
__device__ __forceinline__ float tree_reduce(float (&t)[N], Op op) {
  if constexpr (N > 1) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) t[i] = op(t[i], t[i + N / 2]);
    return tree_reduce<N / 2>(reinterpret_cast<float(&)[N / 2]>(t), op);
  } else {
    return t[0];
  }
}

// A warp's Q fragments for KS k16 steps (the m16n8k16 A layout) loaded from global memory into
// registers: r0 / r1 point at the thread's rows g and g + 8, already offset by 2 * tq elements.
template <int KS>
__device__ __forceinline__ void load_a_fragments(unsigned (&qf)[KS][4], const __nv_bfloat16* r0,
                                                 const __nv_bfloat16* r1) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    qf[ks][0] = __ldg(reinterpret_cast<const unsigned*>(r0 + ks * 16));
    qf[ks][1] = __ldg(reinterpret_cast<const unsigned*>(r1 + ks * 16));
    qf[ks][2] = __ldg(reinterpret_cast<const unsigned*>(r0 + ks * 16 + 8));
    qf[ks][3] = __ldg(reinterpret_cast<const unsigned*>(r1 + ks * 16 + 8));
  }
}

// An optimisation barrier for scalars (wgmma::fence_operands for arrays): values pinned before a
// wgmma wait are computed before it (ptxas would otherwise hoist the wait above their computation).
__device__ __forceinline__ void pin1(float& x) { asm volatile("" : "+f"(x)::"memory"); }
template <class... T>
__device__ __forceinline__ void pin(T&... x) {
  (pin1(x), ...);
}
// O *= the rows' softmax rescaling factors (al0: row g, al1: row g + 8 of the m16n8 accumulator
// layout, N = HD), skipped when the whole warp's are 1 (a warp-uniform branch; the wgmma kernels
// call it with no wgmma in flight, which ptxas would otherwise serialise).
template <int HD>
__device__ __forceinline__ void rescale_rows(float (&o)[HD / 2], float al0, float al1) {
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) {
    o[d * 4 + 0] *= al0;
    o[d * 4 + 1] *= al0;
    o[d * 4 + 2] *= al1;
    o[d * 4 + 3] *= al1;
  }
}
template <int HD>
__device__ __forceinline__ void rescale_rows_if_needed(float (&o)[HD / 2], float al0, float al1) {
  if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) rescale_rows<HD>(o, al0, al1);
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<unsigned*>(&v);
}
// Pass `pass` (rows g, or g + 8) of a warp's 16 x 64 output O (head dim 64, the accumulator layout),
// times inv (the row's 1 / l), as whole 128-byte lines (rows_to_lines): lanes 8 k .. 8 k + 7 then
// hold row 2 k of the pass's 8 in a and row 2 k + 1 in b, chunk lane % 8 each. Every lane must call it.
__device__ __forceinline__ void output_pass_as_lines(const float (&o)[32], int pass, float inv, int lane,
                                                     unsigned (&a)[4], unsigned (&b)[4]) {
  unsigned v[8];
#pragma unroll
  for (int d = 0; d < 8; ++d) v[d] = pack_bf16(o[d * 4 + 2 * pass] * inv, o[d * 4 + 2 * pass + 1] * inv);
  rows_to_lines(v, lane, a, b);
}

// The device's opt-in limit of dynamic shared memory per CTA (bytes).
inline int max_optin_smem() {
  int dev = 0, v = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  return v;
}

// Raises an attention kernel's dynamic shared-memory limit when needed (once per size increase;
// `configured` is the kernel's own high-water mark).
template <class Kernel>
void ensure_smem(Kernel kernel, size_t bytes, std::atomic<int>& configured, const char* name) {
  if (bytes <= 48 * 1024 || static_cast<int>(bytes) <= configured.load()) return;
  const int limit = max_optin_smem();
  VITRT_CHECK(bytes <= static_cast<size_t>(limit), InvalidArgument, "cuda attention (", name, "): needs ", bytes,
              " bytes of shared memory, the device allows ", limit, " (rel-pos grid too large)");
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "cudaFuncSetAttribute(attention smem)");
  int cur = configured.load();
  while (static_cast<int>(bytes) > cur && !configured.compare_exchange_weak(cur, static_cast<int>(bytes))) {
  }
}

// The rel-pos prologue of the tensor-core kernels (attention.cu's mma.sync kernel and the wgmma
// kernel): G = Q T^T over all 2H-1 + 2W-1 table rows on the tensor cores (mma.sync, hi + lo BF16
// parts for tables that were F32), scattered into shared-memory bias buffers laid out like the
// score accumulators, for m16 row group rg, lane (g, tq), h = 0 / 1 for rows g / g + 8:
//   BH[kh*SH + rg*16 + g*2 + h] = rel_h[row rg*16 + h*8 + g][kh] * log2e
//   BW[(kw/2)*SW + rg*32 + g*4 + h*2 + (kw&1)] = rel_w[row rg*16 + h*8 + g][kw] / scale
// (see attention.cu for how the kernels read them). Warps with rows (has_rows) own MT m16 tiles,
// row groups rg = warp*MT + mt, query rows m0 + rg*16 + ...; rows past nq use grid position 0
// (finite, unused). The tables stream through `tables` in passes of `chunk` rows of HD + 8
// elements (+ `chunk` more rows for the lo parts). load_qf() fills qf from the Q staging once the
// first pass has landed (so the Q tile's cp.async group must be committed before the call); BH / BW
// may alias the Q staging, as every warp holds its fragments before the first scatter. Every
// thread of the CTA (THREADS) calls it; it ends with a __syncthreads (`tables` is free again).
template <int HD, int MT, int THREADS, class LoadQf>
__device__ __forceinline__ void relpos_prologue(const KParams& p, int m0, bool has_rows, __nv_bfloat16* tables,
                                                int chunk, float* BWs, float* BHs, int SW, int SH,
                                                unsigned (&qf)[MT][HD / 16][4], LoadQf&& load_qf) {
  using bf16 = __nv_bfloat16;
  constexpr int LDS = HD + 8, CPR = HD / 8, KS = HD / 16;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int relH = p.relH, relW = p.relW;
  const int Lh = 2 * relH - 1, Lw = 2 * relW - 1, Lt = Lh + Lw;
  const bool lo = p.th_lo != nullptr;
  const float inv_scale = 1.f / p.scale;
  const bf16* th = static_cast<const bf16*>(p.th);
  const bf16* tw = static_cast<const bf16*>(p.tw);
  const bf16* thl = static_cast<const bf16*>(p.th_lo);
  const bf16* twl = static_cast<const bf16*>(p.tw_lo);
  // Grid positions of this thread's query rows (mt, hh): local row (warp*MT + mt)*16 + hh*8 + g.
  int qih[MT][2], qiw[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = m0 + (warp * MT + mt) * 16 + hh * 8 + g;
      const int ii = i < p.nq ? i : 0;
      qih[mt][hh] = fdiv(ii, relW, p.inv_relW);
      qiw[mt][hh] = ii - qih[mt][hh] * relW;
    }
  // One G value into BH or BW: a single predicated store (no divergent branches), as most (t, row)
  // pairs fall outside the grid and are dropped.
  auto put = [&](int rg, int hh, int ih, int iw, int t, float val) {
    const bool is_h = t < Lh;
    const int kk = is_h ? ih + relH - 1 - t : iw + relW - 1 - (t - Lh);
    const bool keep = t < Lt && static_cast<unsigned>(kk) < static_cast<unsigned>(is_h ? relH : relW);
    float* dst = is_h ? BHs + kk * SH + rg * 16 + g * 2 + hh : BWs + (kk >> 1) * SW + rg * 32 + g * 4 + hh * 2 + (kk & 1);
    if (keep) *dst = val * (is_h ? kLog2e : inv_scale);
  };
  for (int c0 = 0; c0 < Lt; c0 += chunk) {
    const int n = min(chunk, Lt - c0), n16 = (n + 15) & ~15;
    if (c0 > 0) __syncthreads();  // previous chunk fully consumed
    for (int i = tid; i < n16 * CPR; i += THREADS) {
      const int r = i / CPR, c = i - r * CPR, t = c0 + r;
      const bf16 *src = th, *srcl = thl;
      int bytes = 0;
      if (t < Lt) {
        if (t < Lh) {
          src = th + static_cast<long long>(t) * HD + c * 8;
          if (lo) srcl = thl + static_cast<long long>(t) * HD + c * 8;
        } else {
          src = tw + static_cast<long long>(t - Lh) * HD + c * 8;
          if (lo) srcl = twl + static_cast<long long>(t - Lh) * HD + c * 8;
        }
        bytes = 16;
      }
      ptx::cp_async16(tables + r * LDS + c * 8, src, bytes);
      if (lo) ptx::cp_async16(tables + (chunk + r) * LDS + c * 8, srcl, bytes);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    __syncthreads();
    if (c0 == 0) {
      if (has_rows) load_qf();
      __syncthreads();  // every warp holds its Q fragments: BH / BW may overwrite the Q staging
    }
    if (!has_rows) continue;
    // PU 16-row passes at a time (2 for one m-tile per warp; MT = 2 has enough chains and not the
    // registers), hi and lo parts in separate accumulators: 4 * MT * PU / 2 independent mma chains of
    // KS steps each (one chain of 2 * KS dependent mma's stalled on the tensor pipe's latency).
    constexpr int PU = MT == 1 ? 2 : 1;
    constexpr int PL = MT == 1 ? 1 : 0;  // separate lo accumulators (MT = 2: into acc, as registers go)
    const int npass = n16 / 16;
    for (int pr0 = 0; pr0 < npass; pr0 += PU) {
      float acc[PU][MT][2][4], accl[PU * PL + 1 - PL][MT][2][4];
#pragma unroll
      for (int u = 0; u < PU; ++u)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[u][mt][0][e] = acc[u][mt][1][e] = 0.f;
            if constexpr (PL) accl[u][mt][0][e] = accl[u][mt][1][e] = 0.f;
          }
      const bool two = PU == 2 && pr0 + 1 < npass;  // warp-uniform
      const int bcol = ((lane >> 3) & 1) << 3;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
        for (int u = 0; u < PU; ++u) {
          if (u == 1 && !two) break;
          const int brow = (pr0 + u) * 16 + (lane & 7) + ((lane >> 4) << 3);
          unsigned b0, b1, b2, b3;
          ptx::ldsm_x4(b0, b1, b2, b3, tables + brow * LDS + ks * 16 + bcol);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            ptx::mma_bf16(acc[u][mt][0], qf[mt][ks], b0, b1);
            ptx::mma_bf16(acc[u][mt][1], qf[mt][ks], b2, b3);
          }
          if (lo) {
            ptx::ldsm_x4(b0, b1, b2, b3, tables + (chunk + brow) * LDS + ks * 16 + bcol);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              float(&dst)[2][4] = PL ? accl[PL ? u : 0][mt] : acc[u][mt];
              ptx::mma_bf16(dst[0], qf[mt][ks], b0, b1);
              ptx::mma_bf16(dst[1], qf[mt][ks], b2, b3);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < PU; ++u) {
        if (u == 1 && !two) break;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int t = c0 + (pr0 + u) * 16 + hf * 8 + 2 * tq + e;
              const float lo0 = PL ? accl[PL ? u : 0][mt][hf][e] : 0.f, lo1 = PL ? accl[PL ? u : 0][mt][hf][2 + e] : 0.f;
              put(warp * MT + mt, 0, qih[mt][0], qiw[mt][0], t, acc[u][mt][hf][e] + lo0);
              put(warp * MT + mt, 1, qih[mt][1], qiw[mt][1], t, acc[u][mt][hf][2 + e] + lo1);
            }
      }
    }
  }
  __syncthreads();  // BH / BW complete; `tables` is free
}

// The Hopper kernel (attention_wgmma.cu): global attention with decomposed rel-pos on an
// rel_H x 64 grid, head_dim 64 or 80, BF16, dense sequences (no window, no q sharing).
// wgmma_relpos_plan: the variant (VITRT_ATTN_WGMMA), its dynamic shared memory and query rows per
// CTA for `p`, or a plan with smem == 0 when the kernel does not cover it (then the mma.sync kernel
// runs). wgmma_relpos_launch: one launch of p.num_qtiles * heads * seqs CTAs (num_qtiles from bm).
// (Keys64: two consumer warpgroups; Keys64Wg3: three at head dim 64, two at 80, the default.)
enum class WgmmaVariant { Off, Keys64, Keys64Wg3 };
struct WgmmaPlan {
  WgmmaVariant variant = WgmmaVariant::Off;
  size_t smem = 0;
  int bm = 0;
};
WgmmaPlan wgmma_relpos_plan(const KParams& p, int optin_smem_limit);
void wgmma_relpos_launch(const WgmmaPlan& plan, const KParams& p, int blocks, cudaStream_t stream);
// Whether VITRT_ATTN_WGMMA=0 turns the wgmma kernels off (read once per process). (They run on
// compute capability 9.0 only: cuda::device_is_sm90, runtime.h.)
bool wgmma_off_by_env();

// The Hopper kernel for 14 x 14 windows (attention_wgmma_windowed.cu): windowed sequences (or dense
// ones of a 14 x 14 grid) with rel-pos, head_dim 64 or 80, BF16.
// wgmma_windowed_smem: its dynamic shared memory for `p`, or 0 when it does not cover `p` (also
// when VITRT_ATTN_WGMMA_WINDOWS=0, for A/B runs); wgmma_windowed_launch: `items` = num_seq * heads
// (sequence, head) items, walked by one persistent CTA per SM.
size_t wgmma_windowed_smem(const KParams& p, int optin_smem_limit);
void wgmma_windowed_launch(const KParams& p, size_t smem, int items, cudaStream_t stream);

// The Hopper kernel for short dense sequences without rel-pos (attention_wgmma_short.cu: the ViT
// classifier's 197 / 257 tokens), head_dim 64 or 80, BF16. wgmma_short_smem: its dynamic shared
// memory for `p`, or 0 when it does not cover `p` (also when VITRT_ATTN_WGMMA_SHORT=0 or
// VITRT_ATTN_WGMMA=0); wgmma_short_launch: one CTA per (sequence, head), `blocks` = num_seq * heads.
size_t wgmma_short_smem(const KParams& p, int optin_smem_limit);
void wgmma_short_launch(const KParams& p, int blocks, cudaStream_t stream);

// The few-keys kernel (attention_few_keys.cu): dense attention without rel-pos against at most
// kFewKeysMax keys per sequence, head_dim 16 or 32 (SAM's decoder: 4096 image tokens per prompt
// attending to its ~7 tokens), F32 or BF16. few_keys_supported: whether it covers `p`
// (alignment, sizes); few_keys_launch: num_seq sequences.
constexpr int kFewKeysMax = 16;
bool few_keys_supported(const KParams& p, bool bf16, long long num_seq);
void few_keys_launch(const KParams& p, bool bf16, int num_seq, cudaStream_t stream);

}  // namespace vitrt::cuda::attn
