// Shared by the ViT tests: the fixture folder and a small configuration that runs in milliseconds.
#pragma once
#include <string>

#include "vitrt/image.h"
#include "vitrt/vit.h"

namespace vitrt::test {

inline const std::string kVitFixtures = std::string(VITRT_FIXTURES) + "/vit";

// 32x32 image, 8x8 patches (16 tokens + class token), 2 layers, 3 heads, 5 classes.
inline VitConfig small_vit_config() {
  VitConfig c;
  c.image_size = 32;
  c.patch_size = 8;
  c.hidden_dim = 24;
  c.num_layers = 2;
  c.num_heads = 3;
  c.mlp_dim = 40;
  c.num_classes = 5;
  return c;
}

// A w x h RGB test image: pixel (x, y, c) = (kx x + ky y + kxy x y + 50 c) mod 256.
inline Image pattern_image(int w, int h, int kx = 7, int ky = 3, int kxy = 0) {
  Image im;
  im.width = w;
  im.height = h;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) im.row(y)[x * 3 + c] = static_cast<uint8_t>((x * kx + y * ky + x * y * kxy + c * 50) % 256);
  return im;
}

}  // namespace vitrt::test
