// AVX-512 build of exp_row. Everything in this file is compiled for AVX-512 (the pragma below)
// and is only called after a run-time CPU check. It deliberately uses no inline library
// templates: an AVX-512 instantiation of, say, std::max could otherwise be picked by the linker
// for the whole program and crash on CPUs without AVX-512.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/softmax_row.h"
#include "ops/cpu/avx512_region.h"

VITRT_AVX512_REGION_BEGIN
// GCC 12's AVX-512 intrinsics use a self-initialised "undefined" vector internally, which
// -Wall reports as uninitialised once inlined here (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vitrt::cpu::isa {
namespace {

// e^x, 16 lanes: the reduction and polynomial of vec::exp (AVX2, see vec_math.h), with the
// final 2^n scaling done by vscalefps, which gets overflow (inf) and underflow (0) right.
// Inputs are clamped below at -104 (e^-104 is below the smallest float anyway) so that -inf
// gives 0, not inf - inf = NaN; max(lo, x) keeps a NaN x as NaN.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.f), x);
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
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 mask_first(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

// For grids of at most 16 x 16 keys (SAM windows: 14 x 14): for each flat key position
// j < H*W, its key row j / W and column j % W, so that a 16-wide chunk of the bias can be
// assembled in registers with two permutes (bh and bw each fit one vector). Cached per thread
// for the last (H, W) seen: attention calls exp_row with the same grid for every query row.
struct SmallGrid {
  int64_t H = -1, W = -1;
  alignas(64) int32_t row[256];
  alignas(64) int32_t col[256];
};
thread_local SmallGrid t_grid;

const SmallGrid& small_grid(int64_t H, int64_t W) {
  SmallGrid& g = t_grid;
  if (g.H != H || g.W != W) {
    for (int64_t j = 0; j < 256; ++j) {
      g.row[j] = j < H * W ? static_cast<int32_t>(j / W) : 0;
      g.col[j] = j < H * W ? static_cast<int32_t>(j % W) : 0;
    }
    g.H = H;
    g.W = W;
  }
  return g;
}

// exp_row for H, W <= 16 with the bias assembled per chunk by permutes (see SmallGrid).
float exp_row_small_grid(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W) {
  const SmallGrid& g = small_grid(H, W);
  // bh/bw hold at least 16 readable floats (the caller pads them); lanes >= H/W are never indexed.
  const __m512 vh = _mm512_loadu_ps(bh), vw = _mm512_loadu_ps(bw);
  auto chunk = [&](int64_t i) {
    const __m512i r = _mm512_load_si512(g.row + i), c = _mm512_load_si512(g.col + i);
    return _mm512_add_ps(_mm512_permutexvar_ps(r, vh), _mm512_permutexvar_ps(c, vw));
  };
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_add_ps(_mm512_loadu_ps(s + i), chunk(i)));
  const __mmask16 tail = mask_first(n - i);
  if (tail) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, s + i), chunk(i)));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 acc = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_add_ps(_mm512_loadu_ps(s + i), chunk(i)), m));
    _mm512_storeu_ps(s + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (tail) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(tail, s + i), chunk(i)), m));
    _mm512_mask_storeu_ps(s + i, tail, e);
    acc = _mm512_mask_add_ps(acc, tail, acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

// Flat row: max, then e^(x - max) with the sum. Only the row's last partial vector is masked.
float exp_flat(float* s, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
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
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (i = 0; i + 32 <= n; i += 32) {
    __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
    __m512 b = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i + 16), m));
    _mm512_storeu_ps(s + i, a);
    _mm512_storeu_ps(s + i + 16, b);
    acc0 = _mm512_add_ps(acc0, a);
    acc1 = _mm512_add_ps(acc1, b);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
    _mm512_storeu_ps(s + i, a);
    acc0 = _mm512_add_ps(acc0, a);
  }
  if (i < n) {
    const __mmask16 k = mask_first(n - i);
    __m512 a = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), m));
    _mm512_mask_storeu_ps(s + i, k, a);
    acc0 = _mm512_mask_add_ps(acc0, k, acc0, a);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

float exp_row_avx512(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch) {
  if (!bh) return exp_flat(s, n);
  if (W % 16 == 0) {
    // Bias added per segment of W scores on the fly in both passes (max, then exp): nothing is
    // stored between the passes (SAM global attention: W = 64).
    __m512 vmax = _mm512_set1_ps(-__builtin_inff());
    for (int64_t kh = 0; kh < H; ++kh) {
      const float* row = s + kh * W;
      const __m512 b = _mm512_set1_ps(bh[kh]);
      for (int64_t kw = 0; kw < W; kw += 16)
        vmax = _mm512_max_ps(vmax, _mm512_add_ps(_mm512_loadu_ps(row + kw), _mm512_add_ps(b, _mm512_loadu_ps(bw + kw))));
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t kh = 0; kh < H; ++kh) {
      float* row = s + kh * W;
      const __m512 b = _mm512_sub_ps(_mm512_set1_ps(bh[kh]), m);  // bias and max folded together
      for (int64_t kw = 0; kw < W; kw += 16) {
        __m512 e = exp16(_mm512_add_ps(_mm512_loadu_ps(row + kw), _mm512_add_ps(b, _mm512_loadu_ps(bw + kw))));
        _mm512_storeu_ps(row + kw, e);
        acc = _mm512_add_ps(acc, e);
      }
    }
    return _mm512_reduce_add_ps(acc);
  }
  if (H <= 16 && W <= 16) return exp_row_small_grid(s, n, bh, bw, H, W);
  // Other W not a multiple of 16: materialise the row's bias
  // bias[kh*W + kw] = bh[kh] + bw[kw] in scratch with full-width stores, each segment's spill
  // into the next overwritten by the next segment, add it in one flat pass, then exp_flat.
  const int64_t wv = (W + 15) / 16;
  for (int64_t kh = 0; kh < H; ++kh) {
    const __m512 b = _mm512_set1_ps(bh[kh]);
    float* dst = scratch + kh * W;
    for (int64_t v = 0; v < wv; ++v) _mm512_storeu_ps(dst + 16 * v, _mm512_add_ps(b, _mm512_loadu_ps(bw + 16 * v)));
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(s + i, _mm512_add_ps(_mm512_loadu_ps(s + i), _mm512_loadu_ps(scratch + i)));
  for (; i < n; ++i) s[i] += scratch[i];
  return exp_flat(s, n);
}

}  // namespace vitrt::cpu::isa

#pragma GCC diagnostic pop
VITRT_AVX512_REGION_END
