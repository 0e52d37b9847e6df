// Internals shared by the attention kernels (attention.cu: mma.sync and CUDA-core kernels;
// attention_wgmma.cu: the Hopper wgmma kernel for global attention with rel-pos). Device code and
// the kernel parameter block; include from .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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
};

// Exact t / d for 0 <= t < 2^22, d >= 1, from a float reciprocal plus one correction step.
__device__ __forceinline__ int fdiv(int t, int d, float inv_d) {
  int q = __float2int_rz((static_cast<float>(t) + 0.5f) * inv_d);
  const int r = t - q * d;
  if (r < 0) --q;
  else if (r >= d) ++q;
  return q;
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

// The Hopper kernel (attention_wgmma.cu): global attention with decomposed rel-pos on an
// rel_H x 64 grid, head_dim 64 or 80, BF16, dense sequences (no window, no q sharing).
// wgmma_relpos_plan: dynamic shared memory bytes for `p`, or 0 when the kernel does not cover it
// (then the mma.sync kernel runs). wgmma_relpos_launch: one launch of p.num_qtiles * heads * seqs CTAs.
constexpr int kWgmmaBM = 128;  // query rows per CTA (2 consumer warpgroups x 64)
size_t wgmma_relpos_plan(const KParams& p, int optin_smem_limit);
void wgmma_relpos_launch(const KParams& p, int blocks, size_t smem, cudaStream_t stream);

}  // namespace vitrt::cuda::attn
