// Vision Transformer image classifier with torchvision's `VisionTransformer` layout (vit_b_16,
// vit_l_16, vit_h_14 and any other size of the same architecture): conv patch embedding, class
// token, learned position embedding, pre-norm encoder blocks (LayerNorm eps 1e-6, standard
// multi-head attention, exact-GELU MLP), final LayerNorm and a linear head on the class token.
// Weights come from torch.save(model.state_dict()) files through the restricted loader.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"
#include "vitrt/image.h"
#include "vitrt/tensor.h"

namespace vitrt {

struct VitConfig {
  std::string name = "custom";
  int image_size = 224;
  int patch_size = 16;
  int hidden_dim = 768;
  int num_layers = 12;
  int num_heads = 12;
  int mlp_dim = 3072;
  int num_classes = 1000;

  int grid_size() const { return image_size / patch_size; }
  int num_tokens() const { return grid_size() * grid_size() + 1; }  // patches + class token

  // torchvision's presets (vit_b_16: 197 tokens of 768; vit_h_14 at 224 as torchvision builds it
  // without weights; its SWAG weights use image_size 518, which the state_dict shapes reveal).
  static VitConfig vit_b_16();
  static VitConfig vit_l_16();
  static VitConfig vit_h_14();
  // "vit_b_16", "vit_l_16" or "vit_h_14"; InvalidArgument otherwise.
  static VitConfig preset(const std::string& name);
};

class VitModel;

// Reads a torchvision VisionTransformer state_dict (.pth or safetensors), infers the config from
// the tensor shapes and checks every tensor strictly (CheckpointError names the key and shapes).
// The head count is not in the tensors: num_heads > 0 sets it, else a sidecar JSON
// `<checkpoint>.json` with {"num_heads": N} if present, else hidden_dim / 64 (every torchvision
// preset uses 64-wide heads).
// A vitrt model file written by `vitrt sparsify` (safetensors with BSR weights) loads too: its
// block-sparse MLP weights stay packed and run through ops::linear_bsr (fused exact GELU for
// mlp.0, the residual fused for mlp.3), everything else is dense as usual: on the CPU in float32,
// on CUDA in float32 or bfloat16 (the BSR arrays uploaded once). Its head count, when neither
// num_heads nor a sidecar gives one: the file's "vit.num_heads" metadata, which `vitrt sparsify`
// records from its --num-heads, the source's sidecar or a Supermask checkpoint's args.model.
// A SuperBlock Supermask checkpoint (vitrt/supermask.h) that records the sparsity it was trained at
// loads as it is too: its masks folded, its MLP weights packed to BSR as `vitrt sparsify
// --supermask` would store them (heads: num_heads, the sidecar, else its args.model's preset).
std::shared_ptr<const VitModel> load_vit(const std::string& checkpoint_path, Device device = Device::CPU,
                                         DType dtype = DType::F32, int num_heads = 0);
const VitConfig& vit_config(const VitModel& model);
// The head count a checkpoint's sidecar `<checkpoint_path>.json` ({"num_heads": N}) gives, 0 when
// there is no sidecar. InvalidArgument for a malformed one or one without a positive num_heads.
int vit_sidecar_num_heads(const std::string& checkpoint_path);

// torchvision's ImageNet eval preprocessing on a PIL image, reproduced exactly:
// Resize(resize_size) of the shorter side (long side = int(resize_size * long / short), Pillow's
// antialiased bilinear), CenterCrop(crop_size) (offsets int(round((size - crop) / 2)), round half
// to even as Python), ToTensor (/ 255) and Normalize(ImageNet mean, std), all in float32.
// Returns [1, crop_size, crop_size, 3] (NHWC, channels last), float32 on the CPU. Throws
// ImageError for an empty or malformed image. resize_size must be >= crop_size.
Tensor vit_preprocess(const Image& rgb, int resize_size = 256, int crop_size = 224);
// The 8-bit crop that vit_preprocess normalises (crop_size x crop_size RGB), for checks.
Image vit_resize_and_crop(const Image& rgb, int resize_size = 256, int crop_size = 224);

// Logits [B, num_classes] (float32, CPU) for preprocessed images [B, S, S, 3] (CPU float32 or
// already on the model's device).
Tensor vit_logits(const VitModel& model, const Tensor& images);

// Logits [N, num_classes] (float32, CPU) of N RGB images of any sizes: vit_preprocess with the
// model's image size (torchvision's eval transform), then one forward pass for all N.
Tensor vit_image_logits(const VitModel& model, std::span<const Image> images);

// The resize that goes with a crop in torchvision's eval transform: 256 for 224 (IMAGENET1K_V1),
// else the same 8/7 ratio, rounded down.
int vit_resize_size(int crop_size);

// The topk (class index, softmax probability) pairs for one image (vit_preprocess with the
// model's image size), most probable first.
std::vector<std::pair<int, float>> vit_classify(const VitModel& model, const Image& rgb, int topk = 5);
// Softmax over n logits, then the topk (index, probability) pairs, most probable first (ties:
// lower index first).
std::vector<std::pair<int, float>> top_k_softmax(const float* logits, int n, int topk);

// ImageNet-1k class names (1000 lines, ILSVRC2012 order), as Debian's opencv-doc ships them.
// Empty path: the installed opencv-doc file if present, else `fallback_path`. Sets *used_path to
// the file read. Throws IoError when no file is readable.
inline constexpr const char* kOpencvDocImagenetClasses =
    "/usr/share/doc/opencv-doc/examples/data/dnn/classification_classes_ILSVRC2012.txt";
std::vector<std::string> read_class_names(const std::string& path);

// Every tensor of a VisionTransformer with this config, random (seeded), with torchvision's key
// names. For benchmarks and tests.
StateDict vit_random_state_dict(const VitConfig& c, uint64_t seed);
std::shared_ptr<const VitModel> vit_from_state_dict(const StateDict& sd, Device device = Device::CPU,
                                                    DType dtype = DType::F32, int num_heads = 0);
// The config a state_dict describes (CheckpointError when it is not a VisionTransformer);
// num_heads as for load_vit (0: hidden_dim / 64).
VitConfig vit_config_from_state_dict(const StateDict& sd, int num_heads = 0);

// A ViT whose MLP weights (encoder.layers.encoder_layer_<i>.mlp.{0,3}.weight, absent from `dense`)
// are given block-sparse in `sparse` (any subset of them; the rest stay dense in `dense`), e.g. a
// vitrt model file's io::ModelFile{dense, sparse}. CPU float32, or CUDA float32 / bfloat16 (BSR
// arrays uploaded once); a BSR weight of another name or of the wrong shape throws CheckpointError.
std::shared_ptr<const VitModel> vit_from_sparse_state_dict(const StateDict& dense,
                                                           const std::map<std::string, BsrMatrix>& sparse,
                                                           Device device = Device::CPU, DType dtype = DType::F32,
                                                           int num_heads = 0);
// How many of the model's linears are block-sparse (run through ops::linear_bsr); 0 when dense.
int vit_num_bsr_linears(const VitModel& model);
// How many of its block-sparse MLPs run as one fused CUDA kernel for a batch of `batch` images (0 on
// the CPU, and wherever the two linears run instead: see ops::mlp_bsr).
int vit_num_fused_mlps(const VitModel& model, int64_t batch);

}  // namespace vitrt
