// Bilinear resampling of 8-bit images that reproduces Pillow's Image.resize(..., BILINEAR) byte
// for byte (Pillow 13, the reference environment's; see the pass-order note in the .cpp). SAM's reference preprocessing (ResizeLongestSide.apply_image) resizes a PIL image
// through torchvision, which lands in exactly that Pillow code, so matching it bit-exactly keeps
// the encoder input identical to the Python pipeline.
#pragma once
#include <cstdint>

#include "vitrt/image.h"

#include <vector>

namespace vitrt::cpu {

// Pillow's fixed point: 32 bits minus 8 for the pixel value minus 2 of headroom for filters with
// negative lobes.
constexpr int kResizePrecisionBits = 32 - 8 - 2;

// Per output position along one axis: the first source index, how many source taps, and their
// weights (ksize slots each, fixed point), computed as Pillow does (double, normalised per output
// pixel, rounded half away from zero). The CUDA resize (ops/cuda/image.cu) uploads these same
// coefficients, so both backends resample with identical weights.
struct ResizeCoefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};
ResizeCoefficients resize_coefficients(int in_size, int out_size);

// src: src_h x src_w x channels interleaved, dst: dst_h x dst_w x channels. Channels (1..4) are
// filtered independently (Pillow's L / RGB / RGBX / CMYK paths; Pillow premultiplies RGBA first,
// which this does not do). When downscaling the filter is widened by the scale (antialiasing).
void resize_bilinear_antialias_u8(const uint8_t* src, int src_w, int src_h, int channels,
                                  uint8_t* dst, int dst_w, int dst_h);

// The window [x0, x0 + out_w) x [y0, y0 + out_h) of that dst_w x dst_h resize, into dst (out_h x
// out_w x channels): the same bytes as the whole resize followed by a crop, with only the window's
// pixels computed (and only the source rows / columns that feed them). torchvision's Resize then
// CenterCrop keeps about 60% of the resized pixels.
void resize_bilinear_antialias_u8_crop(const uint8_t* src, int src_w, int src_h, int channels, int dst_w, int dst_h,
                                       int x0, int y0, int out_w, int out_h, uint8_t* dst);

}  // namespace vitrt::cpu

namespace vitrt {

// segment_anything's ResizeLongestSide.get_preprocess_shape: scale = target / max(h, w),
// new side = int(side * scale + 0.5), in double precision as Python computes it.
void longest_side_shape(int width, int height, int target_length, int* new_width, int* new_height);

// Resizes so that the longer side equals target_length (ResizeLongestSide.apply_image).
Image resize_longest_side(const Image& image, int target_length);

}  // namespace vitrt
