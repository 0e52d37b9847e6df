// The two-tap linear interpolation weights of F.interpolate(mode="bilinear"/"linear",
// align_corners=False), computed with the CPU kernels' exact arithmetic (cpu::linear_taps): scale =
// float(in) / out; src = max(scale * (d + 0.5f) - 0.5f, 0), i0 = (int) src, i1 = i0 + (i0 < in - 1),
// w1 = clamp(src - i0, 0, 1), w0 = 1 - w1. Every operation rounded on its own (_rn intrinsics are
// never contracted into FMAs), as the CPU code forces with its rounded() barrier. Used by
// interpolate.cu and amg.cu; device code only.
#pragma once
#include <cstdint>

namespace vitrt::cuda::taps {

template <class I>
struct LinearTap {
  I i0, i1;
  float w0, w1;
};

__device__ __forceinline__ float linear_scale(int64_t in, int64_t out) {
  return __fdiv_rn(static_cast<float>(in), static_cast<float>(out));
}

// Output index d of a resize from `in` samples with the given scale (linear_scale(in, out)).
template <class I>
__device__ __forceinline__ LinearTap<I> linear_tap(I in, float scale, I d) {
  float src = __fsub_rn(__fmul_rn(scale, __fadd_rn(static_cast<float>(d), 0.5f)), 0.5f);
  if (src < 0.f) src = 0.f;
  LinearTap<I> t;
  t.i0 = static_cast<I>(src);
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.w1 = fminf(fmaxf(__fsub_rn(src, static_cast<float>(t.i0)), 0.f), 1.f);
  t.w0 = __fsub_rn(1.f, t.w1);
  return t;
}

// torch's compiled form, as the CPU kernel: fma(w0, a, w1 * b) with the product rounded.
__device__ __forceinline__ float lerp2(float w0, float a, float w1, float b) { return fmaf(w0, a, __fmul_rn(w1, b)); }

}  // namespace vitrt::cuda::taps
