// Data-movement kernels on the GPU: permute, concatenation, SAM's window partition, im2col for
// convolutions and the 2x2 transposed-convolution scatter. The pure copies work on any dtype by
// element size (1, 2, 4 or 8 bytes); the ones that add take F32 or BF16. Launched on
// cuda::current_stream().
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// out = x.permute(perm).contiguous(), x of `shape` (up to 6 dims).
void permute(size_t elem_size, const void* x, void* out, const std::vector<int64_t>& shape,
             const std::vector<int>& perm);
// Copies x viewed as [outer, cols] into columns [col_offset, col_offset + cols) of out viewed as
// [outer, total_cols] (one input of a concatenation).
void copy_columns(size_t elem_size, const void* x, void* out, int64_t outer, int64_t cols, int64_t total_cols,
                  int64_t col_offset);
// x [B, H, W, C] -> [B * nh * nw, ws, ws, C], zero padding at bottom/right (as cpu::window_partition).
void window_partition(size_t elem_size, const void* x, void* out, int64_t B, int64_t H, int64_t W, int64_t C,
                      int64_t ws);
// windows [B * nh * nw, ws, ws, C] -> [B, H, W, C], padding dropped.
void window_unpartition(size_t elem_size, const void* windows, void* out, int64_t B, int64_t H, int64_t W, int64_t C,
                        int64_t ws);
// Columns for a convolution as a GEMM: x [B, H, W, Cin] NHWC -> col [B*Ho*Wo, Cin*kh*kw] with
// column index (ci * kh + ky) * kw + kx, the order of a PyTorch weight [Cout, Cin, kh, kw] read
// as [Cout, Cin*kh*kw], so the weight needs no reordering. Zero outside the image.
void im2col_nhwc(size_t elem_size, const void* x, void* col, int64_t B, int64_t H, int64_t W, int64_t Cin,
                 int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t Ho, int64_t Wo);
// The same columns in tap-major order, k = (ky * kw + kx) * Cin + ci (see im2col_taps.h): coalesced
// and 16-byte vectorised where Cin allows; pair it with the weight permuted to [Cout, kh, kw, Cin].
// Every size must fit in 32 bits.
void im2col_nhwc_taps(size_t elem_size, const void* x, void* col, int64_t B, int64_t H, int64_t W, int64_t Cin,
                      int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t Ho, int64_t Wo);
// ConvTranspose2d(k=2, s=2) scatter: y [B*H*W, Cout*4] (column co*4 + ky*2 + kx, the GEMM of x
// with the PyTorch weight [Cin, Cout, 2, 2]) -> out [B, 2H, 2W, Cout] + bias[Cout] (bias may be null),
// then the erf GELU when `gelu` (on the fp32 sum, before the store's rounding; bf16: fast_erf.h's erf).
void conv_transpose2x2_scatter(DType dt, const void* y, const void* bias, void* out, int64_t B, int64_t H, int64_t W,
                               int64_t Cout, bool gelu = false);

}  // namespace vitrt::cuda
