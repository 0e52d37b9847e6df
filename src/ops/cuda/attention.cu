// Fused attention kernels (see attention.h).
//
// Tensor-core kernel (flash_mma_kernel<HD, REL>), FlashAttention-2 style:
//  - a CTA of 4 warps owns BM = 64 query rows of one (sequence, head); each warp 16 rows, whose
//    Q fragments stay in registers for the whole key loop;
//  - keys come in tiles of BN = 64 through a two-stage cp.async pipeline (K and V tiles in shared
//    memory, rows padded by 16 bytes so ldmatrix is conflict-free); out-of-range rows are
//    zero-filled, out-of-range keys masked to -inf, and 16-key chunks wholly past the end skipped;
//  - S = Q K^T and O += P V with mma.sync m16n8k16 (bf16 in, fp32 accumulate); online softmax in
//    the log2 domain, per-thread partial row sums reduced across the quad at the end;
//  - decomposed rel-pos (REL): in a prologue every warp multiplies its Q rows with all 2H-1 + 2W-1
//    table rows on the tensor cores (G = Q T^T, tables streamed through the K/V buffers, hi + lo
//    BF16 parts for F32 tables) and scatters G[i, ih - kh + H - 1] -> bias[i][kh] and
//    G[i, Lh + iw - kw + W - 1] -> bias[i][H + kw] into an fp32 [BM][H + W] shared buffer
//    (times log2 e). The N x N bias is never formed: the score tile adds bias[i][kh(j)] +
//    bias[i][H + kw(j)] with (kh, H + kw) of each key from a per-tile coordinate table;
//  - output staged through shared memory, written as 16-byte rows; window padding rows skipped.
// CUDA-core kernel (simt_kernel<T, HDMAX, REL>): same online-softmax structure in fp32 with
// 32 x 32 tiles in shared memory; used for F32 and for BF16 shapes the tensor-core kernel does
// not cover. Accurate expf, fp32 everywhere.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "ops/cuda/attention.h"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;

// Kernel parameters (by value).
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
};

// Exact t / d for 0 <= t < 2^22, d >= 1, from a float reciprocal plus one correction step.
__device__ __forceinline__ int fdiv(int t, int d, float inv_d) {
  int q = __float2int_rz((static_cast<float>(t) + 0.5f) * inv_d);
  const int r = t - q * d;
  if (r < 0) --q;
  else if (r >= d) ++q;
  return q;
}

// Row addressing of one sequence (see AttentionArgs).
struct SeqAddr {
  long long q0 = 0, k0 = 0;  // dense: first q / k row of the sequence
  long long brow = 0;        // windowed: b * Hg
  int gy0 = 0, gx0 = 0;      // windowed: first grid cell of the window

