// SAM variants and how a checkpoint's tensor shapes tell them apart.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/sam/sam_model.h"

namespace vitrt {

SamConfig SamConfig::vit_b() { return SamConfig{}; }

SamConfig SamConfig::vit_l() {
  SamConfig c;
  c.name = "vit_l";
  c.embed_dim = 1024;
  c.depth = 24;
  c.num_heads = 16;
  c.mlp_dim = 4096;
  c.global_attn_indexes = {5, 11, 17, 23};
  return c;
}

SamConfig SamConfig::vit_h() {
  SamConfig c;
  c.name = "vit_h";
  c.embed_dim = 1280;
  c.depth = 32;
  c.num_heads = 16;
  c.mlp_dim = 5120;
  c.global_attn_indexes = {7, 15, 23, 31};
  return c;
}

namespace sam {

namespace {

int count_indexed(const StateDict& sd, const std::string& prefix, const std::string& suffix) {
  int n = 0;
  while (sd.count(prefix + std::to_string(n) + suffix)) ++n;
  return n;
}

const Tensor& need(const StateDict& sd, const std::string& key, int64_t min_dims) {
  auto it = sd.find(key);
  VITRT_CHECK(it != sd.end(), CheckpointError, "not a SAM checkpoint: tensor '", key, "' is missing");
  VITRT_CHECK(it->second.dim() >= min_dims, CheckpointError, "checkpoint tensor '", key, "' has shape ",
              shape_str(it->second.shape()), ", expected at least ", min_dims, " dimensions");
  return it->second;
}

template <class T>
void read_field(const nlohmann::json& j, const char* key, T& field) {
  if (j.contains(key)) field = j.at(key).get<T>();
}

}  // namespace

SamConfig config_from_state_dict(const StateDict& sd) {
  const Tensor& patch = need(sd, "image_encoder.patch_embed.proj.weight", 4);
  const int embed_dim = static_cast<int>(patch.size(0));

  // Settings shapes cannot tell (heads, global blocks) come from the official variant of this width.
  SamConfig c = embed_dim == 1024 ? SamConfig::vit_l() : embed_dim == 1280 ? SamConfig::vit_h() : SamConfig::vit_b();
  if (embed_dim != 768 && embed_dim != 1024 && embed_dim != 1280) c.name = "custom";
  c.embed_dim = embed_dim;
  c.patch_size = static_cast<int>(patch.size(2));
  c.depth = count_indexed(sd, "image_encoder.blocks.", ".norm1.weight");
  VITRT_CHECK(c.depth > 0, CheckpointError, "not a SAM checkpoint: no image_encoder.blocks.N tensors");
  c.use_abs_pos = sd.count("image_encoder.pos_embed") != 0;
  if (c.use_abs_pos) {
    const Tensor& pos = need(sd, "image_encoder.pos_embed", 4);
    c.img_size = static_cast<int>(pos.size(1)) * c.patch_size;
  }
  c.mlp_dim = static_cast<int>(need(sd, "image_encoder.blocks.0.mlp.lin1.weight", 2).size(0));
  c.use_rel_pos = sd.count("image_encoder.blocks.0.attn.rel_pos_h") != 0;
  c.out_chans = static_cast<int>(need(sd, "image_encoder.neck.0.weight", 4).size(0));
  c.mask_in_chans = static_cast<int>(need(sd, "prompt_encoder.mask_downscaling.3.weight", 4).size(0));
  c.decoder_depth = count_indexed(sd, "mask_decoder.transformer.layers.", ".norm1.weight");
  c.decoder_mlp_dim = static_cast<int>(need(sd, "mask_decoder.transformer.layers.0.mlp.lin1.weight", 2).size(0));
  const int64_t cross_dim = need(sd, "mask_decoder.transformer.layers.0.cross_attn_token_to_image.q_proj.weight", 2).size(0);
  VITRT_CHECK(cross_dim > 0 && c.out_chans % cross_dim == 0, CheckpointError,
              "mask decoder cross-attention width ", cross_dim, " does not divide ", c.out_chans);
  c.attention_downsample_rate = static_cast<int>(c.out_chans / cross_dim);
  c.num_multimask_outputs = static_cast<int>(need(sd, "mask_decoder.mask_tokens.weight", 2).size(0)) - 1;
  c.iou_head_depth = count_indexed(sd, "mask_decoder.iou_prediction_head.layers.", ".weight");
  c.iou_head_hidden_dim = static_cast<int>(need(sd, "mask_decoder.iou_prediction_head.layers.0.weight", 2).size(0));

  if (c.name == "custom") {
    // Best effort for sizes without an official preset: head width from the rel-pos tables, global
    // blocks from their table length (2 * grid - 1). A <checkpoint>.json overrides both.
    if (c.use_rel_pos) {
      const int64_t hd = need(sd, "image_encoder.blocks.0.attn.rel_pos_h", 2).size(1);
      if (hd > 0 && embed_dim % hd == 0) c.num_heads = static_cast<int>(embed_dim / hd);
      c.global_attn_indexes.clear();
      for (int i = 0; i < c.depth; ++i) {
        const Tensor& r = need(sd, "image_encoder.blocks." + std::to_string(i) + ".attn.rel_pos_h", 2);
        if (r.size(0) == 2 * c.grid_size() - 1) c.global_attn_indexes.push_back(i);
      }
    }
  }
  return c;
}

void apply_config_json(const std::string& path, SamConfig& c) {
  std::ifstream in(path);
  VITRT_CHECK(in.good(), IoError, "cannot open model config '", path, "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    read_field(j, "name", c.name);
    read_field(j, "img_size", c.img_size);
    read_field(j, "patch_size", c.patch_size);
    read_field(j, "embed_dim", c.embed_dim);
    read_field(j, "depth", c.depth);
    read_field(j, "num_heads", c.num_heads);
    read_field(j, "mlp_dim", c.mlp_dim);
    read_field(j, "window_size", c.window_size);
    read_field(j, "global_attn_indexes", c.global_attn_indexes);
    read_field(j, "use_rel_pos", c.use_rel_pos);
    read_field(j, "use_abs_pos", c.use_abs_pos);
    read_field(j, "out_chans", c.out_chans);
    read_field(j, "mask_in_chans", c.mask_in_chans);
    read_field(j, "decoder_depth", c.decoder_depth);
    read_field(j, "decoder_heads", c.decoder_heads);
    read_field(j, "decoder_mlp_dim", c.decoder_mlp_dim);
    read_field(j, "attention_downsample_rate", c.attention_downsample_rate);
    read_field(j, "num_multimask_outputs", c.num_multimask_outputs);
    read_field(j, "iou_head_depth", c.iou_head_depth);
    read_field(j, "iou_head_hidden_dim", c.iou_head_hidden_dim);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(detail::concat("model config '", path, "': ", e.what()));
  }
}

void validate_config(const SamConfig& c) {
  VITRT_CHECK(c.patch_size > 0 && c.img_size > 0 && c.img_size % c.patch_size == 0, CheckpointError,
              "image size ", c.img_size, " is not a multiple of the patch size ", c.patch_size);
  VITRT_CHECK(c.num_heads > 0 && c.embed_dim % c.num_heads == 0, CheckpointError, "embed_dim ", c.embed_dim,
              " is not divisible by num_heads ", c.num_heads);
  VITRT_CHECK(c.decoder_heads > 0 && (c.out_chans / c.attention_downsample_rate) % c.decoder_heads == 0,
              CheckpointError, "decoder width ", c.out_chans / c.attention_downsample_rate,
              " is not divisible by decoder_heads ", c.decoder_heads);
  VITRT_CHECK(c.window_size >= 0, CheckpointError, "negative window size");
  for (int g : c.global_attn_indexes)
    VITRT_CHECK(g >= 0 && g < c.depth, CheckpointError, "global attention index ", g, " outside depth ", c.depth);
  VITRT_CHECK(c.out_chans % 8 == 0 && c.out_chans % 2 == 0, CheckpointError, "out_chans ", c.out_chans,
              " must be a multiple of 8");
}

}  // namespace sam
}  // namespace vitrt
