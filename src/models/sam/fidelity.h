// Comparison of vitrt's SAM outputs with reference outputs written by the official
// segment-anything code (scripts/make_sam_fixtures.py, scripts/fidelity_full.py). Used by the
// fidelity tests and by `vitrt fidelity-check`.
#pragma once
#include <string>
#include <vector>

#include "vitrt/sam.h"

namespace vitrt::sam {

struct FidelityCase {
  std::string name;
  double iou_rel = 0;        // relative Frobenius error of the IoU predictions
  double low_res_rel = 0;    // of the low-res logits
  int64_t mask_pixels = 0;   // pixels compared (all masks)
  int64_t mask_mismatch = 0; // differing thresholded pixels where the reference logit is not within 1e-3 of 0
  int64_t near_zero = 0;     // pixels excluded because the reference logit is within 1e-3 of 0
};

struct FidelityReport {
  bool resized_identical = false;  // ResizeLongestSide output hash (and pixels when stored) equal
  double embedding_rel = 0;
  std::vector<FidelityCase> cases;
};

uint64_t fnv1a64(const uint8_t* data, size_t n);

// Runs `predictor` on `image` and every prompt case stored in `reference`.
FidelityReport compare_with_reference(SamPredictor& predictor, const Image& image, const StateDict& reference);

}  // namespace vitrt::sam
