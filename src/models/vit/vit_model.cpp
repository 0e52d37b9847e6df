// Loading and running the ViT classifier: state_dict -> config -> strictly checked weights ->
// forward through the device-agnostic ops (so the CUDA backend runs it unchanged).
#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/vitrt_model_file.h"
#include "models/sam/weights.h"
#include "models/random_weights.h"
#include "models/vit/vit_model.h"
#include "ops/ops.h"
#include "vitrt/supermask.h"

namespace vitrt {

namespace {
constexpr float kVitLayerNormEps = 1e-6f;  // partial(nn.LayerNorm, eps=1e-6) everywhere in the model
constexpr int kPresetHeadDim = 64;         // vit_b/l/h: 768/12, 1024/16, 1280/16

const Tensor& need(const StateDict& sd, const std::string& key, int64_t dims) {
  auto it = sd.find(key);
  VITRT_CHECK(it != sd.end(), CheckpointError, "not a torchvision VisionTransformer state_dict: tensor '", key,
              "' is missing");
  VITRT_CHECK(it->second.dim() == dims, CheckpointError, "checkpoint tensor '", key, "' has shape ",
              shape_str(it->second.shape()), ", expected ", dims, " dimensions");
  return it->second;
}
}  // namespace

VitConfig VitConfig::vit_b_16() { return {"vit_b_16", 224, 16, 768, 12, 12, 3072, 1000}; }
VitConfig VitConfig::vit_l_16() { return {"vit_l_16", 224, 16, 1024, 24, 16, 4096, 1000}; }
VitConfig VitConfig::vit_h_14() { return {"vit_h_14", 224, 14, 1280, 32, 16, 5120, 1000}; }
VitConfig VitConfig::preset(const std::string& name) {
  if (name == "vit_b_16") return vit_b_16();
  if (name == "vit_l_16") return vit_l_16();
  if (name == "vit_h_14") return vit_h_14();
  throw InvalidArgument("unknown ViT preset '" + name + "': expected vit_b_16, vit_l_16 or vit_h_14");
}

namespace {
// The config of a state_dict whose MLP weights may be given block-sparse in `sparse` instead.
VitConfig config_from_state_dict(const StateDict& sd, const std::map<std::string, BsrMatrix>* sparse,
                                 int num_heads) {
  VITRT_CHECK(!sd.count("heads.pre_logits.weight"), CheckpointError,
              "this VisionTransformer has a representation layer (heads.pre_logits), which vitrt does not support");
  VITRT_CHECK(!sd.count("conv_proj.conv_last.weight"), CheckpointError,
              "this VisionTransformer has a convolutional stem (conv_proj.conv_last), which vitrt does not support");
  VitConfig c;
  const Tensor& conv = need(sd, "conv_proj.weight", 4);
  c.hidden_dim = static_cast<int>(conv.size(0));
  c.patch_size = static_cast<int>(conv.size(2));
  VITRT_CHECK(conv.size(1) == 3 && conv.size(2) == conv.size(3) && c.patch_size > 0, CheckpointError,
              "checkpoint tensor 'conv_proj.weight' has shape ", shape_str(conv.shape()),
              ", expected [hidden, 3, patch, patch]");
  const Tensor& pos = need(sd, "encoder.pos_embedding", 3);
  const int64_t patches = pos.size(1) - 1;
  const int64_t grid = std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(patches, 0))));
  VITRT_CHECK(pos.size(0) == 1 && patches >= 1 && grid * grid == patches && pos.size(2) == c.hidden_dim,
              CheckpointError, "checkpoint tensor 'encoder.pos_embedding' has shape ", shape_str(pos.shape()),
              ", expected [1, g*g + 1, ", c.hidden_dim, "] for a square grid of patches plus the class token");
  c.image_size = static_cast<int>(grid) * c.patch_size;

  // Layers: encoder.layers.encoder_layer_<i>.*, numbered 0..n-1 without gaps.
  static const std::regex layer_key(R"(encoder\.layers\.encoder_layer_(\d+)\..*)");
  std::set<int> ids;
  for (const auto& [key, t] : sd) {
    std::smatch m;
    if (std::regex_match(key, m, layer_key)) ids.insert(std::stoi(m[1].str()));
  }
  VITRT_CHECK(!ids.empty(), CheckpointError, "not a torchvision VisionTransformer state_dict: no encoder.layers");
  c.num_layers = static_cast<int>(ids.size());
  VITRT_CHECK(*ids.rbegin() == c.num_layers - 1, CheckpointError, "checkpoint encoder layers are not numbered 0..",
              c.num_layers - 1, " (found encoder_layer_", *ids.rbegin(), ")");
  const std::string fc1_0 = "encoder.layers.encoder_layer_0.mlp.0.weight";
  if (sparse && sparse->count(fc1_0)) c.mlp_dim = static_cast<int>(sparse->at(fc1_0).rows);
  else c.mlp_dim = static_cast<int>(need(sd, fc1_0, 2).size(0));
  c.num_classes = static_cast<int>(need(sd, "heads.head.weight", 2).size(0));

  c.num_heads = num_heads > 0 ? num_heads : c.hidden_dim / kPresetHeadDim;
  VITRT_CHECK(c.num_heads > 0 && c.hidden_dim % c.num_heads == 0, CheckpointError, "hidden size ", c.hidden_dim,
              " does not split into ", c.num_heads, " attention heads",
              num_heads > 0 ? "" : " (the default of 64 per head; give the head count explicitly)");
  for (const char* preset : {"vit_b_16", "vit_l_16", "vit_h_14"}) {
    VitConfig p = VitConfig::preset(preset);
    if (p.patch_size == c.patch_size && p.hidden_dim == c.hidden_dim && p.num_layers == c.num_layers &&
        p.num_heads == c.num_heads && p.mlp_dim == c.mlp_dim)
      c.name = preset;
  }
  return c;
}
}  // namespace

