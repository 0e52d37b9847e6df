// ConvTranspose2d(kernel 2, stride 2) on NHWC bf16 tensors as one tensor-core kernel: the GEMM of
// the input pixels with the taps' weights, bias, erf GELU and the scatter into the 2x upsampled
// output in its epilogue (conv_transpose.cu). Launched on cuda::current_stream().
#pragma once
#include <cstdint>

namespace vitrt::cuda {

// Whether conv_transpose2x2_mma takes these sizes and pointers: Cin a multiple of 64, Cout a
// multiple of 8 that divides 128 with 4 Cout a multiple of 128 (32, 64, 128: SAM's 256 -> 64 -> 32
// upscaling), 16-byte aligned x, wt and out.
bool conv_transpose2x2_mma_supported(int64_t M, int64_t Cin, int64_t Cout, const void* x, const void* wt,
                                     const void* out);
// x [B, H, W, Cin] bf16, wt [4 Cout, Cin] bf16 = the PyTorch weight [Cin, Cout, 2, 2] permuted to
// (ky, kx, co, ci), bias [Cout] bf16 or null -> out [B, 2H, 2W, Cout] bf16; `gelu`: erf GELU (fast_erf.h) on
// the fp32 sum before the one rounding to bf16.
void conv_transpose2x2_mma(const void* x, const void* wt, const void* bias, void* out, int64_t B, int64_t H, int64_t W,
                           int64_t Cin, int64_t Cout, bool gelu);

// The same layer for Cin = 64, Cout = 32 (SAM's last upscaling), fused with the per-pixel products
// of its output with 4 vectors per image (SAM's masks = hyper_in @ upscaled):
//   out[b, v, oy, ox] = sum_c bf16(act(convT(x)[b, oy, ox, c] + bias[c])) * vecs[b, v, c]
// x [B, H, W, 64], wt as conv_transpose2x2_mma's, vecs [B, 4, 32], out [B, 4, 2H, 2W], all bf16; W a
// multiple of 64. The upscaled tensor is never written.
bool conv_transpose2x2_dot_supported(int64_t B, int64_t H, int64_t W, int64_t Cin, int64_t Cout, int64_t num_vecs,
                                     const void* x, const void* wt, const void* vecs, const void* out);
void conv_transpose2x2_gelu_dot(const void* x, const void* wt, const void* bias, const void* vecs, void* out, int64_t B,
                                int64_t H, int64_t W, bool gelu);

}  // namespace vitrt::cuda
