// Linear / bilinear resampling on the GPU with PyTorch's align_corners=False index math, float
// for float the same operations as the CPU kernels in ops/cpu/interpolate.cpp (explicitly
// rounded products, no contraction into FMAs except where the CPU code uses std::fma), so
// float32 results are bit-identical to the CPU path and mask thresholds agree.
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// F.interpolate(mode="linear") along the first dim: x [L, C] -> out [new_len, C], dtype dt.
void interpolate_linear_rows(DType dt, const void* x, void* out, int64_t L, int64_t C, int64_t new_len);

// F.interpolate(mode="bilinear", antialias=False) on N planes: plane n of the input is
// x + n * plane_stride, row y of it at + y * row_stride (elements; lets a crop be read in place),
// H x W used; out is [N, oh, ow] packed. in_dt / out_dt are F32 or BF16 (math in fp32). When
// mask is non-null it also receives mask[i] = out value > 0 (uint8 0/1); out may then be null.
void resize_bilinear(DType in_dt, const void* x, int64_t N, int64_t H, int64_t W, int64_t plane_stride,
                     int64_t row_stride, DType out_dt, void* out, int64_t oh, int64_t ow, uint8_t* mask = nullptr);

// Sam.postprocess_masks + threshold in one pass: low [N, mh, mw] (in_dt F32 or BF16) bilinear to
// S x S, the top-left input_h x input_w crop bilinear to oh x ow, without the S x S intermediate;
// float32 logits (if non-null) and uint8 masks (logit > 0, if non-null), [N, oh, ow]. The same
// values, bit for bit, as resize_bilinear twice through an fp32 [N, S, S] buffer.
void upscale_crop_resize(DType in_dt, const void* low, int64_t N, int64_t mh, int64_t mw, int64_t S, int64_t input_h,
                         int64_t input_w, float* logits, uint8_t* mask, int64_t oh, int64_t ow);

}  // namespace vitrt::cuda
