#include "ops/cpu/softmax_row.h"

#include <cmath>
#include <cstdlib>

#include "ops/cpu/vec_math.h"

namespace vitrt::cpu {
namespace isa {

float exp_row_avx2(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch) {
  if (!bh) return vec::exp_and_sum(s, n, vec::row_max(s, n));
  if (W % 8 == 0) {
    // Bias added per segment of W scores, on the fly in both passes (max, then exp): nothing is
    // stored between the passes.
    const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
    __m256 vmax = neg_inf;
    for (int64_t kh = 0; kh < H; ++kh) {
      const float* row = s + kh * W;
      const __m256 b = _mm256_set1_ps(bh[kh]);
      for (int64_t kw = 0; kw < W; kw += 8)
        vmax = _mm256_max_ps(vmax, _mm256_add_ps(_mm256_loadu_ps(row + kw), _mm256_add_ps(b, _mm256_loadu_ps(bw + kw))));
    }
    const __m256 m = _mm256_set1_ps(vec::hmax(vmax));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t kh = 0; kh < H; ++kh) {
      float* row = s + kh * W;
      const __m256 b = _mm256_sub_ps(_mm256_set1_ps(bh[kh]), m);  // bias and max folded together
      for (int64_t kw = 0; kw < W; kw += 8) {
        __m256 e = vec::exp(_mm256_add_ps(_mm256_loadu_ps(row + kw), _mm256_add_ps(b, _mm256_loadu_ps(bw + kw))));
        _mm256_storeu_ps(row + kw, e);
        acc = _mm256_add_ps(acc, e);
      }
    }
    return vec::hsum(acc);
  }
  // W not a multiple of the vector width (SAM windows: W = 14): materialise the row's bias
  // bias[kh*W + kw] = bh[kh] + bw[kw] in scratch with full-width stores, each segment's spill
  // into the next overwritten by the next segment, then add it in one flat pass.
  const int64_t wv = (W + 7) / 8;
  for (int64_t kh = 0; kh < H; ++kh) {
    const __m256 b = _mm256_set1_ps(bh[kh]);
    float* dst = scratch + kh * W;
    for (int64_t v = 0; v < wv; ++v) _mm256_storeu_ps(dst + 8 * v, _mm256_add_ps(b, _mm256_loadu_ps(bw + 8 * v)));
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_add_ps(_mm256_loadu_ps(s + i), _mm256_loadu_ps(scratch + i)));
  for (; i < n; ++i) s[i] += scratch[i];
  return vec::exp_and_sum(s, n, vec::row_max(s, n));
}

}  // namespace isa

namespace {
using ExpRowFn = float (*)(float*, int64_t, const float*, const float*, int64_t, int64_t, float*);

ExpRowFn pick() {
  // VITRT_NO_AVX512=1 forces the AVX2 path (for testing both on one machine).
  const char* off = std::getenv("VITRT_NO_AVX512");
  if ((!off || off[0] == '0') && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
    return isa::exp_row_avx512;
  return isa::exp_row_avx2;
}
}  // namespace

float exp_row(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch) {
  static const ExpRowFn fn = pick();
  return fn(s, n, bh, bw, H, W, scratch);
}

}  // namespace vitrt::cpu
