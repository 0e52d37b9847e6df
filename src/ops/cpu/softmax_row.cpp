#include "ops/cpu/softmax_row.h"

#include <cmath>
#include <cstdlib>

#include "ops/cpu/vec_math.h"

namespace vitrt::cpu {
namespace detail {

float exp_row_avx2(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W) {
  if (!bh) return vec::exp_and_sum(s, n, vec::row_max(s, n));
  // Same two-pass structure as the AVX-512 version (see there for why the biased scores are
  // not written back between the passes).
  const int64_t full = W - W % 8;
  const __m256i tail = vec::tail_mask(W % 8);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = neg_inf;
  for (int64_t kh = 0; kh < H; ++kh) {
    const float* row = s + kh * W;
    const __m256 b = _mm256_set1_ps(bh[kh]);
    for (int64_t kw = 0; kw < full; kw += 8)
      vmax = _mm256_max_ps(vmax, _mm256_add_ps(_mm256_loadu_ps(row + kw), _mm256_add_ps(b, _mm256_loadu_ps(bw + kw))));
    if (full < W) {
      __m256 x = _mm256_add_ps(_mm256_maskload_ps(row + full, tail), _mm256_add_ps(b, _mm256_maskload_ps(bw + full, tail)));
      vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, x, _mm256_castsi256_ps(tail)));
    }
  }
  const __m256 m = _mm256_set1_ps(vec::hmax(vmax));
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < H; ++kh) {
    float* row = s + kh * W;
    const __m256 b = _mm256_sub_ps(_mm256_set1_ps(bh[kh]), m);
    for (int64_t kw = 0; kw < full; kw += 8) {
      __m256 e = vec::exp(_mm256_add_ps(_mm256_loadu_ps(row + kw), _mm256_add_ps(b, _mm256_loadu_ps(bw + kw))));
      _mm256_storeu_ps(row + kw, e);
      acc0 = _mm256_add_ps(acc0, e);
    }
    if (full < W) {
      __m256 e = vec::exp(_mm256_add_ps(_mm256_maskload_ps(row + full, tail), _mm256_add_ps(b, _mm256_maskload_ps(bw + full, tail))));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(tail));
      _mm256_maskstore_ps(row + full, tail, e);
      acc1 = _mm256_add_ps(acc1, e);
    }
  }
  return vec::hsum(_mm256_add_ps(acc0, acc1));
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