  __device__ void init(const KParams& p, int s) {
    if (p.ws == 0) {
      q0 = static_cast<long long>(s) * p.nq;
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
  // Row of token t (t < n), or -1 for a padding cell.
  __device__ long long win_row(const KParams& p, int t) const {
    const int ty = fdiv(t, p.ws, p.inv_ws), tx = t - ty * p.ws;
    const int gy = gy0 + ty, gx = gx0 + tx;
    if (gy >= p.Hg || gx >= p.Wg) return -1;
    return (brow + gy) * p.Wg + gx;
  }
  __device__ long long qrow(const KParams& p, int t) const { return p.ws == 0 ? q0 + t : win_row(p, t); }
  __device__ long long krow(const KParams& p, int t) const { return p.ws == 0 ? k0 + t : win_row(p, t); }
};

// ---------------------------------------------------------------------------------------------
// PTX helpers (sm_80+)

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 16-byte async copy; src_bytes == 0 zero-fills the destination (src is not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
// d += a * b, m16n8k16, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<unsigned*>(&v);
}

// ---------------------------------------------------------------------------------------------
// Tensor-core flash kernel

constexpr int kBM = 64, kBN = 64, kThreads = 128;

template <int HD>
struct MmaCfg {
  static_assert(HD % 16 == 0, "head_dim must be a multiple of 16");
  static constexpr int LDS = HD + 8;  // smem row stride (elements): +16 bytes, ldmatrix conflict-free
  static constexpr int CPR = HD / 8;  // 16-byte chunks per row
  static constexpr int KS = HD / 16;  // k-steps of Q K^T; also pairs of n8 tiles of P V
  static constexpr int ND = HD / 8;   // n8 tiles of O
  static constexpr int q_elems = kBM * LDS;
  static constexpr int kv_elems = 4 * kBN * LDS;  // 2 stages x (K, V); also the table buffer (4 * kBN rows)
};

// Bytes of dynamic shared memory of flash_mma_kernel<HD, REL> for a relH x relW grid.
template <int HD>
size_t mma_smem_bytes(bool rel, int relH, int relW) {
  using C = MmaCfg<HD>;
  size_t b = static_cast<size_t>(C::q_elems + C::kv_elems) * sizeof(bf16);
  if (rel) b += 2 * kBN * sizeof(int) + static_cast<size_t>(kBM) * ((relH + relW) | 1) * sizeof(float);
  return b;
}

template <int HD, bool REL>
__global__ void __launch_bounds__(kThreads) flash_mma_kernel(const KParams p) {
  using C = MmaCfg<HD>;
  constexpr int LDS = C::LDS, CPR = C::CPR, KS = C::KS, ND = C::ND;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* KV = Qs + C::q_elems;
  int* coords = reinterpret_cast<int*>(KV + C::kv_elems);  // REL: [2][kBN]
  float* bias_s = reinterpret_cast<float*>(coords + 2 * kBN);  // REL: [kBM][BST]
  const int BST = (p.relH + p.relW) | 1;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  const int tile = blockIdx.x % p.num_qtiles;
  const int sh = blockIdx.x / p.num_qtiles;
  const int h = sh % p.heads, s = sh / p.heads;
  const int m0 = tile * kBM;
  SeqAddr sa;
  sa.init(p, s);

  const bf16* qb = static_cast<const bf16*>(p.q) + h * HD;
  const bf16* kb = static_cast<const bf16*>(p.k) + h * HD;
  const bf16* vb = static_cast<const bf16*>(p.v) + h * HD;
  const bf16* pq = p.pad_q ? static_cast<const bf16*>(p.pad_q) + h * HD : qb;
  const bf16* pk = p.pad_k ? static_cast<const bf16*>(p.pad_k) + h * HD : kb;
  const bf16* pv = p.pad_v ? static_cast<const bf16*>(p.pad_v) + h * HD : vb;

  // ---- Q tile -> Qs (rows past nq zero-filled)
  for (int i = tid; i < kBM * CPR; i += kThreads) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + r;
    const bf16* src = qb;
    int bytes = 0;
    if (t < p.nq) {
      const long long row = sa.qrow(p, t);
      src = (row >= 0 ? qb + row * p.ldq : pq) + c * 8;
      bytes = 16;
    }
    cp_async16(Qs + r * LDS + c * 8, src, bytes);
  }
  cp_async_commit();

  auto issue_kv = [&](int kt, int stage) {
    bf16* Ks = KV + stage * 2 * kBN * LDS;
    bf16* Vs = Ks + kBN * LDS;
    const int n0 = kt * kBN;
    for (int i = tid; i < kBN * CPR; i += kThreads) {
      const int r = i / CPR, c = i - r * CPR, t = n0 + r;
      const bf16 *ks = kb, *vs = vb;
      int bytes = 0;
      if (t < p.nk) {
        const long long row = sa.krow(p, t);
        if (row >= 0) {
          ks = kb + row * p.ldk + c * 8;
          vs = vb + row * p.ldv + c * 8;
        } else {
          ks = pk + c * 8;
          vs = pv + c * 8;
        }
        bytes = 16;
      }
      cp_async16(Ks + r * LDS + c * 8, ks, bytes);
      cp_async16(Vs + r * LDS + c * 8, vs, bytes);
    }
    if constexpr (REL) {
      if (tid < kBN) {
        const int j = n0 + tid;
        int cd = 0;
        if (j < p.nk) {
          const int kh = fdiv(j, p.relW, p.inv_relW), kw = j - kh * p.relW;
          cd = kh | ((p.relH + kw) << 16);
        }
        coords[stage * kBN + tid] = cd;
      }
    }
  };

  unsigned qf[KS][4];
  auto load_qf = [&]() {
    const int row = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
    const int col = (lane >> 4) << 3;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) ldsm_x4(qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], Qs + row * LDS + ks * 16 + col);
  };

  // ---- rel-pos prologue: bias_s[r][kh] = log2e * q_r . Rh[ih - kh + H - 1],
  //                        bias_s[r][H + kw] = log2e * q_r . Rw[iw - kw + W - 1].
  if constexpr (REL) {
    const int relH = p.relH, relW = p.relW;
    const int Lh = 2 * relH - 1, Lw = 2 * relW - 1, Lt = Lh + Lw;
    const bool lo = p.th_lo != nullptr;
    const int chunk = lo ? 2 * kBN : 4 * kBN;  // table rows per pass (hi, + lo behind them)
    const bf16* th = static_cast<const bf16*>(p.th);
    const bf16* tw = static_cast<const bf16*>(p.tw);
    const bf16* thl = static_cast<const bf16*>(p.th_lo);
    const bf16* twl = static_cast<const bf16*>(p.tw_lo);
    // Grid position of this thread's two query rows (rows past nq use position 0: finite, unused).
    const int r0 = warp * 16 + g, r1 = r0 + 8;
    const int i0 = m0 + r0 < p.nq ? m0 + r0 : 0, i1 = m0 + r1 < p.nq ? m0 + r1 : 0;
    const int ih0 = fdiv(i0, relW, p.inv_relW), iw0 = i0 - ih0 * relW;
    const int ih1 = fdiv(i1, relW, p.inv_relW), iw1 = i1 - ih1 * relW;
    auto put = [&](int r, int ih, int iw, int t, float val) {
      if (t < Lh) {
        const int kh = ih + relH - 1 - t;
        if (kh >= 0 && kh < relH) bias_s[r * BST + kh] = val * kLog2e;
      } else if (t < Lt) {
        const int kw = iw + relW - 1 - (t - Lh);
        if (kw >= 0 && kw < relW) bias_s[r * BST + relH + kw] = val * kLog2e;
      }
    };
    for (int c0 = 0; c0 < Lt; c0 += chunk) {
      const int n = min(chunk, Lt - c0), n16 = (n + 15) & ~15;
      if (c0 > 0) __syncthreads();  // previous chunk fully consumed
      for (int i = tid; i < n16 * CPR; i += kThreads) {
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
        cp_async16(KV + r * LDS + c * 8, src, bytes);
        if (lo) cp_async16(KV + (chunk + r) * LDS + c * 8, srcl, bytes);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      if (c0 == 0) load_qf();
      for (int pr = 0; pr < n16 / 16; ++pr) {
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        const int brow = pr * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int bcol = ((lane >> 3) & 1) << 3;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          unsigned b0, b1, b2, b3;
          ldsm_x4(b0, b1, b2, b3, KV + brow * LDS + ks * 16 + bcol);
          mma_bf16(acc[0], qf[ks], b0, b1);
          mma_bf16(acc[1], qf[ks], b2, b3);
          if (lo) {
            ldsm_x4(b0, b1, b2, b3, KV + (chunk + brow) * LDS + ks * 16 + bcol);
            mma_bf16(acc[0], qf[ks], b0, b1);
            mma_bf16(acc[1], qf[ks], b2, b3);
          }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int t = c0 + pr * 16 + hf * 8 + 2 * tq + e;
            put(r0, ih0, iw0, t, acc[hf][e]);
            put(r1, ih1, iw1, t, acc[hf][2 + e]);
          }
      }
    }
    __syncthreads();  // bias_s complete; table buffer free for K/V
  }

  const int nkt = (p.nk + kBN - 1) / kBN;
  if (nkt > 0) issue_kv(0, 0);
  cp_async_commit();
  if constexpr (!REL) {
    cp_async_wait<1>();  // the Q group
    __syncthreads();
    load_qf();
  }

  const bool active = m0 + warp * 16 < p.nq;  // warp has at least one real query row
  float o[ND][4];
