#include "ops/cpu/softmax_row.h"

#include <cmath>
#include <cstdlib>

#include "ops/cpu/vec_math.h"

namespace vitrt::cpu {
namespace detail {

float exp_row_avx2(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W) {
  float mx;
  if (bh) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    const __m256i tail = vec::tail_mask(W % 8);
    const int64_t full = W - W % 8;
    for (int64_t kh = 0; kh < H; ++kh) {
      float* row = s + kh * W;
      const __m256 b = _mm256_set1_ps(bh[kh]);
      for (int64_t kw = 0; kw < full; kw += 8) {
        __m256 x = _mm256_add_ps(_mm256_loadu_ps(row + kw), _mm256_add_ps(b, _mm256_loadu_ps(bw + kw)));
        _mm256_storeu_ps(row + kw, x);
        vmax = _mm256_max_ps(vmax, x);
      }
      if (full < W) {
        __m256 x = _mm256_add_ps(_mm256_maskload_ps(row + full, tail),
                                 _mm256_add_ps(b, _mm256_maskload_ps(bw + full, tail)));
        _mm256_maskstore_ps(row + full, tail, x);
        // Masked-off lanes hold b + 0: fold them out of the max with -inf.
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, _mm256_castsi256_ps(tail)));
      }
    }
    mx = vec::hmax(vmax);
  } else {
    mx = vec::row_max(s, n);
  }
  return vec::exp_and_sum(s, n, mx);
}

}  // namespace detail

namespace {
using ExpRowFn = float (*)(float*, int64_t, const float*, const float*, int64_t, int64_t);

ExpRowFn pick() {
  // VITRT_NO_AVX512=1 forces the AVX2 path (for testing both on one machine).
  const char* off = std::getenv("VITRT_NO_AVX512");
  if ((!off || off[0] == '0') && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
    return detail::exp_row_avx512;
  return detail::exp_row_avx2;
}
}  // namespace

float exp_row(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W) {
  static const ExpRowFn fn = pick();
  return fn(s, n, bh, bw, H, W);
}

}  // namespace vitrt::cpu
