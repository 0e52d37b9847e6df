// SAM image encoder (segment_anything/modeling/image_encoder.py): patch embedding, absolute
// position embedding, ViT blocks with windowed (14x14, grid zero-padded to a multiple) or global
// attention and decomposed relative positions, then the neck (1x1 conv, LN, 3x3 conv, LN).
#include <algorithm>
#include <string>
#include <utility>

#include "models/sam/sam_model.h"
#include "models/sam/weights.h"
#include "ops/ops.h"

namespace vitrt::sam {

namespace {
constexpr float kEncoderEps = 1e-6f;  // LayerNorm(eps=1e-6) and LayerNorm2d in the encoder

NormW take_norm(WeightReader& r, const std::string& p, int64_t dim) {
  return {r.take(p + ".weight", {dim}), r.take(p + ".bias", {dim})};
}
LinearW take_linear(WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.take(p + ".weight", {out, in}), r.take(p + ".bias", {out})};
}

// get_rel_pos: a table whose length is not 2 * size - 1 is linearly interpolated to that length
// (F.interpolate, mode="linear"). Done once here instead of on every forward.
Tensor rel_pos_for_size(const Tensor& table, int64_t size) {
  const int64_t want = 2 * size - 1;
  return table.size(0) == want ? table : ops::interpolate_linear_rows(table, want);
}
}  // namespace

void ImageEncoder::load(WeightReader& r, const SamConfig& c) {
  cfg = c;
  const int64_t C = c.embed_dim, g = c.grid_size(), p = c.patch_size;
  const std::string e = "image_encoder.";
  patch_w = r.take(e + "patch_embed.proj.weight", {C, 3, p, p});
  patch_b = r.take(e + "patch_embed.proj.bias", {C});
  if (c.use_abs_pos) pos_embed = r.take(e + "pos_embed", {1, g, g, C}).reshape({g, g, C});

  const int64_t hd = C / c.num_heads;
  blocks.resize(c.depth);
  for (int i = 0; i < c.depth; ++i) {
    EncoderBlockW& b = blocks[i];
    const std::string bp = e + "blocks." + std::to_string(i) + ".";
    bool global = false;
    for (int gi : c.global_attn_indexes) global |= gi == i;
    b.window = global ? 0 : c.window_size;
    b.norm1 = take_norm(r, bp + "norm1", C);
    b.norm2 = take_norm(r, bp + "norm2", C);
    b.qkv = take_linear(r, bp + "attn.qkv", 3 * C, C);
    b.proj = take_linear(r, bp + "attn.proj", C, C);
    b.lin1 = take_linear(r, bp + "mlp.lin1", c.mlp_dim, C);
    b.lin2 = take_linear(r, bp + "mlp.lin2", C, c.mlp_dim);
    if (c.use_rel_pos) {
      const int64_t size = b.window ? b.window : g;
      for (auto [name, dst] : {std::pair{"attn.rel_pos_h", &b.rel_pos_h}, std::pair{"attn.rel_pos_w", &b.rel_pos_w}}) {
        Tensor t = r.take_any(bp + name);
        VITRT_CHECK(t.dim() == 2 && t.size(1) == hd && t.size(0) >= 1, CheckpointError, "checkpoint tensor '", bp,
                    name, "' has shape ", shape_str(t.shape()), ", the model expects [L, ", hd, "]");
        *dst = rel_pos_for_size(t, size);
      }
    }
  }
  const int64_t out = c.out_chans;
  neck_conv1 = r.take(e + "neck.0.weight", {out, C, 1, 1}).reshape({out, C});
  neck_norm1 = take_norm(r, e + "neck.1", out);
  neck_conv2 = r.take(e + "neck.2.weight", {out, out, 3, 3});
  neck_norm2 = take_norm(r, e + "neck.3", out);
}