VitConfig vit_config_from_state_dict(const StateDict& sd, int num_heads) {
  return config_from_state_dict(sd, nullptr, num_heads);
}

namespace {
vit::NormW take_norm(sam::WeightReader& r, const std::string& p, int64_t dim) {
  return {r.take(p + ".weight", {dim}), r.take(p + ".bias", {dim})};
}
vit::LinearW take_linear(sam::WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.take(p + ".weight", {out, in}), r.take(p + ".bias", {out})};
}
}  // namespace

std::shared_ptr<VitModel> VitModel::from_state_dict(const StateDict& sd, const VitConfig& c,
                                                    const std::map<std::string, BsrMatrix>* sparse) {
  VITRT_CHECK(c.patch_size > 0 && c.image_size % c.patch_size == 0 && c.hidden_dim > 0 && c.num_heads > 0 &&
                  c.hidden_dim % c.num_heads == 0 && c.num_layers > 0 && c.mlp_dim > 0 && c.num_classes > 0,
              InvalidArgument, "invalid ViT config: image ", c.image_size, ", patch ", c.patch_size, ", hidden ",
              c.hidden_dim, ", heads ", c.num_heads, ", layers ", c.num_layers, ", mlp ", c.mlp_dim, ", classes ",
              c.num_classes);
  if (sparse) {  // first, so a misplaced BSR weight is named rather than reported missing
    static const std::regex mlp_weight(R"(encoder\.layers\.encoder_layer_(\d+)\.mlp\.(0|3)\.weight)");
    for (const auto& [name, m] : *sparse) {
      std::smatch sm;
      VITRT_CHECK(std::regex_match(name, sm, mlp_weight) && sm[1].length() < 8 &&
                      std::stoi(sm[1].str()) < c.num_layers, CheckpointError,
                  "block-sparse weight '", name,
                  "' has no place in the ViT: only encoder.layers.encoder_layer_<i>.mlp.{0,3}.weight may be BSR");
    }
  }
  auto m = std::make_shared<VitModel>();
  m->config = c;
  sam::WeightReader r(sd);
  const int64_t C = c.hidden_dim, p = c.patch_size, T = c.num_tokens();
  m->conv_proj_w = r.take("conv_proj.weight", {C, 3, p, p});
  m->conv_proj_b = r.take("conv_proj.bias", {C});
  m->class_token = r.take("class_token", {1, 1, C});
  m->pos_embedding = r.take("encoder.pos_embedding", {1, T, C}).reshape({T, C});
  m->layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    vit::EncoderLayerW& l = m->layers[i];
    const std::string lp = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
    l.ln_1 = take_norm(r, lp + "ln_1", C);
    l.ln_2 = take_norm(r, lp + "ln_2", C);
    // Kept packed ([q; k; v] along the rows, as nn.MultiheadAttention stores it): one GEMM per layer.
    l.qkv = {r.take(lp + "self_attention.in_proj_weight", {3 * C, C}),
             r.take(lp + "self_attention.in_proj_bias", {3 * C})};
    l.out_proj = take_linear(r, lp + "self_attention.out_proj", C, C);
    if (!sparse) {
      l.mlp_fc1 = take_linear(r, lp + "mlp.0", c.mlp_dim, C);
      l.mlp_fc2 = take_linear(r, lp + "mlp.3", C, c.mlp_dim);
      continue;
    }
    // Block-sparse or dense, per weight; the bias is always dense.
    auto take_mlp = [&](const std::string& p, int64_t out, int64_t in, std::optional<BsrMatrix>& bsr) {
      auto it = sparse->find(p + ".weight");
      if (it == sparse->end()) return take_linear(r, p, out, in);
      const BsrMatrix& m = it->second;
      VITRT_CHECK(m.rows == out && m.cols == in, CheckpointError, "block-sparse weight '", it->first, "' is [",
                  m.rows, ", ", m.cols, "], the model expects [", out, ", ", in, "]");
      VITRT_CHECK(!sd.count(it->first), CheckpointError, "weight '", it->first, "' is both dense and block-sparse");
      bsr = m;
      return vit::LinearW{Tensor(), r.take(p + ".bias", {out})};
    };
    l.mlp_fc1 = take_mlp(lp + "mlp.0", c.mlp_dim, C, l.mlp_fc1_bsr);
    l.mlp_fc2 = take_mlp(lp + "mlp.3", C, c.mlp_dim, l.mlp_fc2_bsr);
    // Both block-sparse: the blocks whose work does not depend on the image go (hidden blocks nobody
    // reads; constant hidden blocks folded into fc2's bias). Kept as they are if that would leave
    // a weight without blocks.
    if (l.mlp_fc1_bsr && l.mlp_fc2_bsr && l.mlp_fc1_bsr->block == l.mlp_fc2_bsr->block && ops::bsr_mlp_simplify_on()) {
      ops::SimplifiedBsrMlp s = ops::simplify_bsr_mlp(*l.mlp_fc1_bsr, l.mlp_fc1.b, *l.mlp_fc2_bsr, l.mlp_fc2.b);
      if (s.fc1.nnz_blocks() > 0 && s.fc2.nnz_blocks() > 0) {
        m->mlp_fc1_blocks_dropped += s.fc1_blocks_dropped;
        m->mlp_fc2_blocks_folded += s.fc2_blocks_folded;
        l.mlp_fc1_bsr = std::move(s.fc1);
        l.mlp_fc2_bsr = std::move(s.fc2);
        l.mlp_fc2.b = s.b2;
      }
    }
  }
  m->encoder_ln = take_norm(r, "encoder.ln", C);
  m->head = take_linear(r, "heads.head", c.num_classes, C);
  r.expect_all_used();
  return m;
}