#pragma unroll
  for (int d = 0; d < ND; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float mrow0 = -INFINITY, mrow1 = -INFINITY, lrow0 = 0.f, lrow1 = 0.f;
  const int r0 = warp * 16 + g, r1 = r0 + 8;

  for (int kt = 0; kt < nkt; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < nkt) {
      issue_kv(kt + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (active) {
      const bf16* Ks = KV + stage * 2 * kBN * LDS;
      const bf16* Vs = Ks + kBN * LDS;
      const int n0 = kt * kBN;
      const int kvalid = min(kBN, p.nk - n0);
      const int nch = (kvalid + 15) >> 4;  // 16-key chunks holding real keys

      float sc[8][4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[2 * c][e] = sc[2 * c + 1][e] = 0.f;
        if (c < nch) {
          const int krow = c * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int kcol = ((lane >> 3) & 1) << 3;
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3, Ks + krow * LDS + ks * 16 + kcol);
            mma_bf16(sc[2 * c], qf[ks], b0, b1);
            mma_bf16(sc[2 * c + 1], qf[ks], b2, b3);
          }
        }
      }

      // Scale, bias, mask; row maxima.
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt < 2 * nch) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int jl = nt * 8 + 2 * tq + e;
            float v0 = sc[nt][e] * p.scale_log2, v1 = sc[nt][2 + e] * p.scale_log2;
            if constexpr (REL) {
              const int cd = coords[stage * kBN + jl];
              const int ch = cd & 0xffff, cw = cd >> 16;
              v0 += bias_s[r0 * BST + ch] + bias_s[r0 * BST + cw];
              v1 += bias_s[r1 * BST + ch] + bias_s[r1 * BST + cw];
            }
            if (jl >= kvalid) v0 = v1 = -INFINITY;
            sc[nt][e] = v0;
            sc[nt][2 + e] = v1;
            mx0 = fmaxf(mx0, v0);
            mx1 = fmaxf(mx1, v1);
          }
        }
      }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float mn0 = fmaxf(mrow0, mx0), mn1 = fmaxf(mrow1, mx1);
      const float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
      const float al0 = ex2(mrow0 - mu0), al1 = ex2(mrow1 - mu1);
      mrow0 = mn0;
      mrow1 = mn1;
      lrow0 *= al0;
      lrow1 *= al1;
