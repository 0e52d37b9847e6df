#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace vitrt::cli {
void add_segment(CLI::App& app);
void add_embed(CLI::App& app);
void add_bench(CLI::App& app);
void add_info(CLI::App& app);
void add_fidelity_check(CLI::App& app);
void add_everything(CLI::App& app);   // cmd_everything.cpp
void add_eval_coco(CLI::App& app);    // cmd_eval_coco.cpp
void add_serve(CLI::App& app);        // cmd_serve.cpp
void add_classify(CLI::App& app);     // cmd_classify.cpp
void add_sparsify(CLI::App& app);     // cmd_sparsify.cpp

// The SAM model options of every command that loads one (load_sam): --checkpoint, an existing
// file, required unless the command offers an alternative (--random-weights), and --config.
inline void add_sam_model_options(CLI::App* c, std::string& checkpoint, std::string& config, bool required = true) {
  CLI::Option* o =
      c->add_option("--checkpoint", checkpoint, "SAM checkpoint: official .pth or Hugging Face .safetensors")
          ->check(CLI::ExistingFile);
  if (required) o->required();
  c->add_option("--config", config, "JSON with settings for non-standard model sizes (default: <checkpoint>.json if present)");
}
}  // namespace vitrt::cli
