// Element-wise CUDA kernels on raw device pointers, float32 or bfloat16 storage (math in fp32).
// All launch on cuda::current_stream() and return at once; launch errors throw vitrt::Error.
// Sizes are element counts; in-place use (out == x) is allowed wherever an output is given.
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

enum class Act : uint8_t { None, GELU /* exact erf */, ReLU };

// out[i] = x[i] + y[i % ny] (ny divides n: y broadcast over the leading dims).
void add_broadcast(DType dt, const void* x, const void* y, void* out, int64_t n, int64_t ny);
void scale(DType dt, void* x, int64_t n, float s);
void gelu(DType dt, void* x, int64_t n);  // 0.5 x (1 + erf(x / sqrt 2)), erff (bf16: fast_erf.h)
void relu(DType dt, void* x, int64_t n);
// y[r, c] = act(y[r, c] + bias[c]) + residual[r, c] over a [rows, cols] matrix; bias and
// residual may be null. The GEMM epilogue that cuBLASLt cannot do exactly (erf GELU, or an
// activation before the residual).
void bias_act_residual(DType dt, void* y, int64_t rows, int64_t cols, const void* bias, Act act,
                       const void* residual);
// Converts n elements between F32 and BF16 (round to nearest even), or copies when from == to.
void cast(DType from, const void* x, DType to, void* y, int64_t n);

}  // namespace vitrt::cuda

// ---------------------------------------------------------------------------------------------
// Device-side helpers shared by the .cu files of this folder (not visible to host compilers).
#ifdef __CUDACC__
#include <cuda_bf16.h>

#include <type_traits>

#include "ops/cuda/fast_erf.h"

#include <algorithm>

namespace vitrt::cuda::dev {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Exact GELU as torch.nn.GELU() / oneDNN gelu_erf: 0.5 x (1 + erf(x / sqrt 2)).
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f)); }
// GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with tanh.approx.f32 (one MUFU
// op; max relative error 2^-10.7): what cuBLASLt's GELU epilogue computes, within ~1e-3 absolute of
// the erf form. Only for results rounded to bf16.
// (tanh_gelu_term: its tanh(sqrt(2/pi) (x + 0.044715 x^3)))
__device__ __forceinline__ float tanh_gelu_term(float x) {
  const float u = x * fmaf(0.0356774081f, x * x, 0.7978845608f);
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
  return t;
}
__device__ __forceinline__ float gelu_tanh_approx(float x) {
  const float t = tanh_gelu_term(x);
  const float hx = 0.5f * x;
  return fmaf(hx, t, hx);
}
// Exactly twice gelu_tanh_approx(x) (fma(x, t, x) against fma(x / 2, t, x / 2), a power-of-two scaling
// that rounding commutes with, away from overflow and the subnormals), one multiplication fewer: for
// a kernel that can carry the factor 2 (bsr_mlp_fused.cu).
__device__ __forceinline__ float gelu_tanh_approx_x2(float x) { return fmaf(x, tanh_gelu_term(x), x); }
// gelu_tanh_approx_x2 of two values at once in bf16x2 arithmetic, packed as bf16x2 (lo = a): for a
// kernel whose GELUs are rounded to bf16 anyway and whose tanh rate limits it (sm_90: the bf16x2
// tanh.approx is one MUFU op for both values, the multiplications HMUL2 / HFMA2; 6 instructions a
// pair against 11). The price: x and the tanh argument rounded to bf16 on the way, ~1 bf16 step of
// the result instead of half of one (CudaBsr.FusedMlpMatchesCpu bounds the fused MLP against the two
// linears). sm_90 only.
// (Both bf16x2 forms: Half = false gives 2 GELU(x) = x + x t, Half = true GELU(x) = x/2 + x/2 t, with
// x / 2 exact.)
template <bool Half>
__device__ __forceinline__ unsigned gelu_tanh_bf16x2_form(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const __nv_bfloat162 x = __floats2bfloat162_rn(a, b);
  const __nv_bfloat162 c0 = __float2bfloat162_rn(0.7978845608f), c1 = __float2bfloat162_rn(0.0356774081f);
  const __nv_bfloat162 u = __hmul2(x, __hfma2(c1, __hmul2(x, x), c0));
  unsigned ti;
  asm("tanh.approx.bf16x2 %0, %1;" : "=r"(ti) : "r"(*reinterpret_cast<const unsigned*>(&u)));
  const __nv_bfloat162 s = Half ? __hmul2(x, __float2bfloat162_rn(0.5f)) : x;
  const __nv_bfloat162 r = __hfma2(s, *reinterpret_cast<const __nv_bfloat162*>(&ti), s);
  return *reinterpret_cast<const unsigned*>(&r);
#else
  (void)a, (void)b;
  __trap();
  return 0;
#endif
}
__device__ __forceinline__ unsigned gelu_tanh_approx_x2_bf16x2(float a, float b) {
  return gelu_tanh_bf16x2_form<false>(a, b);
}
// gelu_tanh_approx of two values in the same bf16x2 arithmetic as gelu_tanh_approx_x2_bf16x2 (one
// MUFU op for both, HMUL2 / HFMA2), packed as bf16x2 (lo = a). The same price: ~1 bf16 step of the
// result instead of half of one. sm_90 only.
__device__ __forceinline__ unsigned gelu_tanh_approx_bf16x2(float a, float b) { return gelu_tanh_bf16x2_form<true>(a, b); }
// The GELU of a value stored as T: for bf16, the branch-free erf of fast_erf.h (within 2e-6 absolute,
// far below a bf16 step, at about half of erff's instructions); erff for fp32.
template <class T>
__device__ __forceinline__ float gelu_for(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return fast_erf::gelu(v);
  else return gelu_erf(v);
}

// Grid-stride loop bounds: i from global thread index, step = all threads of the grid.
__device__ __forceinline__ int64_t gtid() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gstride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

constexpr int kThreads = 256;
// Blocks for n elements with kThreads threads each; capped (kernels use grid-stride loops), and
// at least 1 (callers return early on n == 0 anyway).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, int64_t{1} << 20)));
}

// Sum over groups of LANES adjacent lanes (a power of two <= 32), every lane getting its group's sum.
template <int LANES, class T>
__device__ __forceinline__ T group_sum(T v) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  return group_sum<32>(v);
}

// V elements of T loaded or stored as one vector (V * sizeof(T) = 8 or 16 bytes).
template <class T, int V>
struct alignas(V * sizeof(T)) VecN {
  T v[V];
};
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace vitrt::cuda::dev

namespace vitrt::cuda {
// Calls f(T{}) with T = float or __nv_bfloat16 for dt; InvalidArgument naming `op` otherwise.
template <class F>
void dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    default:
      throw InvalidArgument(detail::concat("cuda ", op, ": dtype ", dtype_name(dt), " is not supported (float32 or bfloat16)"));
  }
}
// Throws naming `what` if the last launch failed.
void check_launch(const char* what);
}  // namespace vitrt::cuda
#endif
