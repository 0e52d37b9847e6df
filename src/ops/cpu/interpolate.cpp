#include "ops/cpu/interpolate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rounding.h"

namespace vitrt::cpu {

// PyTorch (align_corners=False, output size given): scale = float(in) / out;
// src = scale * (dst + 0.5f) - 0.5f, clamped at 0; i0 = (int) src; i1 = i0 + (i0 < in - 1);
// w1 = clamp(src - i0, 0, 1), w0 = 1 - w1. All in float (opmath of float is float), the
// product rounded before the subtraction: checked bit for bit against torch's CPU kernel.
std::vector<LinearTaps> linear_taps(int64_t in, int64_t out) {
  std::vector<LinearTaps> taps(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    float src = rounded(scale * (static_cast<float>(d) + 0.5f)) - 0.5f;
    if (src < 0.f) src = 0.f;
    const int64_t i0 = static_cast<int64_t>(src);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const float w1 = std::clamp(src - static_cast<float>(i0), 0.f, 1.f);
    taps[d] = LinearTaps{i0, i1, 1.f - w1, w1};
  }
  return taps;
}

void interpolate_linear_rows(const float* x, float* out, int64_t L, int64_t C, int64_t new_len) {
  if (new_len == 0 || C == 0) return;
  const auto taps = linear_taps(L, new_len);
  for (int64_t j = 0; j < new_len; ++j) {
    const LinearTaps& t = taps[j];
    const float* a = x + t.i0 * C;
    const float* b = x + t.i1 * C;
    float* o = out + j * C;
    // torch's compiled form: fma(w0, a, w1 * b).
    for (int64_t c = 0; c < C; ++c) o[c] = std::fma(t.w0, a[c], t.w1 * b[c]);
  }
}

void resize_bilinear(const float* x, float* out, int64_t N, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  resize_bilinear_cropped(x, out, N, H, W, oh, ow, oh, ow);
}

void resize_bilinear_cropped(const float* x, float* out, int64_t N, int64_t H, int64_t W, int64_t oh, int64_t ow,
                             int64_t keep_h, int64_t keep_w) {
  if (N == 0 || keep_h == 0 || keep_w == 0) return;
  const auto ty = linear_taps(H, oh);
  const auto tx = linear_taps(W, ow);
  const int64_t rows = N * keep_h;
#pragma omp parallel for schedule(static) if (rows * keep_w > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / keep_h, y = r % keep_h;
    const LinearTaps& v = ty[y];
    const float* r0 = x + (n * H + v.i0) * W;
    const float* r1 = x + (n * H + v.i1) * W;
    float* o = out + r * keep_w;
    for (int64_t c = 0; c < keep_w; ++c) {
      const LinearTaps& h = tx[c];
      // torch's compiled form (bit-exact against its CPU kernel): width inside, height outside,
      // each a + b pair as fma(w0, a, w1 * b).
      const float top = std::fma(h.w0, r0[h.i0], h.w1 * r0[h.i1]);
      const float bot = std::fma(h.w0, r1[h.i0], h.w1 * r1[h.i1]);
      o[c] = std::fma(v.w0, top, v.w1 * bot);
    }
  }
}

}  // namespace vitrt::cpu
