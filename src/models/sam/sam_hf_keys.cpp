#include "models/sam/sam_hf_keys.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

namespace vitrt {
namespace {

constexpr const char* kPromptPe = "prompt_encoder.shared_embedding.positional_embedding";
constexpr const char* kSharedPe = "shared_image_embedding.positional_embedding";

std::vector<std::string> split(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(key.substr(start, dot - start));
  parts.push_back(key.substr(start));
  return parts;
}

std::string join(const std::vector<std::string>& parts, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) out += (i > from ? "." : "") + parts[i];
  return out;
}

// A small decimal index (bounded so std::stoi cannot throw).
bool is_index(const std::string& s) {
  return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool one_of(const std::string& s, std::initializer_list<std::string_view> options) {
  for (std::string_view o : options)
    if (s == o) return true;
  return false;
}

// Replaces `part` by table[part] when present; returns whether it did.
bool rename(std::string& part, const std::map<std::string_view, std::string_view>& table) {
  auto it = table.find(part);
  if (it == table.end()) return false;
  part = it->second;
  return true;
}

// transformers' SamFeedForward (proj_in, layers[0..n-3], proj_out) is segment-anything's MLP
// layers[0..n-1]. `mlp` is the part index where those names start; `hidden` counts the
// middle layers of that MLP (so proj_out becomes layers.<hidden + 1>).
bool rename_mlp(std::vector<std::string>& p, size_t mlp, int hidden) {
  if (p.size() <= mlp) return false;
  if (p[mlp] == "proj_in") {
    p[mlp] = "layers";
    p.insert(p.begin() + mlp + 1, "0");
  } else if (p[mlp] == "proj_out") {
    p[mlp] = "layers";
    p.insert(p.begin() + mlp + 1, std::to_string(hidden + 1));
  } else if (p[mlp] == "layers" && p.size() > mlp + 1 && is_index(p[mlp + 1])) {
    p[mlp + 1] = std::to_string(std::stoi(p[mlp + 1]) + 1);
  } else {
    return false;
  }
  return true;
}

// Official name of one HF key, or "" when unknown. `hidden` gives the hidden-layer count of each
// feed-forward head, keyed by its HF prefix.
std::string official_name(const std::string& hf, const std::map<std::string, int>& hidden) {
  std::vector<std::string> p = split(hf);
  auto hidden_of = [&](size_t mlp) {
    auto it = hidden.find(join(std::vector<std::string>(p.begin(), p.begin() + mlp)));
    return it == hidden.end() ? 0 : it->second;
  };
  if (hf == kPromptPe || hf == kSharedPe) return "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix";
  if (p.size() < 2) return "";
  if (p[0] == "vision_encoder") {
    p[0] = "image_encoder";
    if (p[1] == "pos_embed") return join(p);
    if (p[1] == "patch_embed" && p.size() == 4 && p[2] == "projection") { p[2] = "proj"; return join(p); }
    if (p[1] == "neck" && p.size() == 4 &&
        rename(p[2], {{"conv1", "0"}, {"layer_norm1", "1"}, {"conv2", "2"}, {"layer_norm2", "3"}}))
      return join(p);
    if (p[1] == "layers" && p.size() >= 5 && is_index(p[2])) {
      p[1] = "blocks";
      if (rename(p[3], {{"layer_norm1", "norm1"}, {"layer_norm2", "norm2"}}) ||
          (p[3] == "attn" && one_of(p[4], {"qkv", "proj", "rel_pos_h", "rel_pos_w"})) ||
          (p[3] == "mlp" && one_of(p[4], {"lin1", "lin2"})))
        return join(p);
    }
    return "";
  }
  if (p[0] == "prompt_encoder") {
    if (p[1] == "point_embed") { p[1] = "point_embeddings"; return join(p); }
    if (p[1] == "not_a_point_embed" || p[1] == "no_mask_embed") return join(p);
    if (p[1] == "mask_embed" && p.size() == 4 &&
        rename(p[2], {{"conv1", "0"}, {"layer_norm1", "1"}, {"conv2", "3"}, {"layer_norm2", "4"}, {"conv3", "6"}})) {
      p[1] = "mask_downscaling";
      return join(p);
    }
    return "";
  }
  if (p[0] == "mask_decoder") {
    if (p[1] == "iou_token" || p[1] == "mask_tokens") return join(p);
    if (p.size() == 3 && rename(p[1], {{"upscale_conv1", "output_upscaling.0"},
                                       {"upscale_layer_norm", "output_upscaling.1"},
                                       {"upscale_conv2", "output_upscaling.3"}}))
      return join(p);
    if (p[1] == "iou_prediction_head" && rename_mlp(p, 2, hidden_of(2))) return join(p);
    if (p[1] == "output_hypernetworks_mlps" && p.size() > 3 && is_index(p[2]) && rename_mlp(p, 3, hidden_of(3)))
      return join(p);
    if (p[1] == "transformer" && p.size() >= 4) {
      if (p[2] == "layer_norm_final_attn") { p[2] = "norm_final_attn"; return join(p); }
      if (p[2] == "final_attn_token_to_image" && one_of(p[3], {"q_proj", "k_proj", "v_proj", "out_proj"}))
        return join(p);
      if (p[2] == "layers" && p.size() >= 5 && is_index(p[3])) {
        const std::string& m = p[4];
        if (one_of(m, {"layer_norm1", "layer_norm2", "layer_norm3", "layer_norm4"})) {
          p[4] = "norm" + m.substr(10);
          return join(p);
        }
        if (p.size() == 7 && ((one_of(m, {"self_attn", "cross_attn_token_to_image", "cross_attn_image_to_token"}) &&
                               one_of(p[5], {"q_proj", "k_proj", "v_proj", "out_proj"})) ||
                              (m == "mlp" && one_of(p[5], {"lin1", "lin2"}))))
          return join(p);
      }
    }
    return "";
  }
  return "";
}

}  // namespace

bool is_hf_sam_state_dict(const StateDict& sd) {
  for (const auto& [name, t] : sd) {
    if (name.starts_with("vision_encoder.") || name == kSharedPe || name == kPromptPe) return true;
  }
  return false;
}

StateDict sam_state_dict_from_hf(StateDict hf) {
  // Hidden-layer count of each feed-forward head: the number of its "layers.<k>" entries.
  std::map<std::string, int> hidden;
  for (const auto& [name, t] : hf) {
    for (const char* head : {"mask_decoder.iou_prediction_head.", "mask_decoder.output_hypernetworks_mlps."}) {
      if (!name.starts_with(head)) continue;
      std::vector<std::string> p = split(name);
      size_t mlp = std::string_view(head) == "mask_decoder.iou_prediction_head." ? 2 : 3;
      if (p.size() > mlp + 1 && p[mlp] == "layers" && is_index(p[mlp + 1])) {
        int& n = hidden[join(std::vector<std::string>(p.begin(), p.begin() + mlp))];
        n = std::max(n, std::stoi(p[mlp + 1]) + 1);
      }
    }
  }

  StateDict out;
  for (auto& [name, tensor] : hf) {
    // The tied copy: the prompt encoder's entry wins when both are present.
    if (name == kSharedPe && hf.count(kPromptPe)) continue;
    std::string official = official_name(name, hidden);
    VITRT_CHECK(!official.empty(), CheckpointError, "Hugging Face SAM checkpoint: unrecognised key '", name, "'");
    VITRT_CHECK(!out.count(official), CheckpointError, "Hugging Face SAM checkpoint: keys map twice to '", official, "'");
    out[official] = std::move(tensor);
  }
  return out;
}

}  // namespace vitrt
