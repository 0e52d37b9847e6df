// SuperBlock's Supermask folded into the weights (see vitrt/supermask.h). Every step follows
// supermask.py's arithmetic: the percentile's index as Python's float expression and round(), the
// kth value as torch.kthvalue orders (NaN last), `scores < k` -> 0, and the weight transform in
// the weight's dtype with one rounding per op (this file is built without FMA contraction).
#include "vitrt/supermask.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "vitrt/error.h"
#include "vitrt/vit.h"

namespace vitrt {
namespace {

const std::string kScores = ".scores";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// float32 values of a F32 / BF16 / F16 tensor.
std::vector<float> values_f32(const Tensor& t, const std::string& what) {
  VITRT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16, CheckpointError,
              what, " is ", dtype_name(t.dtype()), ", expected float32, bfloat16 or float16");
  Tensor f = t.to_f32();
  return {f.data<float>(), f.data<float>() + f.numel()};
}

float round_to(DType dtype, float v) { return dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(v)) : v; }

// ceil(a / b) for a >= 0, b >= 1, without the overflow of a + b - 1 (dims come from the file).
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// The one element of `<layer>.scale` / `.shift`, or `fallback` when the layer has none.
float transform_value(const StateDict& sd, const std::string& key, float fallback) {
  auto it = sd.find(key);
  if (it == sd.end()) return fallback;
  VITRT_CHECK(it->second.numel() == 1, CheckpointError, "Supermask transform '", key, "' has shape ",
              shape_str(it->second.shape()), ", expected one element");
  return values_f32(it->second, "'" + key + "'")[0];
}

// Tile sizes t in [lo, hi] with ceil(k / t) == s for one dim (hi = max: unbounded).
struct TileRange {
  int64_t lo = 1, hi = std::numeric_limits<int64_t>::max();
  bool cut = false;  // some dim with s >= 2 constrains it: different t cut that dim differently
};

void narrow(TileRange& r, int64_t k, int64_t s) {
  if (s == 1) {  // ceil(k / t) == 1: any t >= k (SuperBlock writes max(1, ...), so k == 0 fits too)
    r.lo = std::max(r.lo, std::max<int64_t>(k, 1));
    return;
  }
  // s - 1 < k / t <= s  <=>  ceil(k / s) <= t <= floor((k - 1) / (s - 1))
  r.lo = std::max(r.lo, ceil_div(k, s));
  r.hi = std::min(r.hi, k >= 1 ? (k - 1) / (s - 1) : 0);
  r.cut = true;
}

struct LayerKeys {
  std::string prefix, weight, scores;
};

// Every `<layer>.scores` with a `<layer>.weight`, in key order.
std::vector<LayerKeys> supermask_layers(const StateDict& sd) {
  std::vector<LayerKeys> out;
  for (const auto& [key, t] : sd) {
    if (!ends_with(key, kScores)) continue;
    LayerKeys l{key.substr(0, key.size() - kScores.size()), "", key};
    l.weight = l.prefix + ".weight";
    if (sd.count(l.weight)) out.push_back(std::move(l));
  }
  return out;
}

void check_scores_shape(const Tensor& w, const Tensor& s, const std::string& prefix) {
  VITRT_CHECK(w.dim() == s.dim() && w.dim() >= 1 && s.numel() > 0, CheckpointError, "Supermask layer '", prefix,
              "': scores ", shape_str(s.shape()), " do not match weight ", shape_str(w.shape()),
              " (one score per tile and dim, at least one per dim)");
}

// nn.MultiheadAttention computes with out_proj.weight itself; SupermaskLinear.forward never runs.
bool mask_reaches_output(const std::string& prefix) { return !ends_with(prefix, "self_attention.out_proj"); }

}  // namespace

double supermask_layer_sparsity(double sparsity, int64_t tiles) {
  const double max_sparsity = 1.0 - (1.0 / static_cast<double>(std::max<int64_t>(tiles, 1)));
  return sparsity > max_sparsity ? max_sparsity : sparsity;
}

Tensor supermask_tile_mask(const Tensor& scores, double sparsity) {
  VITRT_CHECK(sparsity >= 0.0 && sparsity < 1.0, InvalidArgument, "Supermask sparsity ", sparsity,
              " must lie in [0, 1)");
  VITRT_CHECK(scores.numel() > 0, CheckpointError, "Supermask scores are empty");
  std::vector<float> s = values_f32(scores, "Supermask scores");
  // scores.clamp_(max=9e9), in the scores' dtype (min: None).
  const float ceiling = round_to(scores.dtype(), 9e9f);
  for (float& v : s)
    if (v > ceiling) v = ceiling;
  const auto n = static_cast<int64_t>(s.size());
  // percentile(t, q) with q = sparsity * 100: k = 1 + round(.01 * float(q) * (t.numel() - 1)).
  const double q = sparsity * 100.0;
  const double index = 0.01 * q * static_cast<double>(n - 1);
  const int64_t k = 1 + static_cast<int64_t>(std::nearbyint(index));  // half to even, as Python's round
  VITRT_CHECK(k >= 1 && k <= n, InvalidArgument, "Supermask percentile index ", k, " outside [1, ", n, "]");
  std::vector<float> sorted = s;
  auto nan_last = [](float a, float b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), nan_last);
  const float kth = sorted[k - 1];
  Tensor mask = Tensor::empty(scores.shape(), DType::U8);
  uint8_t* m = mask.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) m[i] = s[i] < kth ? 0 : 1;  // torch.where(scores < k_val, 0, 1)
  return mask;
}