std::shared_ptr<VitModel> VitModel::to(Device dev, DType dt) const {
  VITRT_CHECK(dt == DType::F32 || dt == DType::BF16, InvalidArgument, "the ViT computes in float32 or bfloat16, not ",
              dtype_name(dt));
  VITRT_CHECK(dev == Device::CUDA || dt == DType::F32, InvalidArgument, "the CPU backend computes in float32 only");
  auto m = std::make_shared<VitModel>(*this);
  m->device = dev;
  m->dtype = dt;
  auto upload = [&](Tensor& t) { t = ops::cast(t.to_f32().to(dev), dt); };
  // Block-sparse weights keep their host arrays (the CPU kernels and validate() read those); on
  // CUDA they also get device copies in the compute dtype, uploaded here once.
  auto upload_bsr = [&](std::optional<BsrMatrix>& w) {
    if (!w) return;
    if (dev == Device::CUDA) {
      w = bsr_to_cuda(*w, dt);
    } else {
      w->cuda = BsrCudaArrays{};
    }
  };
  auto lin = [&](vit::LinearW& l) {
    if (l.w.defined()) upload(l.w);  // undefined when the weight is block-sparse
    upload(l.b);
  };
  auto norm = [&](vit::NormW& n) { upload(n.w); upload(n.b); };
  for (Tensor* t : {&m->conv_proj_w, &m->conv_proj_b, &m->class_token, &m->pos_embedding}) upload(*t);
  for (vit::EncoderLayerW& l : m->layers) {
    norm(l.ln_1); norm(l.ln_2);
    lin(l.qkv); lin(l.out_proj); lin(l.mlp_fc1); lin(l.mlp_fc2);
    upload_bsr(l.mlp_fc1_bsr);
    upload_bsr(l.mlp_fc2_bsr);
    l.mlp_plan = dev == Device::CUDA && l.mlp_fc1_bsr && l.mlp_fc2_bsr
                     ? ops::plan_bsr_mlp(*l.mlp_fc1_bsr, *l.mlp_fc2_bsr, dt)
                     : nullptr;
  }
  norm(m->encoder_ln);
  lin(m->head);
  return m;
}

