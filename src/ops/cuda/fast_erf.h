// erf for GELUs whose result is rounded to bfloat16: Abramowitz & Stegun 7.1.26, branch-free,
// |error| <= 1.5e-7 for the formula, 4.6e-7 measured with fp32 arithmetic (tests/unit), so the GELU
// is within 2e-6 absolute: below a bf16 step wherever |GELU| > 1e-3, and 250 times closer than the
// tanh form of cuBLASLt's GELU epilogue that the bf16 encoder uses. erff's branches
// and ~25 instructions per element were most of the work of the epilogues that apply a GELU to
// every output of a memory-bound kernel (the mask decoder's last transposed conv). Host and device:
// the CPU unit tests check the same arithmetic against std::erf.
#pragma once
#include <cmath>

#include "ops/cuda/host_device.h"

namespace vitrt::fast_erf {

VITRT_HOST_DEVICE inline float erf_as7126(float x) {
  const float ax = fabsf(x);
#if defined(__CUDA_ARCH__)
  const float t = __fdividef(1.f, fmaf(0.3275911f, ax, 1.f));
  const float e = __expf(-ax * ax);
#else
  const float t = 1.f / fmaf(0.3275911f, ax, 1.f);
  const float e = std::exp(-ax * ax);
#endif
  const float poly =
      fmaf(fmaf(fmaf(fmaf(1.061405429f, t, -1.453152027f), t, 1.421413741f), t, -0.284496736f), t, 0.254829592f) * t;
  return copysignf(1.f - poly * e, x);
}

// 0.5 x (1 + erf(x / sqrt 2)) with the erf above.
VITRT_HOST_DEVICE inline float gelu(float x) { return 0.5f * x * (1.f + erf_as7126(x * 0.70710678118654752440f)); }

}  // namespace vitrt::fast_erf
