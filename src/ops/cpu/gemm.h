// Dense matrix products on the CPU, through oneDNN. fp32 throughout: oneDNN is told
// fpmath_mode::strict so it never trades precision for speed (no bf16/tf32 inside).
#pragma once
#include <cstdint>

namespace vitrt::cpu {

enum class Act : uint8_t { None, GELU /* exact erf */, ReLU };

// Row-major y[M, N] = act(x[M, K] @ W + bias[N]) + residual[M, N].
// W is [N, K] (PyTorch nn.Linear layout) when w_is_nk, else [K, N]. bias/residual may be null.
// The activation is applied before the residual is added. Multi-threaded (OpenMP inside oneDNN).
// oneDNN primitives are cached by shape and epilogue, so repeated shapes cost no set-up.
void gemm_epilogue(const float* x, const float* w, bool w_is_nk, float* y, int64_t M, int64_t N,
                   int64_t K, const float* bias, Act act, const float* residual);

// Batched c[b] = a[b] @ op(b[b]): a [B, M, K], b [B, K, N] (or [B, N, K] if transpose_b),
// c [B, M, N]. Multi-threaded.
void batched_matmul(const float* a, const float* b, float* c, int64_t batch, int64_t M, int64_t N,
                    int64_t K, bool transpose_b);

// Row-major C = alpha * op(A) op(B) + beta * C with leading dimensions, BLAS style.
// Runs single-threaded when called from inside an OpenMP parallel region (oneDNN detects
// that), so kernels that parallelise over their own tasks can call it per task.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc);

// The machine's reference rate: times a plain oneDNN sgemm (C = A B, row-major, random data)
// of the given size `reps` times after one warm-up call and returns GFLOP/s (2*M*N*K per call).
double measure_sgemm_gflops(int64_t M, int64_t N, int64_t K, int reps);

}  // namespace vitrt::cpu
