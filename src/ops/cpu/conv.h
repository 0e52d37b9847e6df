// Convolutions on NHWC tensors, lowered to GEMMs.
#pragma once
#include <cstdint>

namespace vitrt::cpu {

// out [B, Ho, Wo, Cout] = conv2d(x [B, H, W, Cin], w [Cout, Cin, kh, kw] (PyTorch layout))
// + bias[Cout] (nullable), square stride, zero padding `pad` on all sides.
// Ho = (H + 2 pad - kh) / stride + 1, likewise Wo.
void conv2d_nhwc(const float* x, const float* w, const float* bias, float* out, int64_t B, int64_t H,
                 int64_t W, int64_t Cin, int64_t Cout, int64_t kh, int64_t kw, int64_t stride, int64_t pad);

// ConvTranspose2d(kernel 2, stride 2): x [B, H, W, Cin], w [Cin, Cout, 2, 2] (PyTorch layout),
// bias [Cout] (nullable) -> out [B, 2H, 2W, Cout].
void conv_transpose2x2_nhwc(const float* x, const float* w, const float* bias, float* out, int64_t B,
                            int64_t H, int64_t W, int64_t Cin, int64_t Cout);

}  // namespace vitrt::cpu
