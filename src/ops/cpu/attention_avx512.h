// AVX-512 building blocks of the fused attention (attention.cpp): panel packing and two
// register-blocked micro-kernels, Q K^T and P V. Used only when the CPU has AVX-512 (checked at
// run time; the library baseline is AVX2) — elsewhere attention runs on oneDNN sgemm calls.
//
// Why not sgemm here: every sgemm call re-packs its B operand (K^T, resp. V: 1 MB per head at
// 64x64 tokens) and does so again for every block of query rows; packing each head once and
// running fixed-shape kernels on the packed panels gets closer to the machine's FMA peak.
#pragma once
#include <cstdint>

namespace vitrt::cpu::avx512 {

// True when the CPU supports the AVX-512 subsets used here (and VITRT_NO_AVX512 is not set).
bool available();

// Number of 16-column panels for n columns.
inline int64_t panels(int64_t n) { return (n + 15) / 16; }

// Packs K^T of one head: k rows [nk, hd] (row stride ldk) into kt[p][c][16] (p < panels(nk),
// c < hd), column j of K^T (= key j) at kt[j / 16][c][j % 16]; columns past nk are zero.
void pack_kt(const float* k, int64_t ldk, int64_t nk, int64_t hd, float* kt);
// Packs V of one head: v rows [nk, hd] (row stride ldv) into a contiguous [nk, hd] array.
void pack_v(const float* v, int64_t ldv, int64_t nk, int64_t hd, float* vp);

// S[rows, 16 * npanels] = scale * Q[rows, hd] K^T, K^T packed by pack_kt; S row stride lds
// (>= 16 * npanels). Columns past the true key count come out as 0.
void qk(const float* q, int64_t ldq, int64_t rows, const float* kt, int64_t npanels, int64_t hd, float scale,
        float* s, int64_t lds);

// Head sizes pv() handles: multiples of 16 up to 128.
inline bool pv_supported(int64_t hd) { return hd % 16 == 0 && hd >= 16 && hd <= 128; }
// O[rows, hd] = inv_sum[i] * (P[rows, nk] V[nk, hd]), V packed by pack_v; P row stride ldp,
// O row stride ldo.
void pv(const float* p, int64_t ldp, int64_t rows, const float* vp, int64_t nk, int64_t hd, const float* inv_sum,
        float* o, int64_t ldo);

}  // namespace vitrt::cpu::avx512
