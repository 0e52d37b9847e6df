// Small AVX2/FMA helpers shared by the CPU kernels (the library is built for x86-64-v3).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace vitrt::cpu::vec {

// Mask with the first n (0..8) lanes set, for tail loads/stores.
inline __m256i tail_mask(int64_t n) {
  alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}

// e^x for 8 floats: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, and Cephes' degree-5
// polynomial for e^r (about 1 ulp over the float range). Inputs below -87.3 return ~1e-38 (not
// exactly 0): harmless for softmax, where such terms vanish against the row maximum's e^0 = 1.
// -inf gives ~0 too; NaN stays NaN (max/min return their second operand when one is NaN).
inline __m256 exp(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365478515625f);
  x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // 2^n built directly in the exponent field. After the clamp n is in [-126, 128]; 2^128 is not
  // a float, so build 2^(n-1) and multiply by 2 (n = -126 then gives exponent field 0, i.e. 0:
  // a result below 2^-125 flushed to zero, harmless).
  __m256i e = _mm256_cvtps_epi32(n);
  e = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(126)), 23);
  return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.f));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp_and_sum: x[i] = e^(x[i] - max) and returns the sum of the results.
inline float exp_and_sum(float* x, int64_t n, float max) {
  const __m256 m = _mm256_set1_ps(max);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    __m256 b = exp(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
    _mm256_storeu_ps(x + i, a);
    _mm256_storeu_ps(x + i + 8, b);
    acc0 = _mm256_add_ps(acc0, a);
    acc1 = _mm256_add_ps(acc1, b);
  }
  for (; i < n; i += 8) {
    __m256i mask = tail_mask(n - i < 8 ? n - i : 8);
    __m256 a = exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m));
    a = _mm256_and_ps(a, _mm256_castsi256_ps(mask));  // masked-off lanes must not count
    _mm256_maskstore_ps(x + i, mask, a);
    acc0 = _mm256_add_ps(acc0, a);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

inline float row_max(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  float m = hmax(_mm256_max_ps(m0, m1));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace vitrt::cpu::vec
