// Attention against a handful of keys (at most kFewKeysMax per sequence, head_dim 16 or 32, no
// rel-pos, no windows): SAM's image-to-token attention, where each of 4096 image tokens per prompt
// attends to the prompt's ~7 tokens, and the decoder's token self-attention. The tensor-core
// kernel pads such key sets to a 64-key tile and spends its time on per-CTA overhead; the problem is
// a stream over q and out (K and V are a few hundred bytes per sequence and head). Here a CTA
// stages one (sequence, head)'s keys and values in shared memory as fp32, and each thread computes
// one query row end to end in registers: 16-byte loads of its q row, the scores, the softmax, the
// weighted sum, 16-byte stores.
// fp32 math throughout; expf (accurate) for F32 data, as the CUDA-core kernel of attention.cu, so the
// fp32 fidelity path is unchanged in kind; __expf for BF16 data.
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/attention_kernel.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda::attn {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kRowsPerCta = 128;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return __float2bfloat16_rn(x);
}

// HD elements of T at `src` (16-byte aligned) -> fp32.
template <class T, int HD>
__device__ __forceinline__ void load_row(const T* src, float (&dst)[HD]) {
  constexpr int E = 16 / sizeof(T);  // elements per 16-byte chunk
  static_assert(HD % E == 0, "rows are whole 16-byte chunks");
#pragma unroll
  for (int c = 0; c < HD / E; ++c) {
    const uint4 u = *reinterpret_cast<const uint4*>(src + c * E);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < E; ++i) dst[c * E + i] = to_f(e[i]);
  }
}
template <class T, int HD>
__device__ __forceinline__ void store_row(T* dst, const float (&src)[HD]) {
  constexpr int E = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < HD / E; ++c) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < E; ++i) e[i] = from_f<T>(src[c * E + i]);
    *reinterpret_cast<uint4*>(dst + c * E) = u;
  }
}

// Grid: x = blocks of kRowsPerCta query rows, y = sequence * heads + head.
template <class T, int HD>
__global__ void __launch_bounds__(kRowsPerCta) few_keys_kernel(const KParams p) {
  __shared__ float ks[kFewKeysMax][HD], vs[kFewKeysMax][HD];
  const int h = blockIdx.y % p.heads, s = blockIdx.y / p.heads;
  const int nk = p.nk;
  const T* kb = static_cast<const T*>(p.k) + static_cast<long long>(s) * nk * p.ldk + h * HD;
  const T* vb = static_cast<const T*>(p.v) + static_cast<long long>(s) * nk * p.ldv + h * HD;
  for (int i = threadIdx.x; i < nk * HD; i += kRowsPerCta) {
    const int j = i / HD, d = i - j * HD;
    ks[j][d] = to_f(kb[j * p.ldk + d]);
    vs[j][d] = to_f(vb[j * p.ldv + d]);
  }
  __syncthreads();
  const int row = blockIdx.x * kRowsPerCta + threadIdx.x;
  if (row >= p.nq) return;
  const long long qrow = static_cast<long long>(s / p.q_share) * p.nq + row;
  float q[HD];
  load_row<T, HD>(static_cast<const T*>(p.q) + qrow * p.ldq + h * HD, q);
  float sc[kFewKeysMax];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kFewKeysMax; ++j) {
    if (j < nk) {
      float d = 0.f;
#pragma unroll
      for (int i = 0; i < HD; ++i) d = fmaf(q[i], ks[j][i], d);
      sc[j] = d * p.scale;
      m = fmaxf(m, sc[j]);
    }
  }
  float o[HD];
#pragma unroll
  for (int i = 0; i < HD; ++i) o[i] = 0.f;
  float l = 0.f;
#pragma unroll
  for (int j = 0; j < kFewKeysMax; ++j) {
    if (j < nk) {
      const float e = std::is_same_v<T, float> ? expf(sc[j] - m) : __expf(sc[j] - m);
      l += e;
#pragma unroll
      for (int i = 0; i < HD; ++i) o[i] = fmaf(e, vs[j][i], o[i]);
    }
  }
  const float inv = 1.f / l;
#pragma unroll
  for (int i = 0; i < HD; ++i) o[i] *= inv;
  const long long orow = static_cast<long long>(s) * p.nq + row;
  store_row<T, HD>(static_cast<T*>(p.out) + orow * p.ldo + h * HD, o);
}

template <class T>
void launch_as(const KParams& p, int num_seq, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.nq + kRowsPerCta - 1) / kRowsPerCta),
                  static_cast<unsigned>(num_seq * p.heads));
  if (p.hd == 16) few_keys_kernel<T, 16><<<grid, kRowsPerCta, 0, stream>>>(p);
  else few_keys_kernel<T, 32><<<grid, kRowsPerCta, 0, stream>>>(p);
  check(cudaGetLastError(), "attention few_keys_kernel launch");
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool few_keys_supported(const KParams& p, bool is_bf16, long long num_seq) {
  const long long es = is_bf16 ? 2 : 4;
  return p.nk >= 1 && p.nk <= kFewKeysMax && (p.hd == 16 || p.hd == 32) && num_seq * p.heads <= 65535 &&
         p.nq <= (1 << 24) && (p.ldq * es) % 16 == 0 && (p.ldo * es) % 16 == 0 && aligned16(p.q) && aligned16(p.out);
}

void few_keys_launch(const KParams& p, bool is_bf16, int num_seq, cudaStream_t stream) {
  if (is_bf16) launch_as<bf16>(p, num_seq, stream);
  else launch_as<float>(p, num_seq, stream);
}

}  // namespace vitrt::cuda::attn