namespace {
// The MLP half of an EncoderBlock: x + mlp(ln_2(x)).
Tensor encoder_mlp_forward(const vit::EncoderLayerW& l, const Tensor& h) {
  Tensor m = ops::layer_norm(h, l.ln_2.w, l.ln_2.b, kVitLayerNormEps);
  if (l.mlp_fc1_bsr && l.mlp_fc2_bsr)
    return ops::mlp_bsr(m, *l.mlp_fc1_bsr, l.mlp_fc1.b, *l.mlp_fc2_bsr, l.mlp_fc2.b, h, l.mlp_plan.get());
  m = l.mlp_fc1_bsr ? ops::linear_bsr(m, *l.mlp_fc1_bsr, &l.mlp_fc1.b, ops::Activation::GELU)
                    : ops::linear(m, l.mlp_fc1.w, &l.mlp_fc1.b, ops::Activation::GELU);
  if (!l.mlp_fc2_bsr) return ops::linear(m, l.mlp_fc2.w, &l.mlp_fc2.b, ops::Activation::None, &h);
  return ops::linear_bsr(m, *l.mlp_fc2_bsr, &l.mlp_fc2.b, ops::Activation::None, &h);
}

// EncoderBlock.forward (dropouts are identities in eval).
Tensor encoder_layer_forward(const vit::EncoderLayerW& l, int num_heads, const Tensor& x) {
  Tensor t = ops::layer_norm(x, l.ln_1.w, l.ln_1.b, kVitLayerNormEps);
  Tensor qkv = ops::linear(t, l.qkv.w, &l.qkv.b);  // [B, T, 3C]
  Tensor a = ops::attention_packed_qkv(qkv, num_heads);
  Tensor h = ops::linear(a, l.out_proj.w, &l.out_proj.b, ops::Activation::None, &x);
  return encoder_mlp_forward(l, h);
}

// The last EncoderBlock for the class token only, x [B, T, C] -> [B, 1, C]: the classifier reads
// nothing else, and every step after the keys and values is per token. So the class token's query,
// its row of attention, out_proj, ln_2 and the MLP run on B rows instead of B x T (for ViT-B/16 at
// 197 tokens, about a twelfth of the model's work); keys and values still come from every token.
Tensor class_token_layer_forward(const vit::EncoderLayerW& l, int num_heads, const Tensor& x) {
  const int64_t C = x.size(2);
  Tensor t = ops::layer_norm(x, l.ln_1.w, l.ln_1.b, kVitLayerNormEps);
  // in_proj's rows are [q; k; v]: the k / v rows for every token, the q rows for the class token.
  const Tensor w_kv = l.qkv.w.slice0(C, 3 * C), b_kv = l.qkv.b.slice0(C, 3 * C);
  const Tensor w_q = l.qkv.w.slice0(0, C), b_q = l.qkv.b.slice0(0, C);
  const Tensor kv = ops::linear(t, w_kv, &b_kv);  // [B, T, 2C]
  const Tensor q = ops::linear(ops::narrow(t, 1, 0, 1), w_q, &b_q);  // [B, 1, C]
  const Tensor a = ops::attention_packed_kv(q, kv, num_heads);  // [B, 1, C]
  const Tensor x0 = ops::narrow(x, 1, 0, 1);
  const Tensor h = ops::linear(a, l.out_proj.w, &l.out_proj.b, ops::Activation::None, &x0);
  return encoder_mlp_forward(l, h);
}
}  // namespace

