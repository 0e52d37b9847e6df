// Block-sparse x dense GEMM on the GPU (first version, compile-tested only so far):
//   y[M, N] = act(x[M, K] W^T + bias[N]), W an [N, K] BSR matrix (vitrt/bsr.h layout) with bf16
// values, x / y / bias bf16, fp32 accumulation on tensor cores (mma.sync m16n8k16). One CTA per
// (64-row tile of x, block-row of W); the hardware scheduler balances block-rows of different
// density across SMs because there are many more CTAs than SMs at ViT token counts.
// Launched on cuda::current_stream(). Not yet wired into ops::linear_bsr.
#pragma once
#include <cstdint>

namespace vitrt::cuda {

// Device pointers of a validated BSR matrix (validate() on the host copy before uploading).
struct BsrDeviceView {
  int64_t rows = 0, cols = 0;  // N, K
  int block = 0;               // 16, 32 or 64
  const int32_t* row_ptr = nullptr;  // [rows / block + 1]
  const int32_t* col_idx = nullptr;  // [nnz]
  const void* values = nullptr;      // bf16 [nnz, block, block], each block row-major
};

// x: bf16 [M, K] row-major, 16-byte aligned; bias: bf16 [N] or null; y: bf16 [M, N].
void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y);

}  // namespace vitrt::cuda
