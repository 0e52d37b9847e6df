// The SAM network: image encoder (ViT with windowed and global attention), prompt encoder and
// mask decoder, as plain structs of weights with forward functions that follow the reference
// (segment_anything/modeling) step by step. Internal header; the public API is vitrt/sam.h.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vitrt/sam.h"

namespace vitrt::sam {

class WeightReader;

SamConfig config_from_state_dict(const StateDict& sd);
void apply_config_json(const std::string& path, SamConfig& c);
void validate_config(const SamConfig& c);

struct LinearW {
  Tensor w, b;  // [out, in], [out] (b may be undefined)
  const Tensor* bias() const { return b.defined() ? &b : nullptr; }
};
struct NormW {
  Tensor w, b;
};

struct EncoderBlockW {
  NormW norm1, norm2;
  LinearW qkv, proj, lin1, lin2;
  Tensor rel_pos_h, rel_pos_w;  // resized once at load to 2 * size - 1 rows
  int window = 0;                // 0 = global attention
};

struct ImageEncoder {
  SamConfig cfg;
  Tensor patch_w, patch_b;  // [C, 3, p, p], [C]
  Tensor pos_embed;         // [g, g, C] or undefined
  std::vector<EncoderBlockW> blocks;
  Tensor neck_conv1;        // [out, C] (1x1 conv as a linear)
  NormW neck_norm1;
  Tensor neck_conv2;        // [out, out, 3, 3]
  NormW neck_norm2;

  void load(WeightReader& r, const SamConfig& c);
  // x: [B, S, S, 3] normalised, padded image (NHWC) -> embeddings [B, out, g, g] (NCHW as the reference).
  Tensor forward(const Tensor& x) const;
};

// A sparse prompt set in the model's input frame (after ResizeLongestSide, before +0.5).
struct ModelPrompt {
  std::vector<float> coords;  // N * 2 (x, y)
  std::vector<int> labels;    // N
  std::optional<std::array<float, 4>> box;
  Tensor mask_input;          // [1, 4g, 4g] or undefined
};

struct PromptEncoder {
  SamConfig cfg;
  Tensor gaussian;          // [2, out/2]
  Tensor point_embed[4];    // [out] each: neg, pos, box corner 1, box corner 2
  Tensor not_a_point;       // [out]
  Tensor no_mask;           // [out]
  Tensor down1_w, down1_b, down2_w, down2_b, down3_w, down3_b;  // mask downscaling convs
  NormW down_norm1, down_norm2;
  Tensor dense_pe;          // [g*g, out], computed once at load

  void load(WeightReader& r, const SamConfig& c);
  // Random-Fourier features of normalised coords in [0, 1]^2: [N, 2] -> [N, out].
  void pe_encoding(const float* coords01, int64_t n, float* out) const;
  // Sparse tokens [N', out] (points, padding point, box corners) for one prompt set.
  Tensor sparse_embeddings(const ModelPrompt& p) const;
  // Dense embeddings [g*g, out] (tokens in NHWC order) for one prompt set.
  Tensor dense_embeddings(const ModelPrompt& p) const;
};

struct DecoderAttentionW {
  LinearW q, k, v, out;
};
struct DecoderLayerW {
  DecoderAttentionW self_attn, cross_token_to_image, cross_image_to_token;
  NormW norm1, norm2, norm3, norm4;
  LinearW lin1, lin2;
};

class DecoderGraphCache;  // decoder_graph.h

// Owns a MaskDecoder's cache of CUDA graphs (decoder_graph.h). A copy starts with an empty cache:
// a graph has its model's weight addresses baked in, and SamModel::to() copies a model before it
// replaces the weights.
class DecoderGraphs {
 public:
  DecoderGraphs();
  DecoderGraphs(const DecoderGraphs&);
  DecoderGraphs& operator=(const DecoderGraphs&);
  ~DecoderGraphs();
  // The cache is internally synchronised, so a const decoder may use it.
  DecoderGraphCache* operator->() const { return cache_.get(); }
  DecoderGraphCache& operator*() const { return *cache_; }

 private:
  std::unique_ptr<DecoderGraphCache> cache_;
};

struct MaskDecoder {
  SamConfig cfg;
  std::vector<DecoderLayerW> layers;
  DecoderAttentionW final_attn;
  NormW norm_final;
  Tensor iou_token, mask_tokens;  // [1, out], [M+1, out]
  Tensor output_tokens_host;      // [1 + M+1, out] float32 on the CPU: iou token then mask tokens
  Tensor up1_w, up1_b, up2_w, up2_b;
  NormW up_norm;
  std::vector<std::vector<LinearW>> hyper_mlps;  // M+1 MLPs of 3 layers
  std::vector<LinearW> iou_head;
  // forward_shared_dense's GPU work replayed as CUDA graphs, one per shape and stream.
  DecoderGraphs graphs;