Tensor VitModel::forward(const Tensor& images) const { return forward_device(images).to(Device::CPU); }

Tensor VitModel::forward_device(const Tensor& images) const {
  const VitConfig& c = config;
  const int64_t S = c.image_size, C = c.hidden_dim, g = c.grid_size();
  VITRT_CHECK(images.dim() == 4 && images.size(0) >= 1 && images.size(1) == S && images.size(2) == S &&
                  images.size(3) == 3,
              InvalidArgument, "ViT input must be [B, ", S, ", ", S, ", 3], got ", shape_str(images.shape()));
  const int64_t B = images.size(0);
  Tensor x = ops::cast(images.device() == device ? images : images.to(device), dtype);
  // _process_input: conv_proj, then tokens in row-major patch order (NHWC gives that directly).
  x = ops::conv2d_nhwc(x, conv_proj_w, &conv_proj_b, c.patch_size, 0).reshape({B, g * g, C});
  // The class token for every image: zeros + broadcast add, two launches (a cat of B copies was B).
  Tensor cls = class_token;
  if (B > 1) {
    cls = Tensor::zeros({B, 1, C}, dtype, device);
    ops::add_(cls, class_token.reshape({C}));
  }
  x = ops::cat({cls, x}, 1);  // [B, T, C]
  ops::add_(x, pos_embedding);
  for (size_t i = 0; i + 1 < layers.size(); ++i) x = encoder_layer_forward(layers[i], c.num_heads, x);
  // The head reads only the class token, and the final LayerNorm is per token: the last layer and
  // the norm run for that token alone.
  Tensor cls_out = class_token_layer_forward(layers.back(), c.num_heads, x).reshape({B, C});
  cls_out = ops::layer_norm(cls_out, encoder_ln.w, encoder_ln.b, kVitLayerNormEps);
  Tensor logits = ops::linear(cls_out, head.w, &head.b);
  return ops::cast(logits, DType::F32);
}

int VitModel::num_bsr_linears() const {
  int n = 0;
  for (const vit::EncoderLayerW& l : layers) n += l.mlp_fc1_bsr.has_value() + l.mlp_fc2_bsr.has_value();
  return n;
}

std::shared_ptr<const VitModel> vit_from_sparse_state_dict(const StateDict& dense,
                                                           const std::map<std::string, BsrMatrix>& sparse,
                                                           Device device, DType dtype, int num_heads) {
  auto model = VitModel::from_state_dict(dense, config_from_state_dict(dense, &sparse, num_heads), &sparse);
  if (device == Device::CPU && dtype == DType::F32) return model;
  return model->to(device, dtype);
}

int VitModel::num_fused_mlps(int64_t batch) const {
  int n = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const vit::EncoderLayerW& l = layers[i];
    // (the last layer's MLP runs on the class tokens only: class_token_layer_forward)
    const int64_t rows = i + 1 < layers.size() ? batch * config.num_tokens() : batch;
    n += l.mlp_fc1_bsr && l.mlp_fc2_bsr && ops::mlp_bsr_fused_for(*l.mlp_fc1_bsr, *l.mlp_fc2_bsr, rows, l.mlp_plan.get());
  }
  return n;
}

int vit_num_bsr_linears(const VitModel& model) { return model.num_bsr_linears(); }
int vit_num_fused_mlps(const VitModel& model, int64_t batch) { return model.num_fused_mlps(batch); }

std::shared_ptr<const VitModel> vit_from_state_dict(const StateDict& sd, Device device, DType dtype, int num_heads) {
  // Scores would otherwise be refused as unused tensors; say what they are and what to do.
  VITRT_CHECK(!has_supermasks(sd), CheckpointError,
              "the checkpoint holds SuperBlock Supermask scores ('<layer>.scores'): its masks must be folded into "
              "the weights first: vitrt sparsify --supermask --checkpoint <file> --out <model file>");
  auto model = VitModel::from_state_dict(sd, vit_config_from_state_dict(sd, num_heads));
  if (device == Device::CPU && dtype == DType::F32) return model;
  return model->to(device, dtype);
}

