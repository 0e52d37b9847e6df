// Random SAM weights for benchmarks and tests that need no checkpoint: every tensor the model
// loads, drawn from N(0, std) with a fixed seed (LayerNorm weights around 1).
#include "models/random_weights.h"
#include "models/sam/sam_model.h"

namespace vitrt::sam {

StateDict random_state_dict(const SamConfig& c, uint64_t seed) {
  models::RandomWeights f(seed);
  const int64_t C = c.embed_dim, g = c.grid_size(), D = c.out_chans, hd = C / c.num_heads;
  const std::string e = "image_encoder.";
  f.conv(e + "patch_embed.proj", C, 3, c.patch_size);
  if (c.use_abs_pos) f.normal(e + "pos_embed", {1, g, g, C}, 0.f, 0.02f);
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = e + "blocks." + std::to_string(i) + ".";
    bool global = false;
    for (int gi : c.global_attn_indexes) global |= gi == i;
    const int64_t size = global ? g : c.window_size;
    f.norm(b + "norm1", C);
    f.linear(b + "attn.qkv", 3 * C, C);
    f.linear(b + "attn.proj", C, C);
    if (c.use_rel_pos) {
      f.normal(b + "attn.rel_pos_h", {2 * size - 1, hd}, 0.f, 0.02f);
      f.normal(b + "attn.rel_pos_w", {2 * size - 1, hd}, 0.f, 0.02f);
    }
    f.norm(b + "norm2", C);
    f.linear(b + "mlp.lin1", c.mlp_dim, C);
    f.linear(b + "mlp.lin2", C, c.mlp_dim);
  }
  f.conv(e + "neck.0", D, C, 1, false);
  f.norm(e + "neck.1", D);
  f.conv(e + "neck.2", D, D, 3, false);
  f.norm(e + "neck.3", D);

  const std::string p = "prompt_encoder.";
  const int64_t mc = c.mask_in_chans;
  f.normal(p + "pe_layer.positional_encoding_gaussian_matrix", {2, D / 2}, 0.f, 1.f);
  for (int i = 0; i < 4; ++i) f.normal(p + "point_embeddings." + std::to_string(i) + ".weight", {1, D}, 0.f, 1.f);
  f.normal(p + "not_a_point_embed.weight", {1, D}, 0.f, 1.f);
  f.normal(p + "no_mask_embed.weight", {1, D}, 0.f, 1.f);
  f.conv(p + "mask_downscaling.0", mc / 4, 1, 2);
  f.norm(p + "mask_downscaling.1", mc / 4);
  f.conv(p + "mask_downscaling.3", mc, mc / 4, 2);
  f.norm(p + "mask_downscaling.4", mc);
  f.conv(p + "mask_downscaling.6", D, mc, 1);

  const std::string m = "mask_decoder.";
  const int64_t inner = D / c.attention_downsample_rate, M = c.num_multimask_outputs + 1;
  auto attn = [&](const std::string& a, int64_t in_dim) {
    f.linear(a + ".q_proj", in_dim, D);
    f.linear(a + ".k_proj", in_dim, D);
    f.linear(a + ".v_proj", in_dim, D);
    f.linear(a + ".out_proj", D, in_dim);
  };
  for (int i = 0; i < c.decoder_depth; ++i) {
    const std::string l = m + "transformer.layers." + std::to_string(i) + ".";
    attn(l + "self_attn", D);
    attn(l + "cross_attn_token_to_image", inner);
    attn(l + "cross_attn_image_to_token", inner);
    for (const char* n : {"norm1", "norm2", "norm3", "norm4"}) f.norm(l + n, D);
    f.linear(l + "mlp.lin1", c.decoder_mlp_dim, D);
    f.linear(l + "mlp.lin2", D, c.decoder_mlp_dim);
  }
  attn(m + "transformer.final_attn_token_to_image", inner);
  f.norm(m + "transformer.norm_final_attn", D);
  f.normal(m + "iou_token.weight", {1, D}, 0.f, 1.f);
  f.normal(m + "mask_tokens.weight", {M, D}, 0.f, 1.f);
  f.normal(m + "output_upscaling.0.weight", {D, D / 4, 2, 2}, 0.f, 1.f / std::sqrt(static_cast<float>(D)));
  f.normal(m + "output_upscaling.0.bias", {D / 4}, 0.f, 0.02f);
  f.norm(m + "output_upscaling.1", D / 4);
  f.normal(m + "output_upscaling.3.weight", {D / 4, D / 8, 2, 2}, 0.f, 1.f / std::sqrt(static_cast<float>(D / 4)));
  f.normal(m + "output_upscaling.3.bias", {D / 8}, 0.f, 0.02f);
  for (int64_t i = 0; i < M; ++i) {
    const std::string h = m + "output_hypernetworks_mlps." + std::to_string(i) + ".layers.";
    f.linear(h + "0", D, D);
    f.linear(h + "1", D, D);
    f.linear(h + "2", D / 8, D);
  }
  for (int i = 0; i < c.iou_head_depth; ++i)
    f.linear(m + "iou_prediction_head.layers." + std::to_string(i), i + 1 < c.iou_head_depth ? c.iou_head_hidden_dim : M,
             i == 0 ? D : c.iou_head_hidden_dim);
  return f.sd;
}

}  // namespace vitrt::sam

namespace vitrt::sam {

double encoder_flops(const SamConfig& c) {
  const double C = c.embed_dim, g = c.grid_size(), D = c.out_chans, p = c.patch_size;
  double f = 2.0 * g * g * C * 3 * p * p;  // patch embed
  for (int i = 0; i < c.depth; ++i) {
    bool global = false;
    for (int gi : c.global_attn_indexes) global |= gi == i;
    const double side = global ? g : std::ceil(g / c.window_size) * c.window_size;  // padded grid
    const double tokens = side * side;
    const double seq = global ? g * g : static_cast<double>(c.window_size) * c.window_size;
    f += 2.0 * tokens * C * 3 * C + 2.0 * tokens * C * C;  // qkv, proj
    f += 2.0 * 2.0 * tokens * seq * C;                     // q k^T and attn v
    f += 2.0 * 2.0 * g * g * C * c.mlp_dim;                // MLP
  }
  f += 2.0 * g * g * C * D + 2.0 * g * g * D * D * 9;  // neck
  return f;
}

}  // namespace vitrt::sam
