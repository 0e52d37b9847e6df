// AVX-512 attention micro-kernels (see attention_avx512.h). Everything after the pragma below is
// compiled for AVX-512 and only reached after available() said yes. No library templates are
// instantiated in this file: an AVX-512 copy of, say, std::min could otherwise be picked by the
// linker for the whole program and crash on CPUs without AVX-512.
#include "ops/cpu/attention_avx512.h"
#include "ops/cpu/avx512_region.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>

namespace vitrt::cpu::avx512 {

bool available() {
  static const bool ok = [] {
    const char* off = std::getenv("VITRT_NO_AVX512");
    if (off && off[0] != '0') return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  return ok;
}

}  // namespace vitrt::cpu::avx512

VITRT_AVX512_REGION_BEGIN
// GCC 12's AVX-512 intrinsics use a self-initialised "undefined" vector internally, which -Wall
// reports as uninitialised once inlined here (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vitrt::cpu::avx512 {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- Q K^T: an MR x (16*NV) tile of scores, reduction over the head dimension.
// Q values are broadcast from their rows (stride ldq); K^T comes from NV adjacent 16-column
// panels (panel stride 16*hd). MR*NV accumulators stay in registers for the whole reduction.
template <int MR, int NV>
void qk_tile(const float* q, int64_t ldq, const float* kt, int64_t hd, float scale, float* s, int64_t lds) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const int64_t pstride = 16 * hd;
  for (int64_t c = 0; c < hd; ++c) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(kt + v * pstride + c * 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(q[i * ldq + c]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + i * lds + 16 * v, _mm512_mul_ps(acc[i][v], sc));
}

constexpr int kQkMR = 8, kQkNV = 3;  // 24 accumulators + 3 panel vectors + 1 broadcast
using QkFn = void (*)(const float*, int64_t, const float*, int64_t, float, float*, int64_t);

template <int MR>
constexpr QkFn qk_for_nv(int nv) {
  return nv == 1 ? qk_tile<MR, 1> : nv == 2 ? qk_tile<MR, 2> : qk_tile<MR, 3>;
}
QkFn qk_fn(int mr, int nv) {
  switch (mr) {
    case 1: return qk_for_nv<1>(nv);
    case 2: return qk_for_nv<2>(nv);
    case 3: return qk_for_nv<3>(nv);
    case 4: return qk_for_nv<4>(nv);
    case 5: return qk_for_nv<5>(nv);
    case 6: return qk_for_nv<6>(nv);
    case 7: return qk_for_nv<7>(nv);
    default: return qk_for_nv<8>(nv);
  }
}

// ---- P V: an MR x hd tile of output (hd = 16*DV), reduction over keys [j0, j1).
// first: start from zero, else accumulate onto what o holds (the previous key chunk's sum).
template <int MR, int DV>
void pv_tile(const float* p, int64_t ldp, const float* vp, int64_t j0, int64_t j1, float* o, int64_t ldo,
             bool first) {
  constexpr int64_t hd = 16 * DV;
  __m512 acc[MR][DV];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int d = 0; d < DV; ++d) acc[i][d] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + i * ldo + 16 * d);
  for (int64_t j = j0; j < j1; ++j) {
    __m512 b[DV];
#pragma GCC unroll 8
    for (int d = 0; d < DV; ++d) b[d] = _mm512_loadu_ps(vp + j * hd + 16 * d);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(p[i * ldp + j]);
#pragma GCC unroll 8
      for (int d = 0; d < DV; ++d) acc[i][d] = _mm512_fmadd_ps(a, b[d], acc[i][d]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int d = 0; d < DV; ++d) _mm512_storeu_ps(o + i * ldo + 16 * d, acc[i][d]);
}

using PvFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);

// Rows per P V tile for a head of 16*DV columns: as many as keep MR*DV <= 24 accumulators.
constexpr int pv_mr(int dv) { return dv >= 7 ? 3 : dv == 6 ? 4 : dv == 5 ? 5 : 24 / dv > 12 ? 12 : 24 / dv; }

