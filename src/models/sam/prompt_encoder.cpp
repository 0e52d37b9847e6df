// SAM prompt encoder (segment_anything/modeling/prompt_encoder.py): random-Fourier position
// encoding of points and box corners plus learned type embeddings (sparse tokens), and the mask
// prompt downscaled by two strided convs (dense embeddings) or the learned no-mask embedding.
#include <cmath>
#include <cstring>

#include "models/sam/sam_model.h"
#include "models/sam/weights.h"
#include "ops/ops.h"

namespace vitrt::sam {

namespace {
constexpr float kLayerNorm2dEps = 1e-6f;
// 2 * np.pi as PyTorch uses it on a float32 tensor: the scalar is rounded to float32 first.
constexpr float kTwoPi = static_cast<float>(2.0 * 3.14159265358979323846);
}  // namespace

void PromptEncoder::load(WeightReader& r, const SamConfig& c) {
  cfg = c;
  const int64_t D = c.out_chans, mc = c.mask_in_chans;
  const std::string p = "prompt_encoder.";
  gaussian = r.take(p + "pe_layer.positional_encoding_gaussian_matrix", {2, D / 2});
  for (int i = 0; i < 4; ++i)
    point_embed[i] = r.take(p + "point_embeddings." + std::to_string(i) + ".weight", {1, D}).reshape({D});
  not_a_point = r.take(p + "not_a_point_embed.weight", {1, D}).reshape({D});
  no_mask = r.take(p + "no_mask_embed.weight", {1, D}).reshape({D});
  down1_w = r.take(p + "mask_downscaling.0.weight", {mc / 4, 1, 2, 2});
  down1_b = r.take(p + "mask_downscaling.0.bias", {mc / 4});
  down_norm1 = {r.take(p + "mask_downscaling.1.weight", {mc / 4}), r.take(p + "mask_downscaling.1.bias", {mc / 4})};
  down2_w = r.take(p + "mask_downscaling.3.weight", {mc, mc / 4, 2, 2});
  down2_b = r.take(p + "mask_downscaling.3.bias", {mc});
  down_norm2 = {r.take(p + "mask_downscaling.4.weight", {mc}), r.take(p + "mask_downscaling.4.bias", {mc})};
  down3_w = r.take(p + "mask_downscaling.6.weight", {D, mc, 1, 1});
  down3_b = r.take(p + "mask_downscaling.6.bias", {D});

  // get_dense_pe(): the encoding of every grid cell centre ((j + 0.5) / g, (i + 0.5) / g).
  const int64_t g = c.grid_size();
  std::vector<float> centres(static_cast<size_t>(g * g * 2));
  for (int64_t i = 0; i < g; ++i)
    for (int64_t j = 0; j < g; ++j) {
      centres[(i * g + j) * 2 + 0] = (static_cast<float>(j + 1) - 0.5f) / static_cast<float>(g);
      centres[(i * g + j) * 2 + 1] = (static_cast<float>(i + 1) - 0.5f) / static_cast<float>(g);
    }
  dense_pe = Tensor::empty({g * g, D});
  pe_encoding(centres.data(), g * g, dense_pe.data<float>());
}

void PromptEncoder::pe_encoding(const float* coords01, int64_t n, float* out) const {
  const int64_t F = gaussian.size(1), D = 2 * F;
  const float* G = gaussian.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float x = 2.0f * coords01[2 * i] - 1.0f, y = 2.0f * coords01[2 * i + 1] - 1.0f;
    for (int64_t f = 0; f < F; ++f) {
      const float a = kTwoPi * (x * G[f] + y * G[F + f]);
      out[i * D + f] = std::sin(a);
      out[i * D + F + f] = std::cos(a);
    }
  }
}

Tensor PromptEncoder::sparse_embeddings(const ModelPrompt& p) const {
  const int64_t D = cfg.out_chans;
  const float inv_w = static_cast<float>(cfg.img_size), inv_h = static_cast<float>(cfg.img_size);
  std::vector<float> coords;  // normalised to [0, 1]
  std::vector<int> kinds;     // label for points; 2, 3 for box corners
  const size_t n_points = p.labels.size();
  for (size_t i = 0; i < n_points; ++i) {
    coords.push_back((p.coords[2 * i] + 0.5f) / inv_w);
    coords.push_back((p.coords[2 * i + 1] + 0.5f) / inv_h);
    kinds.push_back(p.labels[i]);
  }
  // Without a box the reference appends a padding point (0, 0) with label -1.
  if (n_points > 0 && !p.box) {
    coords.push_back(0.0f);
    coords.push_back(0.0f);
    kinds.push_back(-1);
  }
  if (p.box) {
    const auto& b = *p.box;
    for (int corner = 0; corner < 2; ++corner) {
      coords.push_back((b[2 * corner] + 0.5f) / inv_w);
      coords.push_back((b[2 * corner + 1] + 0.5f) / inv_h);
      kinds.push_back(2 + corner);
    }
  }
  const int64_t n = static_cast<int64_t>(kinds.size());
  Tensor out = Tensor::empty({n, D});
  float* o = out.data<float>();
  pe_encoding(coords.data(), n, o);
  for (int64_t i = 0; i < n; ++i) {
    float* row = o + i * D;
    const float* add = nullptr;
    switch (kinds[i]) {
      case -1:
        std::memset(row, 0, sizeof(float) * D);  // "not a point": the encoding is dropped
        add = not_a_point.data<float>();
        break;
      case 0: add = point_embed[0].data<float>(); break;
      case 1: add = point_embed[1].data<float>(); break;
      case 2: add = point_embed[2].data<float>(); break;
      case 3: add = point_embed[3].data<float>(); break;
      default: throw InvalidArgument(detail::concat("point label ", kinds[i], " is not one of 1, 0, -1"));
    }
    for (int64_t d = 0; d < D; ++d) row[d] += add[d];
  }
  return out;
}

Tensor PromptEncoder::dense_embeddings(const ModelPrompt& p) const {
  const int64_t g = cfg.grid_size(), D = cfg.out_chans;
  if (!p.mask_input.defined()) {
    Tensor out = Tensor::empty({g * g, D});
    float* o = out.data<float>();
    const float* e = no_mask.data<float>();
    for (int64_t i = 0; i < g * g; ++i) std::memcpy(o + i * D, e, sizeof(float) * D);
    return out;
  }
  // mask_downscaling: conv 2x2/2 -> LN2d -> GELU -> conv 2x2/2 -> LN2d -> GELU -> conv 1x1.
  const int64_t m = 4 * g;
  Tensor x = p.mask_input.reshape({1, m, m, 1});
  x = ops::conv2d_nhwc(x, down1_w, &down1_b, 2, 0);
  x = ops::layer_norm(x, down_norm1.w, down_norm1.b, kLayerNorm2dEps);
  ops::gelu_(x);
  x = ops::conv2d_nhwc(x, down2_w, &down2_b, 2, 0);
  x = ops::layer_norm(x, down_norm2.w, down_norm2.b, kLayerNorm2dEps);
  ops::gelu_(x);
  x = ops::linear(x.reshape({g * g, cfg.mask_in_chans}), down3_w.reshape({D, cfg.mask_in_chans}), &down3_b);
  return x;
}

}  // namespace vitrt::sam
