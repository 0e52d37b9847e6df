// Index arithmetic of the GPU im2col in tap-major ("HWC") column order, shared by the kernel
// (layout.cu) and its host-side unit test (tests/unit/test_im2col_taps.cpp).
//
// Column k of output row m = (b, oy, ox) is k = (ky * kw + kx) * Cin + ci, so that for one tap the Cin
// channels of one input pixel are contiguous on both sides: reads and writes are coalesced and, when
// Cin * element size is a multiple of 16 bytes, move in 16-byte vectors. The weight is read in the
// matching [Cout, kh, kw, Cin] order. All indices fit in 32 bits for SAM's shapes; callers check.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define VITRT_HOST_DEVICE __host__ __device__
#else
#define VITRT_HOST_DEVICE
#endif

namespace vitrt::cuda {

struct Im2colTaps {
  int B, H, W, Cin, kh, kw, stride, pad, Ho, Wo;
  int vec;  // elements moved per step (Cin % vec == 0)

  VITRT_HOST_DEVICE int64_t steps() const {
    return static_cast<int64_t>(B) * Ho * Wo * kh * kw * (Cin / vec);
  }
  // Step i (0 <= i < steps()) copies `vec` elements to col + *dst from x + *src, or writes zeros
  // (returns false) where the tap falls into the padding.
  VITRT_HOST_DEVICE bool at(int64_t i, int64_t* dst, int64_t* src) const {
    const int cv = Cin / vec, taps = kh * kw;
    const int c = static_cast<int>(i % cv);
    const int64_t r = i / cv;
    const int tap = static_cast<int>(r % taps);
    const int64_t m = r / taps;
    const int ox = static_cast<int>(m % Wo);
    const int64_t r2 = m / Wo;
    const int oy = static_cast<int>(r2 % Ho);
    const int64_t b = r2 / Ho;
    const int ky = tap / kw, kx = tap - ky * kw;
    const int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    *dst = (m * taps + tap) * Cin + static_cast<int64_t>(c) * vec;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return false;
    *src = ((b * H + iy) * W + ix) * Cin + static_cast<int64_t>(c) * vec;
    return true;
  }
};

// Without padding, the kw taps of one kernel row ky are kw consecutive input pixels, so the
// kw * Cin elements they contribute are one contiguous run on both sides (at column ky * kw * Cin of
// the output row). For the patch embedding (Cin = 3, 16 x 16 patches: 48 elements, 96 bytes in
// bf16) that moves 16-byte vectors where the per-tap steps above could only move single elements.
struct Im2colRows {
  int B, H, W, Cin, kh, kw, stride, Ho, Wo;
  int vec;  // elements moved per step ((kw * Cin) % vec == 0)

  VITRT_HOST_DEVICE int64_t steps() const {
    return static_cast<int64_t>(B) * Ho * Wo * kh * (kw * Cin / vec);
  }
  VITRT_HOST_DEVICE void at(int64_t i, int64_t* dst, int64_t* src) const {
    const int run = kw * Cin, rv = run / vec;
    const int j = static_cast<int>(i % rv);
    const int64_t r = i / rv;
    const int ky = static_cast<int>(r % kh);
    const int64_t m = r / kh;
    const int ox = static_cast<int>(m % Wo);
    const int64_t r2 = m / Wo;
    const int oy = static_cast<int>(r2 % Ho);
    const int64_t b = r2 / Ho;
    *dst = (m * kh + ky) * run + static_cast<int64_t>(j) * vec;
    *src = ((b * H + static_cast<int64_t>(oy) * stride + ky) * W + static_cast<int64_t>(ox) * stride) * Cin +
           static_cast<int64_t>(j) * vec;
  }
};

}  // namespace vitrt::cuda