namespace {
// A SuperBlock Supermask checkpoint, loaded, taken as it is: folded at the sparsity it records, its MLP
// weights packed to BSR in the block that stores exactly the kept tiles (as `vitrt sparsify
// --supermask` would write them), the rest dense. Heads: the caller's, else the preset of its
// args.model, else hidden / 64.
std::shared_ptr<const VitModel> vit_from_supermask_checkpoint(TorchCheckpoint loaded, const std::string& path,
                                                              Device device, DType dtype, int num_heads) {
  const SupermaskCheckpoint ck = fold_supermask_checkpoint(std::move(loaded), path);
  if (num_heads <= 0) num_heads = ck.recorded.num_heads;
  const int block = supermask_bsr_block(ck.tile);
  if (block == 0) return vit_from_state_dict(ck.state_dict, device, dtype, num_heads);  // (masked, dense)
  static const std::regex mlp_weight(R"(encoder\.layers\.encoder_layer_\d+\.mlp\.(0|3)\.weight)");
  StateDict dense;
  std::map<std::string, BsrMatrix> sparse;
  for (const auto& [name, t] : ck.state_dict) {
    if (std::regex_match(name, mlp_weight) && t.dim() == 2 && t.size(0) % block == 0 && t.size(1) % block == 0)
      sparse.emplace(name, bsr_from_dense(t, block));
    else
      dense.emplace(name, t);
  }
  return vit_from_sparse_state_dict(dense, sparse, device, dtype, num_heads);
}
}  // namespace

int vit_sidecar_num_heads(const std::string& checkpoint_path) {
  const std::string json_path = checkpoint_path + ".json";
  if (!std::filesystem::exists(json_path)) return 0;
  std::ifstream in(json_path);
  VITRT_CHECK(in.good(), IoError, "cannot open model config '", json_path, "'");
  int num_heads = 0;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.contains("num_heads")) num_heads = j.at("num_heads").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(detail::concat("model config '", json_path, "': ", e.what()));
  }
  VITRT_CHECK(num_heads > 0, InvalidArgument, "model config '", json_path, "': num_heads must be positive");
  return num_heads;
}

std::shared_ptr<const VitModel> load_vit(const std::string& checkpoint_path, Device device, DType dtype,
                                         int num_heads) {
  // A vitrt model file (safetensors with BSR weights, from `vitrt sparsify`)? Plain safetensors and
  // .pth files take the dense path below as before.
  std::optional<io::ModelFile> model_file;
  bool torch_zip = false;
  {
    std::ifstream probe(checkpoint_path, std::ios::binary);
    char head[9] = {};
    probe.read(head, 9);
    torch_zip = probe.gcount() >= 2 && head[0] == 'P' && head[1] == 'K';
    if (probe.gcount() == 9 && head[8] == '{') {
      io::ModelFile f = io::load_model_file(checkpoint_path);
      if (!f.sparse.empty()) model_file = std::move(f);
    }
  }
  // A torch.save archive with what its training script saved beside the weights (a Supermask
  // checkpoint's args), so that such a checkpoint is read once.
  TorchCheckpoint ck;
  if (torch_zip) ck = load_torch_checkpoint_with_settings(checkpoint_path);
  else if (!model_file) ck.state_dict = load_state_dict(checkpoint_path);
  if (num_heads <= 0) num_heads = vit_sidecar_num_heads(checkpoint_path);
  if (has_supermasks(ck.state_dict))
    return vit_from_supermask_checkpoint(std::move(ck), checkpoint_path, device, dtype, num_heads);
  if (model_file) {
    // The head count `vitrt sparsify` recorded, when neither the caller nor a sidecar gave one.
    if (auto it = model_file->metadata.find("vit.num_heads"); num_heads <= 0 && it != model_file->metadata.end()) {
      const std::string& v = it->second;
      VITRT_CHECK(!v.empty() && v.size() <= 6 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }),
                  CheckpointError, "model file '", checkpoint_path, "': vit.num_heads '", v, "' is not a head count");
      num_heads = std::stoi(v);
      VITRT_CHECK(num_heads > 0, CheckpointError, "model file '", checkpoint_path, "': vit.num_heads is 0");
    }
    return vit_from_sparse_state_dict(model_file->dense, model_file->sparse, device, dtype, num_heads);
  }
  return vit_from_state_dict(ck.state_dict, device, dtype, num_heads);
}

