// Mask post-processing kernels for "segment everything" on the GPU: many low-res logit planes are
// upscaled on the fly (never stored at full size) and reduced to what a filter needs -- pixel
// counts above two thresholds, the bounding box -- or to a bit-packed binary mask, which is then
// run-length encoded (column-major, as COCO's uncompressed RLE) on the device.
//
// The upscale is Sam.postprocess_masks: bilinear m x m -> S x S, crop the top-left
// input_h x input_w, bilinear to out_h x out_w (F.interpolate, align_corners=False), with every
// float operation of the CPU kernels (ops/cpu/interpolate.cpp, amg::LogitUpscaler): explicitly
// rounded products, fma only where they use std::fma. So a logit here is bit-identical to the
// host's, and so are counts, boxes and masks.
//
// Raw device pointers, launched on cuda::current_stream() without synchronising (except where a
// function says it copies to the host). Knows nothing of SAM models.
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// Sizes of the two-resize upscale of one logit plane.
struct MaskUpscale {
  int low_h = 0, low_w = 0;      // the planes' size (m x m for SAM)
  int img_size = 0;              // S: the first resize is to S x S
  int input_h = 0, input_w = 0;  // the top-left crop of the S x S plane that is kept
  int out_h = 0, out_w = 0;      // the second resize's size
};

// Per plane, of its upscaled logits v: counts of v > hi and of v > lo (each summed per row,
// cast to int16 -- wrapping like torch's .sum(-1, dtype=torch.int16) -- then summed in int32)
// and the inclusive box of v > thr.
struct MaskPlaneStats {
  int32_t above_hi = 0, above_lo = 0;
  int32_t x0 = 0, y0 = 0, x1 = -1, y1 = -1;  // x1 < 0: no pixel above thr
  bool empty() const { return x1 < 0; }
};

// Stats of n planes: plane j is planes[j] (device pointer to low_h * low_w values of dtype dt,
// F32 or BF16; the array `planes` itself in device memory). stats: device, n entries.
void upscaled_mask_stats(DType dt, const void* const* planes, int64_t n, const MaskUpscale& g, float thr, float hi,
                         float lo, MaskPlaneStats* stats);

// Bit-packed masks v > thr of n planes, for the RLE below: words (device) [n, ceil(out_h / 32),
// out_w], bit b of word (j, wy, x) is pixel (row 32 * wy + b, column x); rows past out_h are 0.
int64_t mask_words_per_plane(int h, int w);
void upscaled_mask_bits(DType dt, const void* const* planes, int64_t n, const MaskUpscale& g, float thr,
                        uint32_t* words);

// Where each h x w mask sits: at (x0, y0) in an H x W image of zeros (the crop's place).
struct MaskPlacement {
  int h = 0, w = 0, x0 = 0, y0 = 0, H = 0, W = 0;
};

// Column-major uncompressed RLE of n bit-packed masks (layout of upscaled_mask_bits) placed in
// their image: counts of alternating runs starting with zeros (a leading 0 when the first pixel
// is set), as segment_anything's mask_to_rle_pytorch(uncrop_masks(...)). Two steps, because
// the host must size the output:
//   rle_plan: starts (device, n + 1): mask j's counts will be [starts[j], starts[j+1]) of the
//             output; col_offsets (device, n * (w + 1) + 1) is working memory for rle_write.
//   rle_write: the counts (device, starts[n] of them, uint32).
// H * W must be below 2^32 (the counts are uint32).
int64_t rle_col_offsets_size(int64_t n, const MaskPlacement& p);
void rle_plan(const uint32_t* words, int64_t n, const MaskPlacement& p, int64_t* col_offsets, int64_t* starts);
void rle_write(const uint32_t* words, int64_t n, const MaskPlacement& p, const int64_t* col_offsets,
               const int64_t* starts, int64_t total, uint32_t* counts);

}  // namespace vitrt::cuda
