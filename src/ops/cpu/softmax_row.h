// The inner loop of attention and softmax: one row of scores -> unnormalised exponentials.
// Two implementations, chosen once at run time: AVX2 (the library's baseline, x86-64-v3) and
// AVX-512 where the CPU has it (twice the lanes for the exp, which is a visible share of
// attention time: at head_dim 64 a score costs 256 GEMM flops, i.e. only ~4 cycles of FMA work).
//
// AMD Zen cores execute masked vector stores slowly (many cycles each), so the loops below store
// with full-width unmasked stores everywhere except the final tail of a row.
#pragma once
#include <cstdint>

namespace vitrt::cpu {

// s[0..n): if bh is non-null (then bw too, and n == H * W) first adds the decomposed bias
// s[kh * W + kw] += bh[kh] + bw[kw]; then replaces s[i] by exp(s[i] - max(s)) and returns the
// sum of the new values. With a bias, bh and bw must stay readable 16 floats past their H, resp.
// W entries (full-vector loads), and `scratch` must hold n + 16 floats.
float exp_row(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch);

namespace isa {
float exp_row_avx2(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch);
float exp_row_avx512(float* s, int64_t n, const float* bh, const float* bw, int64_t H, int64_t W, float* scratch);
}  // namespace isa

}  // namespace vitrt::cpu
