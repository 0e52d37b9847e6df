// Segment Anything: the model, its configuration, and the predictor with the embed-once /
// decode-many split that interactive tools rely on. Outputs match facebookresearch/segment-anything.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vitrt/checkpoint.h"
#include "vitrt/image.h"
#include "vitrt/tensor.h"

namespace vitrt {

struct SamConfig {
  std::string name = "vit_b";  // vit_b | vit_l | vit_h | custom
  // Image encoder
  int img_size = 1024;
  int patch_size = 16;
  int embed_dim = 768;
  int depth = 12;
  int num_heads = 12;
  int mlp_dim = 3072;
  int window_size = 14;
  std::vector<int> global_attn_indexes = {2, 5, 8, 11};
  bool use_rel_pos = true;
  bool use_abs_pos = true;
  int out_chans = 256;  // = prompt embedding dim
  // Prompt encoder / mask decoder
  int mask_in_chans = 16;
  int decoder_depth = 2;
  int decoder_heads = 8;
  int decoder_mlp_dim = 2048;
  int attention_downsample_rate = 2;
  int num_multimask_outputs = 3;
  int iou_head_depth = 3;
  int iou_head_hidden_dim = 256;
  // Pre-processing
  std::array<float, 3> pixel_mean = {123.675f, 116.28f, 103.53f};
  std::array<float, 3> pixel_std = {58.395f, 57.12f, 57.375f};

  int grid_size() const { return img_size / patch_size; }       // 64
  int low_res_size() const { return 4 * grid_size(); }           // 256

  static SamConfig vit_b();
  static SamConfig vit_l();
  static SamConfig vit_h();
};

class SamModel;

// Loads a SAM checkpoint (official .pth, or Hugging Face safetensors) and tells the variant from
// the tensor shapes. Settings that shapes cannot tell (heads, global blocks) come from the official
// variant of the same width, or from a JSON file next to the checkpoint (<checkpoint>.json, or
// `config_path`) for custom sizes. Missing, extra or mis-shaped tensors: CheckpointError naming them.
// `device`/`dtype`: where the encoder and decoder run (CUDA: float32 or bfloat16; CPU: float32);
// `decoder_dtype`: the mask decoder's own dtype, float32 by default whatever `dtype` is: a bf16
// encoder with the fp32 decoder meets the reference-agreement bar (>= 99.5% of mask pixels) with
// no measurable cost per click, a bf16 decoder misses it (99.4-99.5%) but runs segment-everything
// ~2.6x faster (BENCHMARKS.md), which is what `vitrt everything` picks by default.
std::shared_ptr<const SamModel> load_sam(const std::string& checkpoint_path,
                                         const std::string& config_path = "", Device device = Device::CPU,
                                         DType dtype = DType::F32, std::optional<DType> decoder_dtype = std::nullopt);

// An image after the encoder: everything the decoder needs about it.
struct ImageEmbedding {
  Tensor features;          // [1, out_chans, grid, grid], float32
  int original_height = 0;  // the image as given
  int original_width = 0;
  int input_height = 0;     // after ResizeLongestSide, before padding
  int input_width = 0;
  std::string model_fingerprint;  // refuses decoding with a different model
};

void save_embedding(const ImageEmbedding& e, const std::string& path);
ImageEmbedding load_embedding(const std::string& path);

struct Point {
  float x = 0, y = 0;
  int label = 1;  // 1 foreground, 0 background, -1 ignore (padding)
};
struct Box {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// One prompt set, in original-image pixel coordinates.
struct Prompt {
  std::vector<Point> points;
  std::optional<Box> box;
  Tensor mask_input;  // optional low-res logits [1, 256, 256] from an earlier prediction
};

struct Prediction {
  Tensor masks;           // [K, H, W] uint8 0/1 at the original size (K = 3 multimask, else 1)
  std::vector<float> scores;  // predicted IoU per mask
  Tensor low_res_logits;  // [K, 256, 256] float32, can be fed back as Prompt::mask_input
  Tensor logits;          // [K, H, W] float32 at original size, only when return_logits
};

// The answers to a batch of prompt sets on one image, left where the model runs (on the GPU for a
// CUDA model): the counterpart of the reference's predict_torch, for callers that go on working on
// the device or bring back only part of it. Row b answers prompts[b].
struct BatchPrediction {
  Tensor masks;           // [B, K, H, W] uint8 0/1 at the original size
  Tensor scores;          // [B, K] float32 predicted IoU
  Tensor low_res_logits;  // [B, K, 256, 256] float32
  Tensor logits;          // [B, K, H, W] float32 at the original size, only when return_logits
};

class SamPredictor {
 public:
  explicit SamPredictor(std::shared_ptr<const SamModel> model);

  // Runs the image encoder on an RGB image. Throws ImageError for an empty image.
  void set_image(const Image& rgb);
  // Uses an embedding computed earlier (e.g. loaded from disk); refuses another model's.
  void set_embedding(ImageEmbedding embedding);
  bool has_image() const { return has_embedding_; }
  const ImageEmbedding& embedding() const;

  // Decodes one prompt set. Throws InvalidArgument for out-of-range or malformed prompts.
  Prediction predict(const Prompt& prompt, bool multimask_output = true, bool return_logits = false) const;
  // Decodes many prompt sets in one decoder batch (e.g. one box each). The masks (and logits) of
  // the predictions of one call are views of shared blocks: clone() one to keep it alone.
  std::vector<Prediction> predict_batch(const std::vector<Prompt>& prompts, bool multimask_output = true,
                                        bool return_logits = false) const;
  // predict_batch with the results left on the model's device, nothing copied to the host.
  BatchPrediction predict_batch_on_device(const std::vector<Prompt>& prompts, bool multimask_output = true,
                                          bool return_logits = false) const;

  const SamModel& model() const { return *model_; }

 private:
  std::shared_ptr<const SamModel> model_;
  ImageEmbedding embedding_;
  Tensor features_in_model_;  // embedding_.features on the model's device in the decoder's dtype, made once
  bool has_embedding_ = false;
};

// Image embeddings of several images of any sizes with one image-encoder batch (each image resized
// and padded on its own, as set_image does): result[i] is what set_image(images[i]) computes, up to
// the batch's floating-point summation order. Throws ImageError for an empty image.
std::vector<ImageEmbedding> embed_images(const SamModel& model, std::span<const Image> images);

// Decodes the prompts of several images in one decoder batch, with any number of prompts per image
// (the ragged batch segment-anything-fast builds with NestedTensor): result[i][j] answers
// prompts[i][j] on embeddings[i], with the values SamPredictor::predict_batch gives per image.
std::vector<std::vector<Prediction>> predict_multi_image(const SamModel& model,
                                                         const std::vector<ImageEmbedding>& embeddings,
                                                         const std::vector<std::vector<Prompt>>& prompts,
                                                         bool multimask_output = true, bool return_logits = false);

// The config the model was loaded with, and a short id of its weights (stored in embedding files).
const SamConfig& sam_config(const SamModel& model);
const std::string& sam_fingerprint(const SamModel& model);

}  // namespace vitrt
