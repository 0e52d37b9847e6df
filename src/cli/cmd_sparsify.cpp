// `vitrt sparsify`: block-magnitude pruning of a torchvision ViT state_dict's MLP weights, packed
// to BSR once and written as a vitrt model file (io/vitrt_model_file.h) that loads without
// repacking. Training-free, so the sparse path can be exercised before Supermask training exists.
#include <cstdio>
#include <memory>
#include <regex>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/vitrt_model_file.h"
#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"

namespace vitrt::cli {
namespace {

struct SparsifyArgs {
  std::string checkpoint, out, layers = "mlp";
  int block = 64;
  double sparsity = 0.9;
  bool quiet = false;
};

void run_sparsify(const SparsifyArgs& a) {
  VITRT_CHECK(a.layers == "mlp", InvalidArgument, "--layers '", a.layers,
              "' is not supported: expected 'mlp' (encoder.layers.*.mlp.{0,3}.weight)");
  VITRT_CHECK(is_supported_bsr_block(a.block), InvalidArgument, "--block ", a.block,
              " is not supported: expected 16, 32 or 64");
  VITRT_CHECK(a.sparsity >= 0.0 && a.sparsity < 1.0, InvalidArgument, "--sparsity ", a.sparsity,
              " must lie in [0, 1)");
  StageTimer timer(a.quiet);
  StateDict sd = timer.run("loading checkpoint " + a.checkpoint, [&] { return load_state_dict(a.checkpoint); });
  // torchvision >= 0.14 names the MLP linears mlp.0 / mlp.3; older releases mlp.linear_1 / linear_2.
  static const std::regex mlp_weight(R"(encoder\.layers\.[^.]+\.mlp\.(0|3|linear_1|linear_2)\.weight)");
  StateDict dense;
  std::map<std::string, BsrMatrix> sparse;
  int64_t kept_blocks = 0, total_blocks = 0, matched = 0;
  for (auto& [name, t] : sd) {
    if (!std::regex_match(name, mlp_weight)) {
      dense.emplace(name, t);
      continue;
    }
    ++matched;
    if (t.dim() != 2 || t.size(0) % a.block != 0 || t.size(1) % a.block != 0) {
      std::printf("%-48s %-14s stays dense: shape is not a multiple of block %d\n", name.c_str(),
                  shape_str(t.shape()).c_str(), a.block);
      dense.emplace(name, t);
      continue;
    }
    BsrMatrix m = prune_blocks_by_magnitude(t, a.block, a.sparsity);
    const int64_t total = m.block_rows() * m.block_cols();
    std::printf("%-48s %-14s block %d: kept %lld / %lld blocks, density %.4f\n", name.c_str(),
                shape_str(t.shape()).c_str(), a.block, static_cast<long long>(m.nnz_blocks()),
                static_cast<long long>(total), m.density());
    kept_blocks += m.nnz_blocks();
    total_blocks += total;
    sparse.emplace(name, std::move(m));
  }
  VITRT_CHECK(matched > 0, InvalidArgument, "checkpoint '", a.checkpoint,
              "' has no weights named encoder.layers.*.mlp.{0,3}.weight: not a torchvision ViT state_dict?");
  std::printf("%lld of %lld MLP weights packed to BSR; overall density %.4f (%lld / %lld blocks)\n",
              static_cast<long long>(sparse.size()), static_cast<long long>(matched),
              total_blocks ? static_cast<double>(kept_blocks) / static_cast<double>(total_blocks) : 0.0,
              static_cast<long long>(kept_blocks), static_cast<long long>(total_blocks));
  const std::map<std::string, std::string> meta = {{"sparsify.source", a.checkpoint},
                                                   {"sparsify.method", "block_l2_magnitude"},
                                                   {"sparsify.layers", a.layers},
                                                   {"sparsify.block", std::to_string(a.block)},
                                                   {"sparsify.sparsity", std::to_string(a.sparsity)}};
  timer.run("writing " + a.out, [&] { io::write_model_file(a.out, dense, sparse, meta); });
}

}  // namespace

void add_sparsify(CLI::App& app) {
  auto a = std::make_shared<SparsifyArgs>();
  CLI::App* c = app.add_subcommand("sparsify", "Prune a ViT's MLP weights to block-sparse (BSR) and save them.");
  c->footer(
      "Block-magnitude pruning: each weight is cut into block x block tiles, ranked by L2 norm, and the\n"
      "largest (1 - sparsity) fraction is kept (ties: first in row-major block order). The result is a\n"
      "vitrt model file (safetensors-compatible, BSR weights stored packed). Weights whose shape is not a\n"
      "multiple of the block size stay dense, and the command says so. Prints each layer's density.\n"
      "Example: vitrt sparsify --checkpoint vit_b_16.pth --layers mlp --block 64 --sparsity 0.9 \\\n"
      "           --out vit_b_16_s90.vitrt");
  c->add_option("--checkpoint", a->checkpoint, "torchvision ViT state_dict (.pth or .safetensors)")->required();
  c->add_option("--out", a->out, "Output vitrt model file")->required();
  c->add_option("--layers", a->layers, "Which weights to prune: mlp (encoder.layers.*.mlp.{0,3}.weight)")
      ->capture_default_str();
  c->add_option("--block", a->block, "Block size: 16, 32 or 64")->capture_default_str();
  c->add_option("--sparsity", a->sparsity, "Fraction of blocks removed, in [0, 1)")->capture_default_str();
  c->add_flag("-q,--quiet", a->quiet, "No progress or stage timings");
  c->callback([a] { run_sparsify(*a); });
}

}  // namespace vitrt::cli