template <int DV>
PvFn pv_for_mr(int mr) {
  switch (mr) {
    case 1: return pv_tile<1, DV>;
    case 2: return pv_tile<2, DV>;
    case 3: return pv_tile<3, DV>;
    case 4: if constexpr (pv_mr(DV) >= 4) return pv_tile<4, DV>; else break;
    case 5: if constexpr (pv_mr(DV) >= 5) return pv_tile<5, DV>; else break;
    case 6: if constexpr (pv_mr(DV) >= 6) return pv_tile<6, DV>; else break;
    case 7: if constexpr (pv_mr(DV) >= 7) return pv_tile<7, DV>; else break;
    case 8: if constexpr (pv_mr(DV) >= 8) return pv_tile<8, DV>; else break;
    case 9: if constexpr (pv_mr(DV) >= 9) return pv_tile<9, DV>; else break;
    case 10: if constexpr (pv_mr(DV) >= 10) return pv_tile<10, DV>; else break;
    case 11: if constexpr (pv_mr(DV) >= 11) return pv_tile<11, DV>; else break;
    case 12: if constexpr (pv_mr(DV) >= 12) return pv_tile<12, DV>; else break;
    default: break;
  }
  return nullptr;
}

PvFn pv_fn(int dv, int mr) {
  switch (dv) {
    case 1: return pv_for_mr<1>(mr);
    case 2: return pv_for_mr<2>(mr);
    case 3: return pv_for_mr<3>(mr);
    case 4: return pv_for_mr<4>(mr);
    case 5: return pv_for_mr<5>(mr);
    case 6: return pv_for_mr<6>(mr);
    case 7: return pv_for_mr<7>(mr);
    default: return pv_for_mr<8>(mr);
  }
}

int pv_rows(int dv) {
  switch (dv) {
    case 1: return pv_mr(1);
    case 2: return pv_mr(2);
    case 3: return pv_mr(3);
    case 4: return pv_mr(4);
    case 5: return pv_mr(5);
    case 6: return pv_mr(6);
    case 7: return pv_mr(7);
    default: return pv_mr(8);
  }
}

}  // namespace

void pack_kt(const float* k, int64_t ldk, int64_t nk, int64_t hd, float* kt) {
  const int64_t np = panels(nk);
  for (int64_t p = 0; p < np; ++p) {
    float* dst = kt + p * 16 * hd;
    const int64_t j0 = p * 16, nj = min64(16, nk - j0);
    if (nj < 16) std::memset(dst, 0, static_cast<size_t>(16 * hd) * sizeof(float));
    // Transpose a [nj, hd] slab of K into [hd, 16].
    for (int64_t jj = 0; jj < nj; ++jj) {
      const float* src = k + (j0 + jj) * ldk;
      for (int64_t c = 0; c < hd; ++c) dst[c * 16 + jj] = src[c];
    }
  }
}

void pack_v(const float* v, int64_t ldv, int64_t nk, int64_t hd, float* vp) {
  for (int64_t j = 0; j < nk; ++j) std::memcpy(vp + j * hd, v + j * ldv, static_cast<size_t>(hd) * sizeof(float));
}

void qk(const float* q, int64_t ldq, int64_t rows, const float* kt, int64_t npanels, int64_t hd, float scale,
        float* s, int64_t lds) {
  // Column tiles outside, row tiles inside: the 3 panels of a column tile (12 KB at hd 64) stay
  // in L1 while every query row of the block passes over them.
  for (int64_t p0 = 0; p0 < npanels; p0 += kQkNV) {
    const int nv = static_cast<int>(min64(kQkNV, npanels - p0));
    const float* ktp = kt + p0 * 16 * hd;
    for (int64_t i0 = 0; i0 < rows; i0 += kQkMR) {
      const int mr = static_cast<int>(min64(kQkMR, rows - i0));
      qk_fn(mr, nv)(q + i0 * ldq, ldq, ktp, hd, scale, s + i0 * lds + p0 * 16, lds);
    }
  }
}

void pv(const float* p, int64_t ldp, int64_t rows, const float* vp, int64_t nk, int64_t hd, const float* inv_sum,
        float* o, int64_t ldo) {
  const int dv = static_cast<int>(hd / 16);
  const int mr_max = pv_rows(dv);
  // Keys in chunks whose V rows (kChunk * hd floats: 64 KB at hd 64) stay cached while every
  // row tile of the block uses them; tiles carry their partial sums in o between chunks.
  constexpr int64_t kChunk = 256;
  for (int64_t j0 = 0; j0 < nk; j0 += kChunk) {
    const int64_t j1 = min64(nk, j0 + kChunk);
    for (int64_t i0 = 0; i0 < rows; i0 += mr_max) {
      const int mr = static_cast<int>(min64(mr_max, rows - i0));
      pv_fn(dv, mr)(p + i0 * ldp, ldp, vp, j0, j1, o + i0 * ldo, ldo, j0 == 0);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 f = _mm512_set1_ps(inv_sum[i]);
    float* orow = o + i * ldo;
    for (int64_t d = 0; d < hd; d += 16) _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), f));
  }
}

}  // namespace vitrt::cpu::avx512

#pragma GCC diagnostic pop
VITRT_AVX512_REGION_END
