// `vitrt info`: what a checkpoint is, checked by loading it, as JSON. SAM checkpoints (official or
// Hugging Face), torchvision ViT state_dicts, vitrt model files (block-sparse MLPs: per weight its
// block and density, and what `vitrt sparsify` recorded) and SuperBlock Supermask checkpoints
// (per layer its tiles and, at the sparsity it was trained at, how many survive; the training
// args it carries), with the command that turns the last into a model file.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "io/vitrt_model_file.h"
#include "vitrt/checkpoint.h"
#include "vitrt/sam.h"
#include "vitrt/supermask.h"
#include "vitrt/vit.h"

namespace vitrt::cli {
namespace {

using nlohmann::json;

// The first bytes say which container: "PK" a torch.save zip, '{' at 8 safetensors.
std::string sniff(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  in.read(head, 9);
  if (in.gcount() >= 2 && head[0] == 'P' && head[1] == 'K') return "torch";
  if (in.gcount() == 9 && head[8] == '{') return "safetensors";
  return "";
}

json vit_config_json(const VitConfig& c) {
  return {{"image_size", c.image_size}, {"patch_size", c.patch_size}, {"hidden_dim", c.hidden_dim},
          {"num_layers", c.num_layers}, {"num_heads", c.num_heads},   {"mlp_dim", c.mlp_dim},
          {"num_classes", c.num_classes}, {"tokens", c.num_tokens()}};
}

bool is_vit(const StateDict& sd) { return sd.count("conv_proj.weight") && sd.count("class_token"); }

json supermask_info(const std::string& path, const TorchCheckpoint& ck) {
  const StateDict& sd = ck.state_dict;
  json args = json::object();
  for (const auto& [k, v] : ck.settings)
    if (k.rfind("args.", 0) == 0 || k == "epoch") args[k] = v;
  const SupermaskSettings recorded = supermask_settings(ck.settings);
  const double sparsity = recorded.sparsity < 1 ? recorded.sparsity : -1;
  int tile = recorded.tile;
  const std::string tile_source = tile > 0 ? "args.sp_linear_tile_size" : "the scores' shapes";
  json out = {{"kind", "supermask"}, {"settings", args}};
  try {
    if (tile <= 0) tile = infer_supermask_tile(sd);
    out["tile"] = tile;
    out["tile_from"] = tile_source;
  } catch (const Error& e) {
    out["tile"] = nullptr;
    out["tile_note"] = e.what();
  }
  json layers = json::array();
  if (sparsity >= 0 && tile > 0) {
    std::vector<SupermaskLayer> report;
    fold_supermasks(sd, sparsity, tile, &report);
    for (const SupermaskLayer& l : report)
      layers.push_back({{"name", l.name}, {"tiles", l.tiles}, {"sparsity", l.sparsity}, {"kept_tiles", l.kept_tiles},
                        {"mask_applied_by_the_model", l.applied}});
    out["sparsity"] = sparsity;
  } else {
    for (const auto& [k, t] : sd)
      if (k.size() > 7 && k.compare(k.size() - 7, 7, ".scores") == 0)
        layers.push_back({{"name", k.substr(0, k.size() - 7)}, {"scores_shape", t.shape()}});
    out["sparsity"] = nullptr;
    out["sparsity_note"] = "not recorded in the file (no args.sparsity_linear): give it to vitrt sparsify --sparsity";
  }
  out["layers"] = layers;
  // load_vit (vitrt classify, Python's load_vit) folds it at load when it records its sparsity; a
  // model file from sparsify loads without folding.
  out["loads_as_is"] = sparsity >= 0;
  out["next"] = "vitrt sparsify --supermask --checkpoint " + path + " --out <model file>";
  return out;
}

json sparse_model_info(const std::string& path, const io::ModelFile& f) {
  auto model = load_vit(path);  // checks every tensor
  json bsr = json::object();
  for (const auto& [name, m] : f.sparse)
    bsr[name] = {{"shape", {m.rows, m.cols}}, {"block", m.block}, {"nnz_blocks", m.nnz_blocks()},
                 {"density", m.density()}};
  return {{"kind", "vit_sparse"}, {"config", vit_config_json(vit_config(*model))}, {"metadata", f.metadata},
          {"bsr", bsr}};
}

json sam_info(const std::string& path, const std::string& config) {
  auto model = load_sam(path, config);
  const SamConfig& s = sam_config(*model);
  return {{"kind", "sam"},          {"name", s.name},
          {"fingerprint", sam_fingerprint(*model)},
          {"img_size", s.img_size}, {"patch_size", s.patch_size},
          {"embed_dim", s.embed_dim}, {"depth", s.depth},
          {"num_heads", s.num_heads}, {"mlp_dim", s.mlp_dim},
          {"window_size", s.window_size}, {"global_attn_indexes", s.global_attn_indexes},
          {"out_chans", s.out_chans}, {"decoder_depth", s.decoder_depth},
          {"decoder_heads", s.decoder_heads}};
}

json checkpoint_info(const std::string& path, const std::string& config) {
  const std::string container = sniff(path);
  if (container == "safetensors") {
    io::ModelFile f = io::load_model_file(path);
    if (!f.sparse.empty()) return sparse_model_info(path, f);
  }
  TorchCheckpoint ck;
  if (container == "torch") ck = load_torch_checkpoint_with_settings(path);
  else ck.state_dict = load_state_dict(path);  // (safetensors, or the loader's own error)
  if (is_vit(ck.state_dict)) {
    if (has_supermasks(ck.state_dict)) return supermask_info(path, ck);
    auto model = load_vit(path);
    return {{"kind", "vit"}, {"config", vit_config_json(vit_config(*model))}};
  }
  return sam_info(path, config);
}

}  // namespace

void add_info(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand("info", "Load a checkpoint, check it, and print what it is as JSON.");
  c->footer("kind: sam (official .pth or Hugging Face .safetensors; the model configuration), vit (a torchvision\n"
            "VisionTransformer state_dict; its configuration, the head count from <checkpoint>.json or hidden / 64),\n"
            "vit_sparse (a vitrt model file from `vitrt sparsify`: each BSR weight's block and density, the file's\n"
            "metadata) or supermask (a SuperBlock Supermask checkpoint: its layers' tiles and surviving tiles at\n"
            "the recorded sparsity, its training args; fold it with `vitrt sparsify --supermask`).");
  c->add_option("--checkpoint", *path, "SAM or ViT checkpoint (.pth / .safetensors) or vitrt model file")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--config", *config, "SAM: JSON with settings for non-standard model sizes (default: <checkpoint>.json)");
  c->callback([path, config] { std::printf("%s\n", checkpoint_info(*path, *config).dump(2).c_str()); });
}

}  // namespace vitrt::cli
