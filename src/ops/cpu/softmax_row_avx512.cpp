// AVX-512 build of exp_row. Everything in this file is compiled for AVX-512 (the pragma below)
// and is only called after a run-time CPU check. It deliberately uses no inline library
// templates: an AVX-512 instantiation of, say, std::max could otherwise be picked by the linker
// for the whole program and crash on CPUs without AVX-512.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/softmax_row.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,fma,avx2")
// GCC 12's AVX-512 intrinsics use a self-initialised "undefined" vector internally, which
// -Wall reports as uninitialised once inlined here (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vitrt::cpu::detail {
namespace {

// e^x, 16 lanes; same reduction and polynomial as vec::exp (AVX2), see vec_math.h.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3365478515625f)), _mm512_set1_ps(88.3762626647949f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(126)), 23);
  return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e)), _mm512_set1_ps(2.f));
}

inline __mmask16 mask_first(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

}  // namespace

float exp_row_avx512(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  if (bh) {
    // Two passes over the H row segments of W scores, both adding the bias on the fly:
    //   1. max of s + bh[kh] + bw[kw]      (loads only)
    //   2. s = e^(s + bh[kh] + bw[kw] - max) and its sum
    // Writing the biased scores back in pass 1 and re-reading them in pass 2 would read across
    // several just-written segments whenever W is not a multiple of 16 (SAM windows: W = 14),
    // which defeats store forwarding and costs several times the arithmetic.
    const int64_t full = W - W % 16;
    const __mmask16 tail = mask_first(W % 16);
    __m512 vmax = neg_inf;
    for (int64_t kh = 0; kh < H; ++kh) {
      const float* row = s + kh * W;
      const __m512 b = _mm512_set1_ps(bh[kh]);
      for (int64_t kw = 0; kw < full; kw += 16)
        vmax = _mm512_max_ps(vmax, _mm512_add_ps(_mm512_loadu_ps(row + kw), _mm512_add_ps(b, _mm512_loadu_ps(bw + kw))));
      if (tail) {
        __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(tail, row + full),
                                 _mm512_add_ps(b, _mm512_maskz_loadu_ps(tail, bw + full)));
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, x);
      }
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    for (int64_t kh = 0; kh < H; ++kh) {
      float* row = s + kh * W;
      const __m512 b = _mm512_sub_ps(_mm512_set1_ps(bh[kh]), m);  // bias and max folded together
      for (int64_t kw = 0; kw < full; kw += 16) {
        __m512 e = exp16(_mm512_add_ps(_mm512_loadu_ps(row + kw), _mm512_add_ps(b, _mm512_loadu_ps(bw + kw))));
        _mm512_storeu_ps(row + kw, e);
        acc0 = _mm512_add_ps(acc0, e);
      }
      if (tail) {
        __m512 e = exp16(_mm512_add_ps(_mm512_maskz_loadu_ps(tail, row + full),
                                       _mm512_add_ps(b, _mm512_maskz_loadu_ps(tail, bw + full))));
        _mm512_mask_storeu_ps(row + full, tail, e);
        acc1 = _mm512_mask_add_ps(acc1, tail, acc1, e);
      }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  }

  __m512 vmax0 = neg_inf, vmax1 = neg_inf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    vmax0 = _mm512_max_ps(vmax0, _mm512_loadu_ps(s + i));
    vmax1 = _mm512_max_ps(vmax1, _mm512_loadu_ps(s + i + 16));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = mask_first(n - i < 16 ? n - i : 16);
    vmax0 = _mm512_mask_max_ps(vmax0, k, vmax0, _mm512_maskz_loadu_ps(k, s + i));
  }
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(vmax0, vmax1)));
  for (i = 0; i + 32 <= n; i += 32) {
    __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
    __m512 b = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i + 16), m));
    _mm512_storeu_ps(s + i, a);
    _mm512_storeu_ps(s + i + 16, b);
    acc0 = _mm512_add_ps(acc0, a);
    acc1 = _mm512_add_ps(acc1, b);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = mask_first(n - i < 16 ? n - i : 16);
    __m512 a = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), m));
    _mm512_mask_storeu_ps(s + i, k, a);
    acc0 = _mm512_mask_add_ps(acc0, k, acc0, a);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace vitrt::cpu::detail

#pragma GCC diagnostic pop
#pragma GCC pop_options
