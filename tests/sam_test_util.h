// Helpers shared by the SAM tests: a small random-weight model that runs in milliseconds.
#pragma once
#include <random>

#include "models/sam/sam_model.h"

namespace vitrt::test {

// img 128 -> grid 8, window 3 (so windows pad 8 -> 9), one global block, rel-pos on.
inline SamConfig small_config() {
  SamConfig c;
  c.name = "custom";
  c.img_size = 128;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 2;
  c.mlp_dim = 64;
  c.window_size = 3;
  c.global_attn_indexes = {1};
  c.out_chans = 32;
  c.mask_in_chans = 8;
  c.decoder_heads = 4;
  c.decoder_mlp_dim = 64;
  c.iou_head_hidden_dim = 32;
  return c;
}

inline std::shared_ptr<SamModel> small_model(uint64_t seed = 1) {
  SamConfig c = small_config();
  return SamModel::from_state_dict(sam::random_state_dict(c, seed), c);
}

inline Image random_image(int w, int h, uint32_t seed = 3) {
  Image im;
  im.width = w;
  im.height = h;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  std::mt19937 rng(seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)  // smooth structure plus noise
        im.pixels[(static_cast<size_t>(y) * w + x) * 3 + c] =
            static_cast<uint8_t>((x * 255 / w + y * 128 / h + c * 60 + rng() % 32) % 256);
  return im;
}

}  // namespace vitrt::test
