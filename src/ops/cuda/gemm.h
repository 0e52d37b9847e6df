// Dense matrix products on the GPU through cuBLASLt, row-major as the rest of vitrt.
//
//   D[b] = alpha * A[b] @ op(B[b]) + C[b] + bias, then ReLU if asked.
//
// A is [M, K] (row stride lda), B is [N, K] when trans_b (PyTorch nn.Linear weight layout,
// row stride ldb) or [K, N] otherwise, C (the residual, beta = 1) and D are [M, N] (row stride
// ldd; C may be D itself). Bias is [N]. A and B have `dtype`; C, D and bias have out_dtype()
// (cuBLASLt's rule: the bias vector has D's type). Supported combinations:
//   F32  x F32  -> F32   strict fp32 (CUBLAS_COMPUTE_32F, never TF32);
//   BF16 x BF16 -> BF16  bf16 storage, fp32 accumulation and scaling;
//   BF16 x BF16 -> F32   the same products, fp32 C/D/bias (a float32 residual stream fed by
//                        bf16 activations and weights: the result is never rounded to bf16).
//
// Matmul descriptors, matrix layouts and the heuristic's algorithm are cached per shape, dtype,
// epilogue and pointer alignment, and each (device, stream) gets one 32 MiB workspace, allocated
// on its first GEMM. After a shape has been seen once a call allocates nothing and only enqueues
// work on cuda::current_stream(), so it can be captured into a CUDA graph (run every shape once
// before capturing; the first GEMM on a stream must not happen inside a capture).
#pragma once
#include <cstdint>
#include <optional>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

struct GemmArgs {
  DType dtype = DType::F32;  // F32 or BF16: A and B (and, unless d_dtype says otherwise, C, D, bias)
  // dtype of C, D and bias when it differs from `dtype` (only F32 with BF16 A/B); unset: `dtype`.
  std::optional<DType> d_dtype;
  DType out_dtype() const { return d_dtype ? *d_dtype : dtype; }
  int64_t M = 0, N = 0, K = 0;
  const void* a = nullptr;   // [M, K]
  const void* b = nullptr;   // [N, K] if trans_b, else [K, N]
  bool trans_b = false;
  void* d = nullptr;         // [M, N] output
  const void* c = nullptr;   // [M, N] added with beta = 1 (same layout as d), or null
  const void* bias = nullptr;  // [N] of out_dtype() or null (only with batch == 1)
  bool relu = false;         // ReLU after everything else (i.e. after C is added)
  // GELU, tanh form (cuBLASLt's GELU epilogue), after the bias; exclusive with relu and c. Within
  // ~5e-4 of the exact erf GELU, far below bf16's rounding: used for bf16 only (see ops_cuda.cpp).
  // With VITRT_GEMM_CUTLASS set, packed bf16 products with a bias run CUTLASS's kernel and the erf
  // form instead (gemm_cutlass.h).
  bool gelu_tanh = false;
  float alpha = 1.f;
  // Row strides in elements; 0 means packed (K for a, K or N for b, N for c/d).
  int64_t lda = 0, ldb = 0, ldd = 0;
  // Strided batch: `batch` products, operand b advanced by stride_* elements each time
  // (stride_b = 0 shares one B across the batch). C uses stride_c, or stride_d when it is
  // negative (stride_c = 0 adds one C to every product of the batch).
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0, stride_c = -1;
};

// Enqueues the product on cuda::current_stream(). Throws InvalidArgument on bad arguments and
// vitrt::Error naming the shape when cuBLASLt fails. Where cuBLASLt's heuristic offers no
// algorithm (e.g. for an operand pointer aligned to less than its kernels need) the product runs
// on gemm_simple instead, so every valid call computes.
void gemm(const GemmArgs& args);

// A plain tiled CUDA-core GEMM with the same contract as gemm() (fp32 accumulation, same
// epilogue order), in elementwise.cu because this header's gemm.cpp is host-compiled. The
// fallback for gemm(); slow, but simple and exact to fp32 rounding.
void gemm_simple(const GemmArgs& args);
// How many gemm() calls have used the fallback since the process started (tests print it).
int64_t gemm_fallback_calls();
// How many GEMM plans the autotuner has timed (first eager call of a large shape; see gemm.cpp).
int64_t gemm_autotuned_plans();

}  // namespace vitrt::cuda
