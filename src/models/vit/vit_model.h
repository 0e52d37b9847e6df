// The ViT classifier as a plain struct of weights with a forward that follows torchvision's
// VisionTransformer (torchvision/models/vision_transformer.py) step by step. Internal header; the
// public API is vitrt/vit.h.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vitrt/bsr.h"
#include "vitrt/vit.h"

namespace vitrt::ops {
struct BsrMlpPlan;  // ops/ops.h
}

namespace vitrt::vit {

struct LinearW {
  Tensor w, b;  // [out, in], [out]
};
struct NormW {
  Tensor w, b;
};

// EncoderBlock: x = x + out_proj(MHA(ln_1(x))); x = x + mlp.3(GELU(mlp.0(ln_2(x)))).
// qkv is nn.MultiheadAttention's packed in_proj as stored ([3C, C], rows [q; k; v]): one GEMM,
// and ops::attention_packed_qkv reads q, k and v in place from its output.
struct EncoderLayerW {
  NormW ln_1, ln_2;
  LinearW qkv, out_proj, mlp_fc1, mlp_fc2;
  // Block-sparse MLP weights (from a vitrt model file written by `vitrt sparsify`): when set, that
  // linear runs through ops::linear_bsr with this matrix and mlp_fc*.b (mlp_fc*.w is then undefined).
  std::optional<BsrMatrix> mlp_fc1_bsr, mlp_fc2_bsr;
  // Both of them block-sparse, on CUDA in bf16 where the fused kernel covers them: the plan that lets
  // ops::mlp_bsr run the MLP as one kernel whose hidden activation never leaves the chip (it does so
  // where that was measured faster; made at upload).
  std::shared_ptr<const ops::BsrMlpPlan> mlp_plan;
};

}  // namespace vitrt::vit

namespace vitrt {

class VitModel {
 public:
  VitConfig config;
  Tensor conv_proj_w, conv_proj_b;  // [C, 3, p, p], [C]
  Tensor class_token;               // [1, 1, C]
  Tensor pos_embedding;             // [T, C] (the checkpoint's [1, T, C] without the batch dim)
  std::vector<vit::EncoderLayerW> layers;
  vit::NormW encoder_ln;
  vit::LinearW head;                // [num_classes, C]
  Device device = Device::CPU;
  DType dtype = DType::F32;
  // Stored blocks of the block-sparse MLPs taken out at load (ops::simplify_bsr_mlp), over all
  // layers: fc1 blocks no fc2 block reads, fc2 blocks of constant hidden blocks folded into the bias.
  int64_t mlp_fc1_blocks_dropped = 0, mlp_fc2_blocks_folded = 0;

  // sparse (optional): BSR weights by state_dict name; only the MLP weights
  // encoder.layers.encoder_layer_<i>.mlp.{0,3}.weight may be block-sparse (they are then absent
  // from sd). Any other BSR weight, or one of the wrong shape, throws CheckpointError.
  static std::shared_ptr<VitModel> from_state_dict(const StateDict& sd, const VitConfig& cfg,
                                                   const std::map<std::string, BsrMatrix>* sparse = nullptr);
  // A copy whose weights live on `device` in `dtype` (uploaded once).
  std::shared_ptr<VitModel> to(Device device, DType dtype) const;

  // images [B, S, S, 3] NHWC (normalised) on any device -> logits [B, num_classes] float32 on the CPU.
  Tensor forward(const Tensor& images) const;
  // The same logits left on the model's device (float32). With images already on the device in the
  // model's dtype it neither copies to nor waits for the host, so it can be captured in a CUDA graph.
  Tensor forward_device(const Tensor& images) const;

  // How many linears hold a BsrMatrix (and so run through ops::linear_bsr); 0 for a dense model.
  int num_bsr_linears() const;
  // How many block-sparse MLPs run as one fused kernel (ops::mlp_bsr) for a batch of `batch` images.
  int num_fused_mlps(int64_t batch) const;
};

}  // namespace vitrt