#pragma unroll
      for (int d = 0; d < ND; ++d) {
        o[d][0] *= al0;
        o[d][1] *= al0;
        o[d][2] *= al1;
        o[d][3] *= al1;
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt < 2 * nch) {
          sc[nt][0] = ex2(sc[nt][0] - mu0);
          sc[nt][1] = ex2(sc[nt][1] - mu0);
          sc[nt][2] = ex2(sc[nt][2] - mu1);
          sc[nt][3] = ex2(sc[nt][3] - mu1);
          lrow0 += sc[nt][0] + sc[nt][1];
          lrow1 += sc[nt][2] + sc[nt][3];
        }
      }

      // O += P V
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (c < nch) {
          const unsigned a[4] = {pack_bf16(sc[2 * c][0], sc[2 * c][1]), pack_bf16(sc[2 * c][2], sc[2 * c][3]),
                                 pack_bf16(sc[2 * c + 1][0], sc[2 * c + 1][1]),
                                 pack_bf16(sc[2 * c + 1][2], sc[2 * c + 1][3])};
          const int vrow = c * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
          const int vcol = (lane >> 4) << 3;
#pragma unroll
          for (int dp = 0; dp < KS; ++dp) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(b0, b1, b2, b3, Vs + vrow * LDS + dp * 16 + vcol);
            mma_bf16(o[2 * dp], a, b0, b1);
            mma_bf16(o[2 * dp + 1], a, b2, b3);
          }
        }
      }
    }
    __syncthreads();  // stage is refilled by the next iteration's prefetch
  }

  // ---- epilogue: normalise, stage this warp's 16 rows in Qs, write 16-byte chunks.
  if (!active) return;
  lrow0 += __shfl_xor_sync(0xffffffffu, lrow0, 1);
  lrow0 += __shfl_xor_sync(0xffffffffu, lrow0, 2);
  lrow1 += __shfl_xor_sync(0xffffffffu, lrow1, 1);
  lrow1 += __shfl_xor_sync(0xffffffffu, lrow1, 2);
  const float inv0 = lrow0 > 0.f ? 1.f / lrow0 : 0.f, inv1 = lrow1 > 0.f ? 1.f / lrow1 : 0.f;
