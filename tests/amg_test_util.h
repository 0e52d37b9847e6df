// The automatic-mask-generator fixtures (tests/fixtures/amg, written by scripts/make_amg_fixtures.py):
// tiny1024 with the mask-head patch (masks with real structure), the cases and their options.
#pragma once
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "models/sam/sam_model.h"
#include "vitrt/amg.h"

namespace vitrt::test {

inline std::filesystem::path amg_fixtures() { return std::filesystem::path(VITRT_FIXTURES); }

inline std::shared_ptr<const SamModel> amg_model() {
  static const std::shared_ptr<const SamModel> model = [] {
    const auto fix = amg_fixtures();
    StateDict sd = load_state_dict((fix / "sam" / "tiny1024.pth").string());
    for (auto& [k, v] : load_state_dict((fix / "amg" / "amg_patch.pth").string())) {
      VITRT_CHECK(sd.count(k), Error, "amg_patch.pth patches '", k, "', which tiny1024.pth does not have");
      sd[k] = v;
    }
    SamConfig cfg;
    sam::apply_config_json((fix / "sam" / "tiny1024.json").string(), cfg);
    return std::shared_ptr<const SamModel>(SamModel::from_state_dict(sd, cfg));
  }();
  return model;
}

inline const nlohmann::json& amg_cases() {
  static const nlohmann::json j = [] {
    std::ifstream in(amg_fixtures() / "amg" / "amg_cases.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// The generator options of one case (the reference's names), in the given output mode.
inline AmgOptions amg_options_from(const nlohmann::json& o, AmgOutputMode mode) {
  AmgOptions a;
  a.output_mode = mode;
  if (o.contains("points_per_side")) a.points_per_side = o["points_per_side"].get<int>();
  if (o.contains("points_per_batch")) a.points_per_batch = o["points_per_batch"];
  if (o.contains("pred_iou_thresh")) a.pred_iou_thresh = o["pred_iou_thresh"];
  if (o.contains("stability_score_thresh")) a.stability_score_thresh = o["stability_score_thresh"];
  if (o.contains("stability_score_offset")) a.stability_score_offset = o["stability_score_offset"];
  if (o.contains("box_nms_thresh")) a.box_nms_thresh = o["box_nms_thresh"];
  if (o.contains("crop_n_layers")) a.crop_n_layers = o["crop_n_layers"];
  if (o.contains("crop_nms_thresh")) a.crop_nms_thresh = o["crop_nms_thresh"];
  if (o.contains("crop_overlap_ratio")) a.crop_overlap_ratio = o["crop_overlap_ratio"];
  if (o.contains("crop_n_points_downscale_factor"))
    a.crop_n_points_downscale_factor = o["crop_n_points_downscale_factor"];
  if (o.contains("min_mask_region_area")) a.min_mask_region_area = o["min_mask_region_area"];
  return a;
}

}  // namespace vitrt::test
