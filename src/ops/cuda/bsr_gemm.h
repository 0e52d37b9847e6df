// Block-sparse x dense linear on the GPU:
//   y[M, N] = act(x[M, K] W^T + bias[N]) + residual[M, N]
// W an [N, K] BSR matrix (vitrt/bsr.h layout: row_ptr, col_idx, [nnz, b, b] row-major blocks,
// b = 16, 32 or 64), i.e. PyTorch's nn.Linear weight with most b x b blocks pruned.
//
// Work split (both kernels): one CTA per (tile of 128 tokens, block-row of W). A block-row of W is
// one b-wide slice of output features, so the CTA owns a 128 x b tile of y outright: it walks the
// stored blocks of its block-row (row_ptr[r] .. row_ptr[r+1]), each time multiplying the x tile
// x[m0 .. m0+128, col*b .. col*b+b] by the b x b block, accumulates in registers and writes its
// tile once -- no atomics, no split-K, no zero-init pass. An empty block-row writes act(bias)
// (+ residual) without reading x at all.
//   - Tiles come in through a two-stage cp.async pipeline (the next block's x tile and W block load
//     while the current one is multiplied); rows past M are zero-filled, never read.
//   - CTAs are numbered (token tile, block-row) with the block-row fastest, so the CTAs resident
//     at one time share a few token tiles and each x tile is read from HBM about once and then
//     served from L2 to every block-row that has a block in its column. Within a token tile the
//     block-rows go in `row_order` (most stored blocks first, computed at upload) so the long
//     CTAs start early and the short ones fill the tail.
//   - The epilogue adds the bias, applies exact-erf GELU, stages the fp32 tile in shared memory
//     and writes it (plus the residual, rounded once) with coalesced 8/16-byte stores.
// bf16: tensor cores (mma.sync m16n8k16, ldmatrix from +16-byte-padded rows), fp32 accumulation,
//       bf16 or fp32 output.
// fp32: CUDA cores, exact fp32 FMA in k order within each block (no TF32), 8x(b/8) register tiles.
// Everything is enqueued on cuda::current_stream(); nothing allocates, so calls can be captured
// into a CUDA graph.
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// Device pointers of a BSR matrix that passed validate() on the host before it was uploaded.
struct BsrDeviceView {
  int64_t rows = 0, cols = 0;        // N, K
  int block = 0;                     // 16, 32 or 64
  const int32_t* row_ptr = nullptr;  // [rows / block + 1]
  const int32_t* col_idx = nullptr;  // [nnz]
  const void* values = nullptr;      // [nnz, block, block], each block row-major; bf16 or fp32 (per kernel)
  // [rows / block]: a permutation of the block-rows, the order in which they are scheduled within
  // a token tile (most stored blocks first); null = natural order.
  const int32_t* row_order = nullptr;
};

// bf16 tensor-core kernel. x: bf16 [M, K] row-major (K = w.cols), 16-byte aligned; w.values bf16;
// bias: bf16 [N] or null; residual: [M, N] of out_dtype or null; y: [M, N] of out_dtype (BF16 or
// F32), 16-byte aligned (residual too). Throws InvalidArgument on unsupported arguments.
void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, DType out_dtype, void* y);

// fp32 CUDA-core kernel: x fp32 [M, K], w.values fp32, bias fp32 [N] or null, residual fp32 [M, N]
// or null, y fp32 [M, N]; pointers 16-byte aligned.
void bsr_linear_f32(const float* x, int64_t M, const BsrDeviceView& w, const float* bias, bool gelu,
                    const float* residual, float* y);

}  // namespace vitrt::cuda
