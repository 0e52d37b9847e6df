// Linear and bilinear resampling with PyTorch's F.interpolate(align_corners=False) conventions,
// index arithmetic and weighting done in float exactly as PyTorch's generic CPU kernel does for
// float tensors: results are bit-identical to torch (checked on SAM's 256 -> 1024 and
// 1024 -> 683x1024 mask resizes), so thresholded masks agree. One exception: for outputs with
// out_h + out_w <= 128 torch switches to its channels-last kernel, which rounds in another order
// (differences of an ulp or so).
#pragma once
#include <cstdint>
#include <vector>

namespace vitrt::cpu {

// The source taps of one output coordinate, as PyTorch's compute_source_index_and_lambda:
// out[d] = w0 * in[i0] + w1 * in[i1].
struct LinearTaps {
  int64_t i0, i1;
  float w0, w1;
};
// The taps of every output coordinate of an in -> out linear resize (align_corners=False, output
// size given), in PyTorch's float arithmetic bit for bit. Also what SAM's mask upscaler builds on.
std::vector<LinearTaps> linear_taps(int64_t in, int64_t out);

// F.interpolate(mode="linear") along the rows of x [L, C] -> out [new_len, C] (what SAM's
// get_rel_pos does to a relative-position table through a [1, C, L] view).
void interpolate_linear_rows(const float* x, float* out, int64_t L, int64_t C, int64_t new_len);

// F.interpolate(mode="bilinear", antialias=False) of planes x [N, H, W] -> out [N, oh, ow].
void resize_bilinear(const float* x, float* out, int64_t N, int64_t H, int64_t W, int64_t oh, int64_t ow);
// The top-left keep_h x keep_w corner of that resize, out [N, keep_h, keep_w], without computing the
// rest (SAM upsamples to 1024 x 1024 and then crops to the resized image). Same values, bit for bit.
void resize_bilinear_cropped(const float* x, float* out, int64_t N, int64_t H, int64_t W, int64_t oh, int64_t ow,
                             int64_t keep_h, int64_t keep_w);

}  // namespace vitrt::cpu
