// Shared by the ViT tests: the fixture folder and a small configuration that runs in milliseconds.
#pragma once
#include <string>

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

}  // namespace vitrt::test