int infer_supermask_tile(const StateDict& sd) {
  const std::vector<LayerKeys> layers = supermask_layers(sd);
  VITRT_CHECK(!layers.empty(), CheckpointError, "no Supermask layers (no '<layer>.scores' next to a '<layer>.weight')");
  TileRange r;
  std::vector<int64_t> cut_dims;  // weight dims cut into two or more tiles
  int64_t scores_of_first_cut = 0;
  for (const LayerKeys& l : layers) {
    const Tensor &w = sd.at(l.weight), &s = sd.at(l.scores);
    check_scores_shape(w, s, l.prefix);
    for (int64_t d = 0; d < w.dim(); ++d) {
      narrow(r, w.size(d), s.size(d));
      if (s.size(d) >= 2) {
        if (cut_dims.empty()) scores_of_first_cut = s.size(d);
        cut_dims.push_back(w.size(d));
      }
    }
  }
  VITRT_CHECK(r.lo <= r.hi, CheckpointError, "the Supermask scores' shapes fit no single tile size (every layer's "
              "scores must be ceil(weight dims / tile)): give the tile size");
  int64_t tile = r.lo;
  if (r.lo < r.hi && r.cut) {
    // Several sizes fit the shapes and cut the weights differently. Tiles that divide the weights
    // exactly (as BSR packing wants, and as SuperBlock is used) are what a model is trained with;
    // with ceil(k / t) == s, only t = k / s can divide a dim k exactly.
    const int64_t k0 = cut_dims.front(), s0 = scores_of_first_cut;
    tile = k0 % s0 == 0 ? k0 / s0 : 0;
    if (tile < r.lo || tile > r.hi ||
        !std::all_of(cut_dims.begin(), cut_dims.end(), [tile](int64_t k) { return k % tile == 0; }))
      tile = 0;
    VITRT_CHECK(tile != 0, CheckpointError, "the Supermask scores' shapes fit tile sizes ", r.lo, " to ", r.hi,
                ", which cut the weights differently and none of which divides them: give the tile size");
  }
  VITRT_CHECK(tile <= std::numeric_limits<int>::max(), CheckpointError, "Supermask tile size ", tile, " too large");
  return static_cast<int>(tile);
}

Tensor supermask_fold(const Tensor& weight, const Tensor& tile_mask, int tile, float scale, float shift) {
  VITRT_CHECK(weight.dtype() == DType::F32 || weight.dtype() == DType::BF16, CheckpointError,
              "Supermask weight is ", dtype_name(weight.dtype()), ", expected float32 or bfloat16");
  VITRT_CHECK(tile >= 1 && tile_mask.dim() == weight.dim() && tile_mask.dtype() == DType::U8, InvalidArgument,
              "supermask_fold: a U8 mask of the weight's rank and a tile >= 1 are needed");
  for (int64_t d = 0; d < weight.dim(); ++d)
    VITRT_CHECK(ceil_div(weight.size(d), tile) == tile_mask.size(d) ||
                    (weight.size(d) == 0 && tile_mask.size(d) == 1),
                CheckpointError, "Supermask scores ", shape_str(tile_mask.shape()), " do not tile weight ",
                shape_str(weight.shape()), " in tiles of ", tile);
  const DType dt = weight.dtype();
  const std::vector<float> w = values_f32(weight, "Supermask weight");
  const bool transform = scale != 1.0f || shift != 0.0f;
  const uint8_t* m = tile_mask.data<uint8_t>();
  const int64_t dims = weight.dim(), n = weight.numel();
  std::vector<int64_t> index(dims, 0);
  int64_t tile_offset = 0;  // row-major offset of the current element's tile in the mask
  std::vector<int64_t> mask_stride(dims, 1);
  for (int64_t d = dims - 1; d > 0; --d) mask_stride[d - 1] = mask_stride[d] * tile_mask.size(d);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    float v = w[i];
    if (transform) {
      v = round_to(dt, v * scale);  // weight * scale
      v = round_to(dt, v + shift);  // ... + shift
    }
    out[i] = round_to(dt, v * static_cast<float>(m[tile_offset]));  // ... * subnet
    for (int64_t d = dims - 1; d >= 0; --d) {  // odometer over the weight's index
      const int64_t before = index[d] / tile;
      if (++index[d] < weight.size(d)) {
        tile_offset += (index[d] / tile - before) * mask_stride[d];
        break;
      }
      index[d] = 0;
      tile_offset -= before * mask_stride[d];
    }
  }
  Tensor f = Tensor::from_vector(out, weight.shape());
  if (dt == DType::F32) return f;
  Tensor b = Tensor::empty(weight.shape(), DType::BF16);
  auto* p = b.data<uint16_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(out[i]);  // exact: out holds bfloat16 values
  return b;
}