namespace {

// One ViT block: x = x + attn(norm1(x)); x = x + mlp(norm2(x)).
// Windowed blocks: the reference pads the grid with zeros (64 -> 70) and cuts 14x14 windows
// before the qkv linear; here the qkv linear runs on the real tokens only and the padding tokens
// enter attention as the qkv bias (identical values), and proj runs on the real tokens only.
//
// Precision: the residual stream x keeps its own dtype (float32, also in the bf16 model, see
// ImageEncoder::forward); everything else computes in the weights' dtype `dt`. So in bf16 each
// LayerNorm reads the fp32 x and writes bf16 (one fused pass), and proj / lin2 take bf16
// activations and weights and write x + (...) in fp32 straight from the GEMM's fp32 accumulator:
// x is never rounded to bf16 (rounding it twice per block over 12..32 blocks was the bf16 path's
// dominant error). In fp32 every dtype below is F32 and the ops are exactly those of before.
// Memory: x is taken by value and both residual adds land in it in place (ops::linear_add_), so
// the residual stream exists once; the MLP runs over chunks of at most a quarter of the tokens
// (never fewer than 16384, so its GEMMs stay large), so its 4x-wide hidden activation is never
// allocated for the whole batch. Per block at most x, the qkv and the attention output are alive.
Tensor block_forward(const EncoderBlockW& b, const SamConfig& c, Tensor x) {
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), T = B * H * W;
  const DType dt = b.qkv.w.dtype();
  const Tensor* rel_h = c.use_rel_pos ? &b.rel_pos_h : nullptr;
  const Tensor* rel_w = c.use_rel_pos ? &b.rel_pos_w : nullptr;
  Tensor a;
  {
    Tensor t = ops::layer_norm(x, b.norm1.w, b.norm1.b, kEncoderEps, dt);
    Tensor qkv = ops::linear(t.reshape({B, H * W, C}), b.qkv.w, b.qkv.bias());
    t = Tensor();
    a = b.window ? ops::attention_relpos_windowed(qkv.reshape({B, H, W, 3 * C}), b.qkv.b, c.num_heads, b.window,
                                                  rel_h, rel_w)
                 : ops::attention_relpos(qkv, c.num_heads, H, W, rel_h, rel_w);
  }
  Tensor tokens = x.reshape({T, C});  // a view: writes land in x
  ops::linear_add_(tokens, a.reshape({T, C}), b.proj.w, b.proj.bias());
  a = Tensor();
  const int64_t chunk = std::max<int64_t>(16384, (T + 3) / 4);
  for (int64_t r0 = 0; r0 < T; r0 += chunk) {
    Tensor part = tokens.slice0(r0, std::min(T, r0 + chunk));
    Tensor m = ops::layer_norm(part, b.norm2.w, b.norm2.b, kEncoderEps, dt);
    m = ops::linear(m, b.lin1.w, b.lin1.bias(), ops::Activation::GELU);
    ops::linear_add_(part, m, b.lin2.w, b.lin2.bias());
  }
  return x;
}

}  // namespace

Tensor ImageEncoder::forward(const Tensor& image) const {
  const int64_t S = cfg.img_size;
  VITRT_CHECK(image.dim() == 4 && image.size(1) == S && image.size(2) == S && image.size(3) == 3, InvalidArgument,
              "image encoder input must be [B, ", S, ", ", S, ", 3], got ", shape_str(image.shape()));
  // The residual stream x is float32 whatever the compute dtype: in the bf16 model the patch
  // embedding's GEMM writes fp32 directly and the bf16 pos_embed is added after widening (exact).
  Tensor x = ops::conv2d_nhwc(image, patch_w, &patch_b, cfg.patch_size, 0, DType::F32);  // [B, g, g, C]
  if (pos_embed.defined()) ops::add_(x, ops::cast(pos_embed, DType::F32));
  for (const EncoderBlockW& b : blocks) x = block_forward(b, cfg, std::move(x));
  // Neck, kept channels-last, in the weights' dtype (x rounded to it once, here; a no-op in fp32).
  // LayerNorm2d over channels is a LayerNorm over the last dim.
  x = ops::cast(x, neck_conv1.dtype());
  Tensor y = ops::linear(x, neck_conv1);
  x = Tensor();
  y = ops::layer_norm(y, neck_norm1.w, neck_norm1.b, kEncoderEps);
  y = ops::conv2d_nhwc(y, neck_conv2, nullptr, 1, 1);
  y = ops::layer_norm(y, neck_norm2.w, neck_norm2.b, kEncoderEps);
  return ops::permute(y, {0, 3, 1, 2});
}

}  // namespace vitrt::sam
