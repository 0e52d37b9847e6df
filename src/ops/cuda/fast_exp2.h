// 2^x on the FMA pipe instead of the MUFU (FlashAttention-4's offload, for attention kernels whose
// exps keep the MUFU as busy as their MMAs keep the tensor cores). x = j + f with j = rint(x) (adding
// 1.5 * 2^23 leaves j in the low mantissa bits of t) and f in [-0.5, 0.5]; 2^f by a degree-3
// polynomial (minimax for the relative error: 7.5e-5 at most, far below the 2^-9 of the bf16 P it
// feeds), 2^j by adding j to the exponent field. Seven FMA-pipe / ALU instructions for one MUFU.EX2.
// x is clamped at -125 (2^-125: nothing next to a softmax row sum >= 1) so that the exponent field
// cannot wrap; arguments above 126 are out of range (the softmax's stay below its slack, 2^8).
// Host and device: the CPU unit tests check the same arithmetic against exp2.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/cuda/host_device.h"

namespace vitrt::fast_exp2 {

VITRT_HOST_DEVICE inline int32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(x);
#else
  int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i;
#endif
}
VITRT_HOST_DEVICE inline float bits_float(int32_t i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float x;
  std::memcpy(&x, &i, sizeof x);
  return x;
#endif
}

VITRT_HOST_DEVICE inline float exp2_poly3(float x) {
  constexpr float kShift = 12582912.f;  // 1.5 * 2^23
  x = fmaxf(x, -125.f);
  const float t = x + kShift;
  const float f = x - (t - kShift);
  float p = fmaf(0.05517098f, f, 0.24260971f);
  p = fmaf(p, f, 0.69326097f);
  p = fmaf(p, f, 0.99992816f);
  // (j << 23 in two's complement: the shift drops t's exponent and the 1.5's mantissa bit)
  return bits_float(static_cast<int32_t>(static_cast<uint32_t>(float_bits(p)) +
                                         (static_cast<uint32_t>(float_bits(t)) << 23)));
}

}  // namespace vitrt::fast_exp2
