// Tensor-level operators for CUDA tensors: the same names, shapes and semantics as ops.h, for
// float32 and bfloat16 tensors (bf16 storage, fp32 math inside; every operand of one call has
// the same dtype, except where an output dtype is given: linear / conv2d_nhwc (bf16 in, f32
// out) and layer_norm (any mix of f32 / bf16 x, weights and output); the pure data movers --
// permute, cat, window_(un)partition -- take any dtype).
// ops.cpp dispatches here with `if (x.is_cuda()) return cuda_impl::f(...)`. Each function checks
// its arguments itself (InvalidArgument naming the operator, as ops.cpp does), allocates its
// output on the device from the stream-ordered pool and enqueues kernels on
// cuda::current_stream() without synchronising; results are ready when the stream is (a
// Tensor::to(Device::CPU) waits for it).
//
// In a build without CUDA these all throw vitrt::Error, except cast() on CPU tensors.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/ops.h"
#include "vitrt/image.h"
#include "vitrt/tensor.h"

namespace vitrt::ops::cuda_impl {

// dtype conversion on either device: F32 <-> BF16 (round to nearest even) on CPU and CUDA; on
// the CPU also F16 / F64 -> F32 (and -> BF16 through F32). Returns x itself, no copy, when it
// already has dtype `to`; otherwise a new tensor on x's device.
Tensor cast(const Tensor& x, DType to);

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias = nullptr, Activation act = Activation::None,
              const Tensor* residual = nullptr, std::optional<DType> out_dtype = std::nullopt);
void linear_add_(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias = nullptr);
Tensor linear_broadcast_add(const Tensor& x, const Tensor& w, const Tensor& c);
// The fused kernel of ops::conv_transpose2x2_dot where it applies; an undefined tensor otherwise
// (the caller then composes the two operators).
Tensor conv_transpose2x2_dot(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor& vecs);
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b = false);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  std::optional<DType> out_dtype = std::nullopt, Activation act = Activation::None);

void add_(Tensor& x, const Tensor& y);
Tensor add(const Tensor& x, const Tensor& y);
void scale_(Tensor& x, float s);
void gelu_(Tensor& x);
void relu_(Tensor& x);
void softmax_lastdim_(Tensor& x);

Tensor permute(const Tensor& x, const std::vector<int>& perm);  // up to 6 dims
Tensor cat(const std::vector<Tensor>& xs, int dim);

Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, int stride, int pad,
                   std::optional<DType> out_dtype = std::nullopt);
Tensor conv_transpose2x2_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act = Activation::None);

Tensor window_partition(const Tensor& x, int ws);
Tensor window_unpartition(const Tensor& windows, int ws, int64_t H, int64_t W);

Tensor interpolate_linear_rows(const Tensor& x, int64_t new_len);
Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w);

// ---- SAM pre- and post-processing on the GPU ----

// Pillow-exact antialiased bilinear resize (byte-identical to resize_longest_side's CPU kernel)
// of an 8-bit image tensor [H, W, C] (uint8, CUDA, C = 1..4) -> [out_h, out_w, C].
Tensor resize_antialias_u8(const Tensor& image, int out_h, int out_w);
// [h, w, C] uint8 CUDA -> [1, S, S, C] of dtype `dt`: (v - mean[c]) / std[c] in fp32 in the
// top-left h x w corner, zeros elsewhere (SamPredictor's normalise_and_pad).
Tensor normalize_pad(const Tensor& image, int S, const float* mean, const float* std, DType dt);
// The whole of SamPredictor::set_image's preprocessing on the GPU: uploads the RGB image,
// resizes its longest side to S (ResizeLongestSide), normalises and pads. Returns the encoder
// input [1, S, S, 3] (NHWC, dtype dt, CUDA); *input_h / *input_w (if given) receive the resized size.
Tensor preprocess_image(const Image& rgb, int S, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                        DType dt, int* input_h = nullptr, int* input_w = nullptr);
// Sam.postprocess_masks + threshold, as predictor.cpp's postprocess: low_res [..., m, m]
// (F32 or BF16, CUDA) bilinear to S x S (fp32), crop to the top-left input_h x input_w, bilinear
// to out_h x out_w. Returns the masks [..., out_h, out_w] uint8 (logit > 0) and, when `logits`
// is non-null, stores the float32 logits of the same shape there.
Tensor postprocess_masks(const Tensor& low_res, int64_t S, int64_t input_h, int64_t input_w, int64_t out_h,
                         int64_t out_w, Tensor* logits = nullptr);

}  // namespace vitrt::ops::cuda_impl