  void load(WeightReader& r, const SamConfig& c);
  // image: [1, out, g, g] and image_pe: [g*g, out] on the weights' device and dtype; sparse
  // [B, N, out] and dense [B, g*g, out]: float32 on the CPU. Returns all M+1 mask logits
  // [B, M+1, 4g, 4g] and IoU predictions [B, M+1], float32 on the CPU.
  //
  // Several images in one batch (ragged, what segment-anything-fast does with NestedTensor): image
  // [I, out, g, g] and prompts_per_image (I counts summing to B): batch entries are grouped by image,
  // the first prompts_per_image[0] entries decode against image 0, and so on. Null: I = 1.
  void forward(const Tensor& image, const Tensor& image_pe, const Tensor& sparse, const Tensor& dense,
               Tensor& masks, Tensor& iou, const std::vector<int64_t>* prompts_per_image = nullptr) const;
  // forward() for a batch whose prompts share one dense embedding, dense_one [g*g, out] (float32 on
  // the CPU, or already on the weights' device in their dtype; not modified) -- the automatic
  // mask generator's grid: single points, no mask input -- with the results
  // left where the weights are, in their dtype: masks [B, num_masks, 4g, 4g] (mask outputs
  // first_mask .. first_mask + num_masks - 1; all M+1 by default), iou [B, M+1]. The
  // [B, g*g, out] dense tensor is never built on the host nor uploaded.
  //
  // On the GPU this replays a CUDA graph of the decoder's device work when one exists for the
  // call's shape (decoder_graph.h: the first call of a shape runs eagerly, the second captures);
  // the results are fresh tensors either way, never memory the graph reuses.
  void forward_shared_dense(const Tensor& image, const Tensor& image_pe, const Tensor& sparse,
                            const Tensor& dense_one, Tensor& masks, Tensor& iou,
                            const std::vector<int64_t>* prompts_per_image = nullptr, int64_t first_mask = 0,
                            int64_t num_masks = -1) const;

 private:
  // [B, T, out] float32 on the CPU: each prompt's tokens, [iou_token, mask_tokens, its sparse tokens].
  Tensor prompt_tokens_host(const Tensor& sparse) const;
  // Both: masks [B, M+1, (4g)^2] and iou [B, M+1] on the weights' device and dtype.
  void forward_kept(const Tensor& image, const Tensor& image_pe, const Tensor& sparse, const Tensor& dense,
                    bool dense_shared, const std::vector<int64_t>& prompts_per_image, Tensor& masks,
                    Tensor& iou) const;
  // The decoder's device work, everything after the inputs are on the weights' device: no host
  // data, no uploads, no synchronisation, so that it can be captured as a CUDA graph. tokens
  // [B, T, out] (float32 or the weights' dtype), dense [g*g, out] (dense_shared) or [B, g*g, out]
  // in the weights' dtype (the per-prompt one is summed into in place), image [I, out, g, g],
  // image_pe [g*g, out] in the weights' dtype; prompts_per_image: I validated counts summing to B.
  void forward_device(const Tensor& image, const Tensor& image_pe, const Tensor& tokens, const Tensor& dense,
                      bool dense_shared, const std::vector<int64_t>& prompts_per_image, Tensor& masks,
                      Tensor& iou) const;
};

}  // namespace vitrt::sam

namespace vitrt {

class SamModel {
 public:
  SamConfig config;
  sam::ImageEncoder image_encoder;
  sam::PromptEncoder prompt_encoder;
  sam::MaskDecoder mask_decoder;
  std::string fingerprint;  // identifies the weights; stored in embedding files

  Tensor image_pe;  // the prompt encoder's dense PE [g*g, out] in the decoder's device/dtype
  // The dense prompt embedding of every prompt without a mask input (no_mask broadcast) [g*g, out],
  // in the decoder's device/dtype: built once, not per decoder call.
  Tensor no_mask_dense;
  Device device = Device::CPU;
  DType dtype = DType::F32;          // compute dtype of the image encoder
  DType decoder_dtype = DType::F32;  // compute dtype of the mask decoder (image_pe too)

  // Builds the model from a state_dict (official or Hugging Face names), strictly.
  static std::shared_ptr<SamModel> from_state_dict(const StateDict& sd, const SamConfig& cfg);
  // A copy whose encoder weights live on `device` in `dtype` (uploaded once), the decoder's in
  // `decoder_dtype`, float32 unless given (bf16 encoder + fp32 decoder: a bf16 decoder's rounding
  // would double the logits' error and miss the agreement bar; see load_sam). The prompt
  // encoder stays on the CPU in float32: it is a few hundred multiply-adds per prompt.
  std::shared_ptr<SamModel> to(Device device, DType dtype, std::optional<DType> decoder_dtype = std::nullopt) const;
};

}  // namespace vitrt

namespace vitrt::sam {
// One image made ready for the image encoder exactly as SamPredictor::set_image does it
// (ResizeLongestSide with Pillow's resize, (x - mean) / std, zero padding): pixels [1, S, S, 3] on the
// model's device and dtype. Throws ImageError for an empty or malformed image.
struct EncoderInput {
  Tensor pixels;
  int original_height = 0, original_width = 0, input_height = 0, input_width = 0;
};
EncoderInput prepare_encoder_input(const Image& rgb, const SamModel& model);
// Prepared inputs through the image encoder in one batch -> one host float32 embedding each.
std::vector<ImageEmbedding> encode_inputs(const SamModel& model, const std::vector<const EncoderInput*>& inputs);

// Every tensor of a SAM model with this config, random (seeded). For benchmarks and tests.
StateDict random_state_dict(const SamConfig& c, uint64_t seed);
// Image-encoder multiply-adds x 2 for one image, with the reference's padded windows.
double encoder_flops(const SamConfig& c);
}  // namespace vitrt::sam
