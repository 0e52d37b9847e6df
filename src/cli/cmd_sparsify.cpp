// `vitrt sparsify`: a torchvision ViT's MLP weights packed to BSR once and written as a vitrt
// model file (io/vitrt_model_file.h) that loads without repacking. Two sources of sparsity:
// block-magnitude pruning (training-free), or --supermask: the masks SuperBlock learned, folded
// into the weights exactly as its model applies them (vitrt/supermask.h), read from its training
// checkpoint as saved (weights, optimizer state and the argparse "args" that hold the sparsity).
#include <cstdio>
#include <map>
#include <memory>
#include <regex>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/vitrt_model_file.h"
#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"
#include "vitrt/supermask.h"
#include "vitrt/vit.h"

namespace vitrt::cli {
namespace {

struct SparsifyArgs {
  std::string checkpoint, out, layers = "mlp";
  int block = 64;
  double sparsity = 0.9;
  bool quiet = false;
  // --supermask
  bool supermask = false, ema = false;
  int tile = 0;
  bool block_given = false, sparsity_given = false;
  int num_heads = 0;  // recorded in the file (vit.num_heads); 0: from <checkpoint>.json or the args' preset
};

// The head count to record: --num-heads, else <checkpoint>.json's num_heads, else `recorded` (a
// Supermask checkpoint's, from its args.model; 0 when none says).
int heads_to_record(const SparsifyArgs& a, int recorded) {
  if (a.num_heads > 0) return a.num_heads;
  const int sidecar = vit_sidecar_num_heads(a.checkpoint);
  return sidecar > 0 ? sidecar : recorded;
}

// --supermask: SuperBlock's checkpoint with its masks folded in (scores / scale / shift dropped).
// Sets the block, sparsity and method lines of the file's metadata.
StateDict load_supermask_folded(SparsifyArgs& a, std::map<std::string, std::string>& meta, StageTimer& timer) {
  SupermaskCheckpoint ck = timer.run("loading and folding " + a.checkpoint, [&] {
    return load_supermask_checkpoint(a.checkpoint, a.sparsity_given ? a.sparsity : -1.0, a.tile, a.ema);
  });
  if (a.sparsity_given && ck.recorded.sparsity >= 0 && ck.recorded.sparsity != a.sparsity)
    std::printf("note: --sparsity %g overrides the %g the checkpoint was trained at\n", a.sparsity,
                ck.recorded.sparsity);
  a.sparsity = ck.sparsity;
  a.tile = ck.tile;
  a.num_heads = heads_to_record(a, ck.recorded.num_heads);
  for (const SupermaskLayer& l : ck.layers) {
    if (l.applied)
      std::printf("%-48s Supermask tile %d, sparsity %.4g: kept %lld / %lld tiles, folded\n", l.name.c_str(), l.tile,
                  l.sparsity, static_cast<long long>(l.kept_tiles), static_cast<long long>(l.tiles));
    else
      std::printf("%-48s Supermask ignored: nn.MultiheadAttention uses this weight directly, so the trained "
                  "model never applied its mask\n", l.name.c_str());
  }
  if (!a.block_given) {
    a.block = supermask_bsr_block(a.tile);
    VITRT_CHECK(a.block != 0, InvalidArgument, "Supermask tile ", a.tile,
                " is not a multiple of 16: give --block (16, 32 or 64; the stored blocks then cover the kept "
                "tiles and whatever else they touch)");
  } else if (a.tile % a.block != 0) {
    std::printf("note: block %d does not divide the Supermask tile %d: blocks that straddle kept and pruned "
                "tiles are stored whole, so the density is higher than the mask's\n", a.block, a.tile);
  }
  meta["sparsify.method"] = "supermask";
  meta["supermask.tile"] = std::to_string(a.tile);
  meta["supermask.sparsity"] = std::to_string(a.sparsity);
  meta["supermask.weights"] = a.ema ? "model_ema" : "model";
  return std::move(ck.state_dict);
}

void run_sparsify(SparsifyArgs a) {
  VITRT_CHECK(a.layers == "mlp", InvalidArgument, "--layers '", a.layers,
              "' is not supported: expected 'mlp' (encoder.layers.*.mlp.{0,3}.weight)");
  VITRT_CHECK(!a.ema || a.supermask, InvalidArgument, "--ema goes with --supermask");
  StageTimer timer(a.quiet);
  std::map<std::string, std::string> meta = {{"sparsify.method", "block_l2_magnitude"}};
  StateDict sd = a.supermask ? load_supermask_folded(a, meta, timer) : StateDict();
  VITRT_CHECK(is_supported_bsr_block(a.block), InvalidArgument, "--block ", a.block,
              " is not supported: expected 16, 32 or 64");
  VITRT_CHECK(a.sparsity >= 0.0 && a.sparsity < 1.0, InvalidArgument, "--sparsity ", a.sparsity,
              " must lie in [0, 1)");
  if (!a.supermask) {
    sd = timer.run("loading checkpoint " + a.checkpoint, [&] { return load_state_dict(a.checkpoint); });
    a.num_heads = heads_to_record(a, 0);
    VITRT_CHECK(!has_supermasks(sd), InvalidArgument, "checkpoint '", a.checkpoint,
                "' holds SuperBlock Supermask scores: add --supermask to use the masks it learned");
  }
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
    // Supermask: the folded weight's zero blocks are the pruned tiles; keep every other block.
    BsrMatrix m = a.supermask ? bsr_from_dense(t, a.block) : prune_blocks_by_magnitude(t, a.block, a.sparsity);
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
  meta["sparsify.source"] = a.checkpoint;
  meta["sparsify.layers"] = a.layers;
  meta["sparsify.block"] = std::to_string(a.block);
  meta["sparsify.sparsity"] = std::to_string(a.sparsity);
  if (a.num_heads > 0) meta["vit.num_heads"] = std::to_string(a.num_heads);  // (load_vit reads it)
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
      "           --out vit_b_16_s90.vitrt\n"
      "\n"
      "--supermask: the checkpoint is a SuperBlock (github.com/pytorch-labs/superblock) Supermask model,\n"
      "as its train.py saves it or as a bare state_dict. Each layer's learned mask is folded into its\n"
      "weight exactly as SuperBlock's model applies it ((weight * scale + shift) * mask, the mask from\n"
      "the scores' percentile), then the MLP weights are packed keeping every non-zero block, so the\n"
      "file computes what the trained model computes. --sparsity and --tile default to the checkpoint's\n"
      "args.sparsity_linear / args.sp_linear_tile_size (the tile is otherwise read off the scores'\n"
      "shapes), --block to the largest of 64 / 32 / 16 dividing the tile. The attention's out_proj\n"
      "masks are not applied (nn.MultiheadAttention never runs that module), as in SuperBlock.\n"
      "Example: vitrt sparsify --supermask --checkpoint superblock/model_299.pth --out vit_b_16_sb.vitrt");
  c->add_option("--checkpoint", a->checkpoint, "torchvision ViT state_dict (.pth or .safetensors)")->required();
  c->add_option("--out", a->out, "Output vitrt model file")->required();
  c->add_option("--layers", a->layers, "Which weights to prune: mlp (encoder.layers.*.mlp.{0,3}.weight)")
      ->capture_default_str();
  CLI::Option* block = c->add_option("--block", a->block, "Block size: 16, 32 or 64")->capture_default_str();
  CLI::Option* sparsity =
      c->add_option("--sparsity", a->sparsity, "Fraction of blocks removed, in [0, 1)")->capture_default_str();
  c->add_flag("--supermask", a->supermask, "Use the masks of a SuperBlock Supermask checkpoint (see below)");
  c->add_option("--tile", a->tile, "With --supermask: the Supermask tile size (default: from the checkpoint)");
  c->add_flag("--ema", a->ema, "With --supermask: the checkpoint's EMA weights (its model_ema entry)");
  c->add_option("--num-heads", a->num_heads,
                "Attention heads, recorded in the file for load_vit (default: <checkpoint>.json's num_heads, else "
                "a Supermask checkpoint's args.model preset; unrecorded: hidden size / 64 at load)");
  c->add_flag("-q,--quiet", a->quiet, "No progress or stage timings");
  c->callback([a, block, sparsity] {
    SparsifyArgs args = *a;
    args.block_given = block->count() > 0;
    args.sparsity_given = sparsity->count() > 0;
    run_sparsify(args);
  });
}

}  // namespace vitrt::cli
