// Loading a SAM model: checkpoint -> config -> strictly checked weights.
#include <cstring>
#include <filesystem>

#include "models/sam/sam_hf_keys.h"
#include "models/sam/sam_model.h"
#include "models/sam/weights.h"

namespace vitrt {

namespace {
// FNV-1a over the config and a sample of every weight family: cheap, and different for any two
// checkpoints a user would plausibly mix up.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t hash_tensor(uint64_t h, const Tensor& t) {
  const size_t n = std::min<size_t>(t.nbytes(), 1 << 16);
  return fnv1a(h, t.raw(), n);
}
}  // namespace

std::shared_ptr<SamModel> SamModel::from_state_dict(const StateDict& sd, const SamConfig& cfg) {
  sam::validate_config(cfg);
  auto m = std::make_shared<SamModel>();
  m->config = cfg;
  sam::WeightReader r(sd);
  m->image_encoder.load(r, cfg);
  m->prompt_encoder.load(r, cfg);
  m->mask_decoder.load(r, cfg);
  r.expect_all_used();

  uint64_t h = 0xcbf29ce484222325ull;
  const std::string desc = detail::concat(cfg.name, ":", cfg.img_size, ":", cfg.embed_dim, ":", cfg.depth, ":",
                                          cfg.out_chans);
  h = fnv1a(h, desc.data(), desc.size());
  h = hash_tensor(h, m->image_encoder.patch_w);
  h = hash_tensor(h, m->image_encoder.neck_conv2);
  h = hash_tensor(h, m->image_encoder.blocks.back().lin2.w);
  h = hash_tensor(h, m->prompt_encoder.gaussian);
  h = hash_tensor(h, m->mask_decoder.mask_tokens);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  m->fingerprint = cfg.name + "-" + buf;
  return m;
}

std::shared_ptr<const SamModel> load_sam(const std::string& checkpoint_path, const std::string& config_path) {
  StateDict sd = load_state_dict(checkpoint_path);
  if (is_hf_sam_state_dict(sd)) sd = sam_state_dict_from_hf(std::move(sd));
  SamConfig cfg = sam::config_from_state_dict(sd);
  std::string json = config_path;
  if (json.empty() && std::filesystem::exists(checkpoint_path + ".json")) json = checkpoint_path + ".json";
  if (json.empty()) {
    auto alt = std::filesystem::path(checkpoint_path).replace_extension(".json");
    if (std::filesystem::exists(alt)) json = alt.string();
  }
  if (!json.empty()) sam::apply_config_json(json, cfg);
  return SamModel::from_state_dict(sd, cfg);
}

const SamConfig& sam_config(const SamModel& model) { return model.config; }
const std::string& sam_fingerprint(const SamModel& model) { return model.fingerprint; }

}  // namespace vitrt