#pragma unroll
  for (int d = 0; d < ND; ++d) {
    *reinterpret_cast<unsigned*>(Qs + r0 * LDS + d * 8 + 2 * tq) = pack_bf16(o[d][0] * inv0, o[d][1] * inv0);
    *reinterpret_cast<unsigned*>(Qs + r1 * LDS + d * 8 + 2 * tq) = pack_bf16(o[d][2] * inv1, o[d][3] * inv1);
  }
  __syncwarp();
  bf16* ob = static_cast<bf16*>(p.out) + h * HD;
  for (int i = lane; i < 16 * CPR; i += 32) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + warp * 16 + r;
    if (t < p.nq) {
      const long long row = sa.qrow(p, t);
      if (row >= 0)
        *reinterpret_cast<uint4*>(ob + row * p.ldo + c * 8) =
            *reinterpret_cast<const uint4*>(Qs + (warp * 16 + r) * LDS + c * 8);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CUDA-core kernel (fp32 compute), T = float or bf16 storage.

constexpr int sBM = 32, sBN = 32;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

template <int HDMAX>
size_t simt_smem_bytes(bool rel, int relH, int relW) {
  size_t f = static_cast<size_t>(sBM) * (HDMAX + 1) + static_cast<size_t>(sBN) * (HDMAX + 1) +
             static_cast<size_t>(sBN) * HDMAX + static_cast<size_t>(sBM) * (sBN + 1);
  if (rel) f += static_cast<size_t>(sBM) * ((relH + relW) | 1) + sBN;
  return f * sizeof(float);
}

template <class T, int HDMAX, bool REL>
__global__ void __launch_bounds__(kThreads) simt_kernel(const KParams p) {
  constexpr int QST = HDMAX + 1, J = HDMAX / 16, PST = sBN + 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* Qs = reinterpret_cast<float*>(smem_raw);
  float* Ks = Qs + sBM * QST;
  float* Vs = Ks + sBN * QST;
  float* Ps = Vs + sBN * HDMAX;
  float* bias_s = Ps + sBM * PST;
  const int BST = (p.relH + p.relW) | 1;
  int* coords = reinterpret_cast<int*>(bias_s + sBM * BST);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ty = tid >> 4, tx = tid & 15;  // rows ty*4 + i, keys tx + 16*j, O columns tx + 16*jj
  const int hd = p.hd;

  const int tile = blockIdx.x % p.num_qtiles;
  const int sh = blockIdx.x / p.num_qtiles;
  const int h = sh % p.heads, s = sh / p.heads;
  const int m0 = tile * sBM;
  SeqAddr sa;
  sa.init(p, s);

  const T* qb = static_cast<const T*>(p.q) + h * hd;
  const T* kb = static_cast<const T*>(p.k) + h * hd;
  const T* vb = static_cast<const T*>(p.v) + h * hd;
  const T* pq = p.pad_q ? static_cast<const T*>(p.pad_q) + h * hd : qb;
  const T* pk = p.pad_k ? static_cast<const T*>(p.pad_k) + h * hd : kb;
  const T* pv = p.pad_v ? static_cast<const T*>(p.pad_v) + h * hd : vb;

  // Q tile (zeros past nq)
  for (int r = warp; r < sBM; r += kThreads / 32) {
    const int t = m0 + r;
    const T* src = nullptr;
    if (t < p.nq) {
      const long long row = sa.qrow(p, t);
      src = row >= 0 ? qb + row * p.ldq : pq;
    }
    for (int c = lane; c < hd; c += 32) Qs[r * QST + c] = src ? to_f(src[c]) : 0.f;
  }
  __syncthreads();

  if constexpr (REL) {
    const int relH = p.relH, relW = p.relW, HW = relH + relW;
    const float* th = static_cast<const float*>(p.th);
    const float* tw = static_cast<const float*>(p.tw);
    for (int i = tid; i < sBM * HW; i += kThreads) {
      const int r = i / HW, u = i - r * HW, t = m0 + r;
      float acc = 0.f;
      if (t < p.nq) {
        const int ih = fdiv(t, relW, p.inv_relW), iw = t - ih * relW;
        const float* trow = u < relH ? th + static_cast<long long>(ih - u + relH - 1) * hd
                                     : tw + static_cast<long long>(iw - (u - relH) + relW - 1) * hd;
        const float* qr = Qs + r * QST;
        for (int d = 0; d < hd; ++d) acc = fmaf(qr[d], trow[d], acc);
      }
      bias_s[r * BST + u] = acc;
    }
    // (made visible by the first __syncthreads of the key loop)
  }

  float o[4][J];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jj = 0; jj < J; ++jj) o[i][jj] = 0.f;
  float mrow[4], lpart[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) mrow[i] = -INFINITY, lpart[i] = 0.f;

  const int nkt = (p.nk + sBN - 1) / sBN;
  for (int kt = 0; kt < nkt; ++kt) {
    const int n0 = kt * sBN;
    for (int r = warp; r < sBN; r += kThreads / 32) {
      const int t = n0 + r;
      const T *ks = nullptr, *vs = nullptr;
      if (t < p.nk) {
        const long long row = sa.krow(p, t);
        ks = row >= 0 ? kb + row * p.ldk : pk;
        vs = row >= 0 ? vb + row * p.ldv : pv;
      }
      for (int c = lane; c < hd; c += 32) {
        Ks[r * QST + c] = ks ? to_f(ks[c]) : 0.f;
        Vs[r * HDMAX + c] = vs ? to_f(vs[c]) : 0.f;
      }
    }
    if constexpr (REL) {
      if (tid < sBN) {
        const int j = n0 + tid;
        int cd = 0;
        if (j < p.nk) {
          const int kh = fdiv(j, p.relW, p.inv_relW), kw = j - kh * p.relW;
          cd = kh | ((p.relH + kw) << 16);
        }
        coords[tid] = cd;
      }
    }
    __syncthreads();

    float acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i][0] = acc[i][1] = 0.f;
    const float* q0 = Qs + (ty * 4) * QST;
    const float* k0 = Ks + tx * QST;
#pragma unroll 4
    for (int d = 0; d < hd; ++d) {
      const float a0 = q0[d], a1 = q0[QST + d], a2 = q0[2 * QST + d], a3 = q0[3 * QST + d];
      const float b0 = k0[d], b1 = k0[16 * QST + d];
      acc[0][0] = fmaf(a0, b0, acc[0][0]);
      acc[0][1] = fmaf(a0, b1, acc[0][1]);
      acc[1][0] = fmaf(a1, b0, acc[1][0]);
      acc[1][1] = fmaf(a1, b1, acc[1][1]);
      acc[2][0] = fmaf(a2, b0, acc[2][0]);
      acc[2][1] = fmaf(a2, b1, acc[2][1]);
      acc[3][0] = fmaf(a3, b0, acc[3][0]);
      acc[3][1] = fmaf(a3, b1, acc[3][1]);
    }
    float alpha[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty * 4 + i;
      float v[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int c = tx + 16 * j;
        // As the reference: (q * scale) . k, then + rel_h + rel_w.
        float x = acc[i][j] * p.scale;
        if constexpr (REL) {
          const int cd = coords[c];
          x = x + bias_s[r * BST + (cd & 0xffff)] + bias_s[r * BST + (cd >> 16)];
        }
        v[j] = n0 + c < p.nk ? x : -INFINITY;
      }
      float mx = fmaxf(v[0], v[1]);
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(mrow[i], mx);
      const float mu = mn == -INFINITY ? 0.f : mn;
      alpha[i] = expf(mrow[i] - mu);
      mrow[i] = mn;
      const float p0 = expf(v[0] - mu), p1 = expf(v[1] - mu);
      lpart[i] = lpart[i] * alpha[i] + (p0 + p1);
      Ps[r * PST + tx] = p0;
      Ps[r * PST + tx + 16] = p1;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < J; ++jj) o[i][jj] *= alpha[i];
    __syncthreads();

    const int cmax = min(sBN, p.nk - n0);
    const float* p0r = Ps + (ty * 4) * PST;
    for (int c = 0; c < cmax; ++c) {
      const float a0 = p0r[c], a1 = p0r[PST + c], a2 = p0r[2 * PST + c], a3 = p0r[3 * PST + c];
      const float* vr = Vs + c * HDMAX + tx;
#pragma unroll
      for (int jj = 0; jj < J; ++jj) {
        const float b = vr[16 * jj];
        o[0][jj] = fmaf(a0, b, o[0][jj]);
        o[1][jj] = fmaf(a1, b, o[1][jj]);
        o[2][jj] = fmaf(a2, b, o[2][jj]);
        o[3][jj] = fmaf(a3, b, o[3][jj]);
      }
    }
    __syncthreads();
  }

  T* ob = static_cast<T*>(p.out) + h * hd;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float l = lpart[i];
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int t = m0 + ty * 4 + i;
    if (t >= p.nq) continue;
    const long long row = sa.qrow(p, t);
    if (row < 0) continue;
    T* orow = ob + row * p.ldo;