const VitConfig& vit_config(const VitModel& model) { return model.config; }

Tensor vit_logits(const VitModel& model, const Tensor& images) { return model.forward(images); }

Tensor vit_image_logits(const VitModel& model, std::span<const Image> images) {
  VITRT_CHECK(!images.empty(), InvalidArgument, "vit_image_logits: no images");
  const int crop = model.config.image_size, resize = vit_resize_size(crop);
  const int64_t n = static_cast<int64_t>(images.size()), per_image = int64_t{crop} * crop * 3;
  Tensor batch = Tensor::empty({n, crop, crop, 3});
  // One image per thread (each resize then runs single-threaded: nested regions are inactive). The
  // failure of the lowest-numbered image is rethrown once every thread is done (nothing may leave
  // an OpenMP region), so the error does not depend on the threads' timing.
  std::exception_ptr failure;
  int64_t failed = n;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      const Tensor x = vit_preprocess(images[i], resize, crop);
      std::copy(x.data<float>(), x.data<float>() + per_image, batch.data<float>() + i * per_image);
    } catch (...) {
#pragma omp critical(vit_image_logits_failure)
      if (i < failed) failed = i, failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return model.forward(batch);
}

int vit_resize_size(int crop_size) { return crop_size == 224 ? 256 : crop_size * 8 / 7; }

std::vector<std::pair<int, float>> top_k_softmax(const float* z, int n, int topk) {
  VITRT_CHECK(topk >= 1, InvalidArgument, "topk must be at least 1, got ", topk);
  VITRT_CHECK(n >= 1, InvalidArgument, "softmax over no logits");
  // Softmax in double: probabilities for display, not a reproduction of torch's float softmax.
  double zmax = z[0];
  for (int i = 1; i < n; ++i) zmax = std::max<double>(zmax, z[i]);
  std::vector<double> e(n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += e[i] = std::exp(static_cast<double>(z[i]) - zmax);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  const int k = std::min(topk, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  std::vector<std::pair<int, float>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(order[i], static_cast<float>(e[order[i]] / sum));
  return out;
}

std::vector<std::pair<int, float>> vit_classify(const VitModel& model, const Image& rgb, int topk) {
  VITRT_CHECK(topk >= 1, InvalidArgument, "topk must be at least 1, got ", topk);
  const Tensor logits = vit_image_logits(model, std::span<const Image>(&rgb, 1));
  return top_k_softmax(logits.data<float>(), static_cast<int>(logits.size(1)), topk);
}

std::vector<std::string> read_class_names(const std::string& path) {
  std::ifstream in(path);
  VITRT_CHECK(in.good(), IoError, "cannot open class names file '", path, "'");
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();  // a trailing blank line is no class
  return names;
}

StateDict vit_random_state_dict(const VitConfig& c, uint64_t seed) {
  models::RandomWeights f(seed);
  const int64_t C = c.hidden_dim, p = c.patch_size;
  f.conv("conv_proj", C, 3, p);
  f.normal("class_token", {1, 1, C}, 0.f, 0.02f);
  f.normal("encoder.pos_embedding", {1, c.num_tokens(), C}, 0.f, 0.02f);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string lp = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
    f.norm(lp + "ln_1", C);
    f.normal(lp + "self_attention.in_proj_weight", {3 * C, C}, 0.f, 1.f / std::sqrt(static_cast<float>(C)));
    f.normal(lp + "self_attention.in_proj_bias", {3 * C}, 0.f, 0.02f);
    f.linear(lp + "self_attention.out_proj", C, C);
    f.norm(lp + "ln_2", C);
    f.linear(lp + "mlp.0", c.mlp_dim, C);
    f.linear(lp + "mlp.3", C, c.mlp_dim);
  }
  f.norm("encoder.ln", C);
  f.linear("heads.head", c.num_classes, C);
  return f.sd;
}

}  // namespace vitrt
