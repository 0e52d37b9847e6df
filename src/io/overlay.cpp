#include "io/overlay.h"

#include <algorithm>
#include <cmath>

#include "vitrt/error.h"

namespace vitrt {

std::array<uint8_t, 3> mask_color(int index) {
  // HSV with s = 0.75, v = 0.95 to RGB.
  const double hue = std::fmod(index * 0.6180339887498949, 1.0) * 6.0;
  const double v = 0.95, s = 0.75;
  const int sector = static_cast<int>(hue) % 6;
  const double f = hue - std::floor(hue);
  const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  const double rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  std::array<uint8_t, 3> out;
  for (int c = 0; c < 3; ++c) out[c] = static_cast<uint8_t>(std::lround(rgb[sector][c] * 255));
  return out;
}

Image overlay_masks(const Image& rgb, const std::vector<const uint8_t*>& masks, float alpha) {
  VITRT_CHECK(rgb.channels == 3 && !rgb.empty() &&
                  rgb.pixels.size() == static_cast<size_t>(rgb.width) * rgb.height * 3,
              InvalidArgument, "overlay_masks: needs a non-empty RGB image");
  VITRT_CHECK(alpha >= 0.f && alpha <= 1.f, InvalidArgument, "overlay_masks: alpha ", alpha,
              " outside [0, 1]");
  const int w = rgb.width, h = rgb.height;
  Image out = rgb;
  for (size_t m = 0; m < masks.size(); ++m) {
    const uint8_t* mask = masks[m];
    VITRT_CHECK(mask != nullptr, InvalidArgument, "overlay_masks: mask ", m, " is null");
    const auto color = mask_color(static_cast<int>(m));
    const std::array<uint8_t, 3> edge = {static_cast<uint8_t>(color[0] * 3 / 5),
                                         static_cast<uint8_t>(color[1] * 3 / 5),
                                         static_cast<uint8_t>(color[2] * 3 / 5)};
    auto inside = [&](int x, int y) {
      return x >= 0 && y >= 0 && x < w && y < h && mask[static_cast<size_t>(y) * w + x];
    };
    for (int y = 0; y < h; ++y) {
      uint8_t* px = out.row(y);
      for (int x = 0; x < w; ++x, px += 3) {
        if (!inside(x, y)) continue;
        // A set pixel with an unset 4-neighbour (or the image border) is on the contour.
        if (!inside(x - 1, y) || !inside(x + 1, y) || !inside(x, y - 1) || !inside(x, y + 1)) {
          std::copy(edge.begin(), edge.end(), px);
          continue;
        }
        for (int c = 0; c < 3; ++c)
          px[c] = static_cast<uint8_t>(std::lround((1 - alpha) * px[c] + alpha * color[c]));
      }
    }
  }
  return out;
}

Image mask_to_image(const uint8_t* mask, int w, int h) {
  VITRT_CHECK(mask != nullptr && w > 0 && h > 0, InvalidArgument, "mask_to_image: bad mask ", w,
              "x", h);
  Image out;
  out.width = w;
  out.height = h;
  out.channels = 1;
  out.pixels.resize(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = mask[i] ? 255 : 0;
  return out;
}

}  // namespace vitrt