#pragma unroll
    for (int jj = 0; jj < J; ++jj) {
      const int c = tx + 16 * jj;
      if (c < hd) orow[c] = from_f<T>(o[i][jj] * inv);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Small helper kernels

template <class Tin>
__global__ void rel_table_kernel(const Tin* src, int rows, int want, int hd, float* out_f32, bf16* out_hi,
                                 bf16* out_lo) {
  const long long n = static_cast<long long>(want) * hd;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(idx / hd), c = static_cast<int>(idx - static_cast<long long>(d) * hd);
    float v;
    if (rows == want) {
      v = to_f(src[idx]);
    } else {
      // PyTorch linear interpolation, align_corners=False (as cpu::interpolate_linear_rows).
      const float scale = static_cast<float>(rows) / static_cast<float>(want);
      float sidx = __fmul_rn(scale, static_cast<float>(d) + 0.5f) - 0.5f;
      if (sidx < 0.f) sidx = 0.f;
      const int i0 = static_cast<int>(sidx);
      const int i1 = i0 + (i0 < rows - 1 ? 1 : 0);
      const float w1 = fminf(fmaxf(sidx - static_cast<float>(i0), 0.f), 1.f), w0 = 1.f - w1;
      const float a = to_f(src[static_cast<long long>(i0) * hd + c]);
      const float b = to_f(src[static_cast<long long>(i1) * hd + c]);
      v = __fmaf_rn(w0, a, __fmul_rn(w1, b));
    }
    if (out_f32) {
      out_f32[idx] = v;
    } else {
      const bf16 hi = __float2bfloat16_rn(v);
      out_hi[idx] = hi;
      if (out_lo) out_lo[idx] = __float2bfloat16_rn(v - __bfloat162float(hi));
    }
  }
}

template <class Tin, class Tout>
__global__ void convert_kernel(const Tin* src, Tout* dst, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dst[i] = from_f<Tout>(to_f(src[i]));
}

int grid_for(long long n) { return static_cast<int>(std::min<long long>((n + 255) / 256, 4096)); }

// ---------------------------------------------------------------------------------------------
// Launch plumbing

int max_optin_smem() {
  int dev = 0, v = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  return v;
}

