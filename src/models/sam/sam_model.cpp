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
  m->image_pe = m->prompt_encoder.dense_pe;
  m->no_mask_dense = m->prompt_encoder.dense_embeddings(sam::ModelPrompt{});
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

namespace {
// Calls f on every weight tensor of the image encoder.
template <class F>
void for_each_encoder_weight(SamModel& m, F&& f) {
  auto lin = [&](sam::LinearW& l) { f(l.w); if (l.b.defined()) f(l.b); };
  auto norm = [&](sam::NormW& n) { f(n.w); f(n.b); };
  sam::ImageEncoder& e = m.image_encoder;
  for (Tensor* t : {&e.patch_w, &e.patch_b, &e.pos_embed, &e.neck_conv1, &e.neck_conv2}) if (t->defined()) f(*t);
  norm(e.neck_norm1);
  norm(e.neck_norm2);
  for (sam::EncoderBlockW& b : e.blocks) {
    norm(b.norm1); norm(b.norm2);
    lin(b.qkv); lin(b.proj); lin(b.lin1); lin(b.lin2);
    if (b.rel_pos_h.defined()) f(b.rel_pos_h);
    if (b.rel_pos_w.defined()) f(b.rel_pos_w);
  }
}
// Calls f on every weight tensor of the mask decoder.
template <class F>
void for_each_decoder_weight(SamModel& m, F&& f) {
  auto lin = [&](sam::LinearW& l) { f(l.w); if (l.b.defined()) f(l.b); };
  auto norm = [&](sam::NormW& n) { f(n.w); f(n.b); };
  sam::MaskDecoder& d = m.mask_decoder;
  auto attn = [&](sam::DecoderAttentionW& a) { lin(a.q); lin(a.k); lin(a.v); lin(a.out); };
  for (sam::DecoderLayerW& l : d.layers) {
    attn(l.self_attn); attn(l.cross_token_to_image); attn(l.cross_image_to_token);
    norm(l.norm1); norm(l.norm2); norm(l.norm3); norm(l.norm4);
    lin(l.lin1); lin(l.lin2);
  }
  attn(d.final_attn);
  norm(d.norm_final);
  for (Tensor* t : {&d.iou_token, &d.mask_tokens, &d.up1_w, &d.up1_b, &d.up2_w, &d.up2_b}) f(*t);
  norm(d.up_norm);
  for (auto& mlp : d.hyper_mlps) for (auto& l : mlp) lin(l);
  for (auto& l : d.iou_head) lin(l);
}
}  // namespace

std::shared_ptr<SamModel> SamModel::to(Device dev, DType dt, std::optional<DType> decoder_dt) const {
  const DType ddt = decoder_dt.value_or(DType::F32);  // see load_sam
  for (DType d : {dt, ddt})
    VITRT_CHECK(d == DType::F32 || d == DType::BF16, InvalidArgument, "SAM computes in float32 or bfloat16, not ",
                dtype_name(d));
  VITRT_CHECK(dev == Device::CUDA || (dt == DType::F32 && ddt == DType::F32), InvalidArgument,
              "the CPU backend computes in float32 only");
  auto m = std::make_shared<SamModel>(*this);
  m->device = dev;
  m->dtype = dt;
  m->decoder_dtype = ddt;
  if (dev == Device::CPU) return m;
  auto upload_as = [&](DType want) {
    return [&, want](Tensor& t) {
      Tensor host = t.to_f32();
      if (want == DType::BF16) {
        Tensor b = Tensor::empty(host.shape(), DType::BF16);
        const float* s = host.data<float>();
        uint16_t* o = b.data<uint16_t>();
        for (int64_t i = 0; i < host.numel(); ++i) o[i] = f32_to_bf16(s[i]);
        host = b;
      }
      t = host.to(dev);
    };
  };
  for_each_encoder_weight(*m, upload_as(dt));
  for_each_decoder_weight(*m, upload_as(ddt));
  upload_as(ddt)(m->image_pe);
  upload_as(ddt)(m->no_mask_dense);
  m->fingerprint = fingerprint;  // same weights, same embeddings (up to precision)
  return m;
}

std::shared_ptr<const SamModel> load_sam(const std::string& checkpoint_path, const std::string& config_path,
                                         Device device, DType dtype, std::optional<DType> decoder_dtype) {
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
  auto model = SamModel::from_state_dict(sd, cfg);
  if (device == Device::CPU && dtype == DType::F32 && decoder_dtype.value_or(DType::F32) == DType::F32) return model;
  return model->to(device, dtype, decoder_dtype);
}

const SamConfig& sam_config(const SamModel& model) { return model.config; }
const std::string& sam_fingerprint(const SamModel& model) { return model.fingerprint; }

}  // namespace vitrt
