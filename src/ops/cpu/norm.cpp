#include "ops/cpu/norm.h"

#include <immintrin.h>

#include <cmath>

#include "ops/cpu/softmax_row.h"

namespace vitrt::cpu {
namespace {

// Sum of x[0..n) in double, 4 lanes at a time (float -> double converts are exact).
double sum_f64(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) s += x[i];
  return s;
}

// Sum of (x - mean)^2 in double.
double sumsq_dev_f64(const float* x, int64_t n, double mean) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), m);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)), m);
    a0 = _mm256_fmadd_pd(d0, d0, a0);
    a1 = _mm256_fmadd_pd(d1, d1, a1);
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

}  // namespace

void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                int64_t C, float eps) {
  if (C == 0) return;
#pragma omp parallel for schedule(static) if (rows * C > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    const double mean = sum_f64(xr, C) / C;
    const double var = sumsq_dev_f64(xr, C, mean) / C;
    // torch computes rstd = 1 / sqrt(var + eps) and y = (x - mean) * rstd * w + b in float.
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float meanf = static_cast<float>(mean);
    const __m256 vm = _mm256_set1_ps(meanf), vr = _mm256_set1_ps(rstd);
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
      __m256 n = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + c), vm), vr);
      _mm256_storeu_ps(yr + c, _mm256_fmadd_ps(n, _mm256_loadu_ps(weight + c), _mm256_loadu_ps(bias + c)));
    }
    for (; c < C; ++c) yr[c] = (xr[c] - meanf) * rstd * weight[c] + bias[c];
  }
}

void softmax_rows(float* x, int64_t rows, int64_t n) {
  if (n == 0) return;
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    const float inv = 1.f / exp_row(xr, n, nullptr, nullptr, 0, 0, nullptr);
    const __m256 vi = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(xr + i, _mm256_mul_ps(_mm256_loadu_ps(xr + i), vi));
    for (; i < n; ++i) xr[i] *= inv;
  }
}

}  // namespace vitrt::cpu
