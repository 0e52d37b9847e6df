// SuperBlock's Supermask (github.com/pytorch-labs/superblock, supermask.py), reproduced for
// inference: a linear trained with it carries, next to its weight, learned scores per tile of
// tile x tile weights (`<layer>.scores`, shape ceil(weight dims / tile)) and SuperBlock's weight
// transform (`<layer>.scale`, `<layer>.shift`, one element each). Its forward computes with
//   (weight * scale + shift) * mask,  mask = 1 where score >= the layer's sparsity percentile
// expanded to the weight's shape. Folding makes that product the weight, once, so that the model
// is an ordinary (block-sparse) one: `vitrt sparsify --supermask` then packs it to BSR.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "vitrt/checkpoint.h"
#include "vitrt/tensor.h"

namespace vitrt {

// The sparsity SuperBlock uses for a layer with `tiles` scores: it lowers a request above
// 1 - 1 / tiles (fewer than one tile kept) to that.
double supermask_layer_sparsity(double sparsity, int64_t tiles);

// SuperBlock's GetSubnet: U8 [scores' shape], 1 where the (float32 or bfloat16) score is not below
// the k-th smallest score, k = 1 + round(0.01 * (100 * sparsity) * (n - 1)) as Python evaluates it
// (round half to even). Equal scores at the threshold are all kept, so slightly more than
// 1 - sparsity may survive; NaN scores sort last, as torch.kthvalue orders them. sparsity is
// used as given (call supermask_layer_sparsity first) and must lie in [0, 1).
Tensor supermask_tile_mask(const Tensor& scores, double sparsity);

// The tile size t of sd's Supermask layers: SuperBlock uses one t for every dim of every layer
// (per kind of layer; a ViT's are all linears), with ceil(weight dim / t) == scores dim. The
// shapes may allow several t (a 128 x 64 weight with 8 x 4 scores: 16 to 18), which cut the weight
// differently; then the one that divides every weight dim cut into several tiles is taken (tiles
// that fit exactly, as BSR packing wants; ViT-B's shapes allow only that one anyway). Throws
// CheckpointError when no t fits, or none of several divides the weights (then t must be given).
int infer_supermask_tile(const StateDict& sd);

// (weight * scale + shift) * mask, the tile mask expanded by `tile` along every dim and cut to the
// weight's shape, each product and sum rounded to the weight's dtype as PyTorch's elementwise ops
// round them (float32 or bfloat16 weights; the result has the weight's dtype).
Tensor supermask_fold(const Tensor& weight, const Tensor& tile_mask, int tile, float scale = 1.0f, float shift = 0.0f);

// What fold_supermasks did to one layer.
struct SupermaskLayer {
  std::string name;          // the layer's prefix, e.g. "encoder.layers.encoder_layer_0.mlp.0"
  int tile = 0;
  double sparsity = 0;       // after supermask_layer_sparsity
  int64_t tiles = 0, kept_tiles = 0;
  bool applied = false;      // false: the model never applies this layer's mask (see below)
};

// Folds every Supermask layer of a torchvision ViT state_dict (every `<layer>.scores` with a
// `<layer>.weight`): the weight becomes supermask_fold's product and the layer's scores / scale /
// shift entries are dropped, so the result loads as a plain ViT. One exception, as SuperBlock's
// model behaves: nn.MultiheadAttention reads `self_attention.out_proj.weight` directly and never
// calls the out_proj module, so that mask (and transform) never reached the model's output; its
// weight stays as stored (reported with applied = false). tile <= 0: inferred per layer with
// infer_supermask_tile; else every layer's scores must have the shape that tile gives. Appends one SupermaskLayer per layer to *report if given.
StateDict fold_supermasks(const StateDict& sd, double sparsity, int tile = 0,
                          std::vector<SupermaskLayer>* report = nullptr);

// True when sd holds any `<layer>.scores` tensor next to a `<layer>.weight`.
bool has_supermasks(const StateDict& sd);

// What a SuperBlock training checkpoint records of its Supermask, in the argparse "args" its
// train.py saves (TorchCheckpoint::settings).
struct SupermaskSettings {
  double sparsity = -1;  // args.sparsity_linear; -1 when not recorded or not a number
  int tile = 0;          // args.sp_linear_tile_size; 0 when not recorded or not a whole number in [1, 2^20]
  std::string model;     // args.model ("vit_b_16"); "" when not recorded
  int num_heads = 0;     // the heads of the torchvision preset args.model names; 0 when it names none
};
SupermaskSettings supermask_settings(const std::map<std::string, std::string>& settings);

// A SuperBlock checkpoint, folded.
struct SupermaskCheckpoint {
  StateDict state_dict;         // folded: every layer's scores / scale / shift gone
  double sparsity = 0;          // the sparsity folded at
  int tile = 0;                 // the tile size folded with
  SupermaskSettings recorded;   // what the checkpoint says of itself
  std::vector<SupermaskLayer> layers;
};

// Folds a SuperBlock Supermask checkpoint already loaded (`path` names it in messages).
// sparsity < 0: the checkpoint's recorded one (InvalidArgument asking for it when not recorded);
// tile <= 0: its recorded one, else infer_supermask_tile. InvalidArgument when it holds no
// Supermask layers.
SupermaskCheckpoint fold_supermask_checkpoint(TorchCheckpoint ck, const std::string& path, double sparsity = -1,
                                              int tile = 0);

// Loads a SuperBlock Supermask checkpoint (a .pth as its train.py saves it, or a bare state_dict)
// and folds it as above. ema: the "model_ema" entry's weights instead ("module." prefix dropped).
SupermaskCheckpoint load_supermask_checkpoint(const std::string& path, double sparsity = -1, int tile = 0,
                                              bool ema = false);

// The BSR block that stores exactly a Supermask's kept tiles: the largest of 64 / 32 / 16 dividing
// the tile, 0 when none does.
int supermask_bsr_block(int tile);

}  // namespace vitrt
