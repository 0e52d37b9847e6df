// Block-sparse x dense products on the CPU, fp32: y[M, N] = act(x[M, K] W^T + bias[N]) with W an
// [N, K] BSR matrix (PyTorch nn.Linear layout). Used by ops::linear_bsr for CPU tensors and as the
// reference the GPU kernels are tested against.
#pragma once
#include <cstdint>

#include "ops/cpu/gemm.h"
#include "vitrt/bsr.h"

namespace vitrt::cpu {

// Which micro-kernels bsr_linear may use: Best = AVX-512 (12 x 32 tiles) when the CPU has it
// (and VITRT_NO_AVX512 is unset), else AVX2; Avx2 forces the AVX2 path (tests cover both).
enum class BsrIsa : uint8_t { Best, Avx2 };

// The fast kernel: AVX-512 12x32 or AVX2/FMA 6x16 register tiles accumulated over every stored
// block of a block-row (weights transposed once per call into column panels). Parallel (OpenMP,
// dynamic) over 48-row tiles of x, each covering all block-rows so that ragged densities cost
// every task the same; when M has few tiles the block-rows are also split into groups of equal
// stored-block count. x, y row-major with leading dimensions K and N; w must have passed
// validate() and have w.cols == K, w.rows == N. bias may be null. F32 or BF16 values (BF16 is
// widened once per call).
void bsr_linear(const float* x, const BsrMatrix& w, const float* bias, Act act, float* y, int64_t M,
                BsrIsa isa = BsrIsa::Best);

// The obviously-right version: unpack to dense and run the dense oneDNN linear.
void bsr_linear_reference(const float* x, const BsrMatrix& w, const float* bias, Act act, float* y, int64_t M);

}  // namespace vitrt::cpu
