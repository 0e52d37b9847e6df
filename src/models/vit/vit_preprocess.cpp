// torchvision's ImageNet eval transform on a PIL image (ViT_B_16_Weights.IMAGENET1K_V1.transforms:
// Resize(256, bilinear, antialias) -> CenterCrop(224) -> ToTensor -> Normalize), byte-exact up to
// the final float32 arithmetic, which is the same sequence of correctly rounded operations.
#include <algorithm>
#include <cmath>

#include "ops/cpu/resize_antialias.h"
#include "vitrt/error.h"
#include "vitrt/vit.h"

namespace vitrt {

namespace {
// torchvision.transforms.functional: _compute_resized_output_size for size=[s]: the short side
// becomes s and the long side int(s * long / short) (Python true division, truncated).
void shorter_side_shape(int width, int height, int size, int* new_width, int* new_height) {
  const int short_side = std::min(width, height), long_side = std::max(width, height);
  const int new_long =
      static_cast<int>(static_cast<double>(static_cast<int64_t>(size) * long_side) / static_cast<double>(short_side));
  *new_width = width <= height ? size : new_long;
  *new_height = width <= height ? new_long : size;
}

// center_crop: int(round((size - crop) / 2.0)); Python's round() is round-half-to-even, which is
// what nearbyint does in the default rounding mode. (size - crop) / 2.0 is exact.
int center_crop_offset(int size, int crop) {
  return static_cast<int>(std::nearbyint(static_cast<double>(size - crop) / 2.0));
}
}  // namespace

Image vit_resize_and_crop(const Image& rgb, int resize_size, int crop_size) {
  VITRT_CHECK(!rgb.empty(), ImageError, "cannot classify an empty image (", rgb.width, "x", rgb.height, ")");
  VITRT_CHECK(rgb.channels == 3 && rgb.width > 0 && rgb.height > 0 &&
                  rgb.pixels.size() == static_cast<size_t>(rgb.width) * rgb.height * 3,
              ImageError, "expected an RGB image with ", rgb.width, "x", rgb.height, "x3 bytes, got ",
              rgb.pixels.size(), " bytes in ", rgb.channels, " channel(s)");
  VITRT_CHECK(crop_size >= 1 && resize_size >= crop_size, InvalidArgument, "ViT preprocessing needs 1 <= crop (",
              crop_size, ") <= resize (", resize_size, ")");
  int w = 0, h = 0;
  shorter_side_shape(rgb.width, rgb.height, resize_size, &w, &h);
  // resize_size >= crop_size keeps both sides >= crop_size, so torchvision's padding never applies.
  // (When the size already matches, torchvision returns the image unchanged: the resize copies.)
  const int top = center_crop_offset(h, crop_size), left = center_crop_offset(w, crop_size);
  Image crop;
  crop.width = crop.height = crop_size;
  crop.pixels.resize(static_cast<size_t>(crop_size) * crop_size * 3);
  // Only the crop of the resized image is computed: the same bytes, ~40% less work.
  cpu::resize_bilinear_antialias_u8_crop(rgb.pixels.data(), rgb.width, rgb.height, 3, w, h, left, top, crop_size,
                                         crop_size, crop.pixels.data());
  return crop;
}

Tensor vit_preprocess(const Image& rgb, int resize_size, int crop_size) {
  const Image crop = vit_resize_and_crop(rgb, resize_size, crop_size);
  // ToTensor: float32(x) / 255; Normalize: (t - mean) / std with float32 mean/std, as torch does.
  constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  Tensor out = Tensor::empty({1, crop_size, crop_size, 3});
  float* o = out.data<float>();
  const size_t n = crop.pixels.size();
  for (size_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    const float t = static_cast<float>(crop.pixels[i]) / 255.0f;
    o[i] = (t - kMean[c]) / kStd[c];
  }
  return out;
}

}  // namespace vitrt
