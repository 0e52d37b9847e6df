#include "models/sam/fidelity.h"

#include <cmath>
#include <cstring>

#include "ops/cpu/resize_antialias.h"
#include "ops/ops.h"

namespace vitrt::sam {

uint64_t fnv1a64(const uint8_t* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

namespace {
const Tensor& ref_at(const StateDict& r, const std::string& key) {
  auto it = r.find(key);
  VITRT_CHECK(it != r.end(), InvalidArgument, "reference file has no '", key, "'");
  return it->second;
}
bool packed_bit(const uint8_t* packed, int64_t i) { return (packed[i >> 3] >> (7 - (i & 7))) & 1; }
}  // namespace

FidelityReport compare_with_reference(SamPredictor& predictor, const Image& image, const StateDict& reference) {
  FidelityReport rep;
  const SamConfig& cfg = sam_config(predictor.model());

  Image resized = resize_longest_side(image, cfg.img_size);
  uint64_t h = fnv1a64(resized.pixels.data(), resized.pixels.size());
  int64_t ref_hash = ref_at(reference, "resized_fnv1a64").data<int64_t>()[0];
  rep.resized_identical = static_cast<int64_t>(h) == ref_hash;
  if (auto it = reference.find("resized_image"); it != reference.end()) {
    rep.resized_identical &= it->second.nbytes() == resized.pixels.size() &&
                             std::memcmp(it->second.raw(), resized.pixels.data(), resized.pixels.size()) == 0;
  }

  predictor.set_image(image);
  rep.embedding_rel = ops::relative_error(predictor.embedding().features, ref_at(reference, "embedding"));

  for (const auto& [key, value] : reference) {
    const std::string suffix = ".multimask";
    if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string name = key.substr(0, key.size() - suffix.size());
    Prompt p;
    if (auto it = reference.find(name + ".point_coords"); it != reference.end()) {
      Tensor coords = it->second.to_f32();
      const Tensor& labels = ref_at(reference, name + ".point_labels");
      for (int64_t i = 0; i < coords.size(0); ++i)
        p.points.push_back({coords.data<float>()[2 * i], coords.data<float>()[2 * i + 1],
                            static_cast<int>(labels.data<int64_t>()[i])});
    }
    if (auto it = reference.find(name + ".box"); it != reference.end()) {
      const float* b = it->second.to_f32().data<float>();
      p.box = Box{b[0], b[1], b[2], b[3]};
    }
    if (auto it = reference.find(name + ".mask_input"); it != reference.end()) p.mask_input = it->second.to_f32();
    const bool multimask = value.data<int64_t>()[0] != 0;
    Prediction pred = predictor.predict(p, multimask);

    FidelityCase fc;
    fc.name = name;
    fc.iou_rel = ops::relative_error(Tensor::from_vector(pred.scores, {static_cast<int64_t>(pred.scores.size())}),
                                ref_at(reference, name + ".iou"));
    fc.low_res_rel = ops::relative_error(pred.low_res_logits, ref_at(reference, name + ".low_res"));
    const Tensor& masks = ref_at(reference, name + ".masks_packed");
    const Tensor& near = ref_at(reference, name + ".near_zero_packed");
    const int64_t K = pred.masks.size(0), n = pred.masks.numel() / K;
    VITRT_CHECK(masks.dim() == 2 && masks.size(0) == K && masks.size(1) == (n + 7) / 8, InvalidArgument,
                "reference masks for case '", name, "' have shape ", shape_str(masks.shape()), ", vitrt made ",
                shape_str(pred.masks.shape()));
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t* mine = pred.masks.data<uint8_t>() + k * n;
      const uint8_t* ref = masks.data<uint8_t>() + k * masks.size(1);
      const uint8_t* nz = near.data<uint8_t>() + k * near.size(1);
      for (int64_t i = 0; i < n; ++i) {
        ++fc.mask_pixels;
        if (packed_bit(nz, i)) {
          ++fc.near_zero;
          continue;
        }
        fc.mask_mismatch += (mine[i] != 0) != packed_bit(ref, i);
      }
    }
    rep.cases.push_back(fc);
  }
  return rep;
}

}  // namespace vitrt::sam