// Raises the kernel's dynamic shared-memory limit when needed (once per size increase).
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

template <int HD, bool REL>
void launch_mma(const KParams& p, int blocks, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  const size_t smem = mma_smem_bytes<HD>(REL, p.relH, p.relW);
  ensure_smem(flash_mma_kernel<HD, REL>, smem, configured, "bf16 tensor-core");
  flash_mma_kernel<HD, REL><<<blocks, kThreads, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_mma_kernel launch");
}

template <class T, int HDMAX, bool REL>
void launch_simt(const KParams& p, int blocks, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  const size_t smem = simt_smem_bytes<HDMAX>(REL, p.relH, p.relW);
  ensure_smem(simt_kernel<T, HDMAX, REL>, smem, configured, "cuda-core");
  simt_kernel<T, HDMAX, REL><<<blocks, kThreads, smem, stream>>>(p);
  check(cudaGetLastError(), "attention simt_kernel launch");
}

template <class T, bool REL>
void dispatch_simt(const KParams& p, int blocks, cudaStream_t stream) {
  if (p.hd <= 32) launch_simt<T, 32, REL>(p, blocks, stream);
  else if (p.hd <= 64) launch_simt<T, 64, REL>(p, blocks, stream);
  else if (p.hd <= 128) launch_simt<T, 128, REL>(p, blocks, stream);
  else launch_simt<T, 256, REL>(p, blocks, stream);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool attention_uses_tensor_cores(const AttentionArgs& a) {
  if (!a.bf16) return false;
  const bool rel = a.rel_h != nullptr;
  const int hd = a.head_dim;
  const bool hd_ok = hd == 64 || hd == 80 || hd == 128 || (!rel && (hd == 16 || hd == 32));
  if (!hd_ok) return false;
  if (a.ldq % 8 || a.ldk % 8 || a.ldv % 8 || a.ldo % 8) return false;
  for (const void* ptr : std::initializer_list<const void*>{a.q, a.k, a.v, a.out})
    if (!aligned16(ptr)) return false;
  if (a.window > 0)
    for (const void* ptr : std::initializer_list<const void*>{a.pad_q, a.pad_k, a.pad_v})
      if (!aligned16(ptr)) return false;
  return true;
}

void attention_launch(const AttentionArgs& a, cudaStream_t stream) {
  const bool rel = a.rel_h != nullptr;
  VITRT_CHECK(a.heads >= 1 && a.head_dim >= 1 && a.nq >= 0 && a.nk >= 0 && a.num_seq >= 0, InvalidArgument,
              "cuda attention: bad sizes");
  VITRT_CHECK(a.head_dim <= 256, InvalidArgument, "cuda attention: head_dim ", a.head_dim, " > 256 is not supported");
  VITRT_CHECK(a.nq < (1 << 22) && a.nk < (1 << 22), InvalidArgument, "cuda attention: sequence too long");
  VITRT_CHECK((a.rel_w != nullptr) == rel, InvalidArgument, "cuda attention: rel_h and rel_w go together");
  if (rel)
    VITRT_CHECK(a.rel_H >= 1 && a.rel_W >= 1 && a.nq == a.rel_H * a.rel_W && a.nk == a.nq && a.rel_H + a.rel_W < 32768,
                InvalidArgument, "cuda attention: rel-pos grid ", a.rel_H, "x", a.rel_W, " does not match ", a.nq,
                " queries / ", a.nk, " keys");
  KParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.ldq = a.ldq;
  p.ldk = a.ldk;
  p.ldv = a.ldv;
  p.ldo = a.ldo;
  p.heads = a.heads;
  p.hd = a.head_dim;
  p.nq = static_cast<int>(a.nq);
  p.nk = static_cast<int>(a.nk);
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  if (rel) {
    p.th = a.rel_h;
    p.tw = a.rel_w;
    p.th_lo = a.rel_h_lo && a.rel_w_lo ? a.rel_h_lo : nullptr;
    p.tw_lo = a.rel_h_lo && a.rel_w_lo ? a.rel_w_lo : nullptr;
    p.relH = static_cast<int>(a.rel_H);
    p.relW = static_cast<int>(a.rel_W);
    p.inv_relW = 1.f / static_cast<float>(a.rel_W);
  }
  if (a.window > 0) {
    VITRT_CHECK(a.nq == a.window * a.window && a.nk == a.nq && a.grid_H >= 1 && a.grid_W >= 1 && a.pad_q &&
                    a.pad_k && a.pad_v,
                InvalidArgument, "cuda attention: bad windowed arguments");
    p.ws = static_cast<int>(a.window);
    p.Hg = static_cast<int>(a.grid_H);
    p.Wg = static_cast<int>(a.grid_W);
    p.nwy = static_cast<int>((a.grid_H + a.window - 1) / a.window);
    p.nwx = static_cast<int>((a.grid_W + a.window - 1) / a.window);
    p.inv_ws = 1.f / static_cast<float>(a.window);
    p.pad_q = a.pad_q;
    p.pad_k = a.pad_k;
    p.pad_v = a.pad_v;
    VITRT_CHECK(a.num_seq % (static_cast<int64_t>(p.nwy) * p.nwx) == 0,
                InvalidArgument, "cuda attention: num_seq ", a.num_seq, " is not a whole number of images");
  }
  if (a.num_seq == 0 || a.nq == 0) return;
  const bool tc = attention_uses_tensor_cores(a);
  if (tc && rel)
    for (const void* ptr : std::initializer_list<const void*>{p.th, p.tw, p.th_lo, p.tw_lo})
      VITRT_CHECK(aligned16(ptr), InvalidArgument, "cuda attention: rel-pos tables must be 16-byte aligned");
  const int bm = tc ? kBM : sBM;
  p.num_qtiles = static_cast<int>((a.nq + bm - 1) / bm);
  const long long blocks = static_cast<long long>(p.num_qtiles) * a.heads * a.num_seq;
  VITRT_CHECK(blocks <= INT_MAX, InvalidArgument, "cuda attention: problem too large (", blocks, " blocks)");
  const int nb = static_cast<int>(blocks);
  if (tc) {
    if (rel) {
      switch (a.head_dim) {
        case 64: launch_mma<64, true>(p, nb, stream); return;
        case 80: launch_mma<80, true>(p, nb, stream); return;
        case 128: launch_mma<128, true>(p, nb, stream); return;
      }
    } else {
      switch (a.head_dim) {
        case 16: launch_mma<16, false>(p, nb, stream); return;
        case 32: launch_mma<32, false>(p, nb, stream); return;
        case 64: launch_mma<64, false>(p, nb, stream); return;
        case 80: launch_mma<80, false>(p, nb, stream); return;
        case 128: launch_mma<128, false>(p, nb, stream); return;
      }
    }
    throw Error("cuda attention: internal error (tensor-core head_dim)");
  }
  if (a.bf16) {
    if (rel) dispatch_simt<bf16, true>(p, nb, stream);
    else dispatch_simt<bf16, false>(p, nb, stream);
  } else {
    if (rel) dispatch_simt<float, true>(p, nb, stream);
    else dispatch_simt<float, false>(p, nb, stream);
  }
}

void rel_table_prepare(const void* src, bool src_bf16, int64_t rows, int64_t want_rows, int64_t hd, float* out_f32,
                       void* out_hi, void* out_lo, cudaStream_t stream) {
  VITRT_CHECK(rows >= 1 && want_rows >= 1 && hd >= 1 && (out_f32 != nullptr) != (out_hi != nullptr), InvalidArgument,
              "rel_table_prepare: bad arguments");
  const long long n = want_rows * hd;
  const int grid = grid_for(n);
  if (src_bf16)
    rel_table_kernel<bf16><<<grid, 256, 0, stream>>>(static_cast<const bf16*>(src), static_cast<int>(rows),
                                                      static_cast<int>(want_rows), static_cast<int>(hd), out_f32,
                                                      static_cast<bf16*>(out_hi), static_cast<bf16*>(out_lo));
  else
    rel_table_kernel<float><<<grid, 256, 0, stream>>>(static_cast<const float*>(src), static_cast<int>(rows),
                                                       static_cast<int>(want_rows), static_cast<int>(hd), out_f32,
                                                       static_cast<bf16*>(out_hi), static_cast<bf16*>(out_lo));
  check(cudaGetLastError(), "rel_table_kernel launch");
}

void convert_copy(const void* src, bool src_bf16, void* dst, bool dst_bf16, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int grid = grid_for(n);
  if (src_bf16 && dst_bf16)
    convert_kernel<bf16, bf16><<<grid, 256, 0, stream>>>(static_cast<const bf16*>(src), static_cast<bf16*>(dst), n);
  else if (src_bf16)
    convert_kernel<bf16, float><<<grid, 256, 0, stream>>>(static_cast<const bf16*>(src), static_cast<float*>(dst), n);
  else if (dst_bf16)
    convert_kernel<float, bf16><<<grid, 256, 0, stream>>>(static_cast<const float*>(src), static_cast<bf16*>(dst), n);
  else
    convert_kernel<float, float><<<grid, 256, 0, stream>>>(static_cast<const float*>(src), static_cast<float*>(dst), n);
  check(cudaGetLastError(), "convert_kernel launch");
}

}  // namespace vitrt::cuda