bool has_supermasks(const StateDict& sd) { return !supermask_layers(sd).empty(); }

SupermaskSettings supermask_settings(const std::map<std::string, std::string>& settings) {
  // A number among the settings, if present and numeric.
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = settings.find(key);
    if (it == settings.end() || it->second.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (*end != '\0') return std::nullopt;
    return v;
  };
  SupermaskSettings out;
  if (auto v = number("args.sparsity_linear")) out.sparsity = *v;
  if (auto t = number("args.sp_linear_tile_size"); t && *t >= 1 && *t <= 1 << 20 && *t == std::floor(*t))
    out.tile = static_cast<int>(*t);
  if (auto it = settings.find("args.model"); it != settings.end()) out.model = it->second;
  try {
    if (!out.model.empty()) out.num_heads = VitConfig::preset(out.model).num_heads;
  } catch (const InvalidArgument&) {  // not a torchvision preset: the heads are not recorded
  }
  return out;
}

SupermaskCheckpoint fold_supermask_checkpoint(TorchCheckpoint ck, const std::string& path, double sparsity, int tile) {
  VITRT_CHECK(has_supermasks(ck.state_dict), InvalidArgument, "checkpoint '", path,
              "' has no Supermask layers ('<layer>.scores' next to '<layer>.weight')");
  SupermaskCheckpoint out;
  out.recorded = supermask_settings(ck.settings);
  out.sparsity = sparsity >= 0 ? sparsity : out.recorded.sparsity;
  VITRT_CHECK(out.sparsity >= 0, InvalidArgument, "Supermask checkpoint '", path,
              "' does not record the sparsity it was trained at (no args.sparsity_linear): give it, e.g. "
              "vitrt sparsify --supermask --sparsity S");
  VITRT_CHECK(out.sparsity < 1.0, InvalidArgument, "Supermask sparsity ", out.sparsity, " must lie in [0, 1)");
  out.tile = tile > 0 ? tile : out.recorded.tile > 0 ? out.recorded.tile : infer_supermask_tile(ck.state_dict);
  out.state_dict = fold_supermasks(ck.state_dict, out.sparsity, out.tile, &out.layers);
  return out;
}

SupermaskCheckpoint load_supermask_checkpoint(const std::string& path, double sparsity, int tile, bool ema) {
  TorchCheckpoint ck = load_torch_checkpoint_with_settings(path, ema ? "model_ema" : "");
  if (ema) {  // torch.optim.swa_utils.AveragedModel: "module."-prefixed weights and a step count
    StateDict sd;
    for (auto& [k, t] : ck.state_dict)
      if (k.rfind("module.", 0) == 0) sd.emplace(k.substr(7), t);
    ck.state_dict = std::move(sd);
  }
  return fold_supermask_checkpoint(std::move(ck), path, sparsity, tile);
}

int supermask_bsr_block(int tile) {
  for (int b : {64, 32, 16})
    if (tile % b == 0) return b;
  return 0;
}

StateDict fold_supermasks(const StateDict& sd, double sparsity, int tile, std::vector<SupermaskLayer>* report) {
  VITRT_CHECK(sparsity >= 0.0 && sparsity < 1.0, InvalidArgument, "Supermask sparsity ", sparsity,
              " must lie in [0, 1)");
  const std::vector<LayerKeys> layers = supermask_layers(sd);
  if (tile <= 0) tile = infer_supermask_tile(sd);
  StateDict out = sd;
  for (const LayerKeys& l : layers) {
    const Tensor &w = sd.at(l.weight), &s = sd.at(l.scores);
    check_scores_shape(w, s, l.prefix);
    SupermaskLayer r;
    r.name = l.prefix;
    r.tile = tile;
    r.tiles = s.numel();
    r.sparsity = supermask_layer_sparsity(sparsity, r.tiles);
    r.applied = mask_reaches_output(l.prefix);
    const Tensor mask = supermask_tile_mask(s, r.sparsity);
    for (int64_t i = 0; i < mask.numel(); ++i) r.kept_tiles += mask.data<uint8_t>()[i];
    if (r.applied) {
      const float scale = transform_value(sd, l.prefix + ".scale", 1.0f);
      const float shift = transform_value(sd, l.prefix + ".shift", 0.0f);
      out[l.weight] = supermask_fold(w, mask, tile, scale, shift);
    }
    out.erase(l.scores);
    out.erase(l.prefix + ".scale");
    out.erase(l.prefix + ".shift");
    if (report) report->push_back(r);
  }
  return out;
}

}  // namespace vitrt
