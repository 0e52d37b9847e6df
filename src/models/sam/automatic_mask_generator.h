// Internal pieces of SamAutomaticMaskGenerator (the public class is in vitrt/amg.h), split so that
// a device backend can replace the batch decode and the per-mask filtering as a unit: both take
// and give plain arrays, and the crop-level logic (NMS, uncropping, records) stays shared. The
// CUDA backend's replacement is amg::DeviceCropMasks (amg_device.h).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "models/sam/amg_utils.h"
#include "models/sam/sam_model.h"
#include "vitrt/amg.h"

namespace vitrt::amg {

// SamPredictor.predict_torch(points[:, None, :], ones, multimask_output=True) for single
// foreground points given in pixels of the (cropped) image the embedding was made from, in
// float64 as the generator passes them: apply_coords, + 0.5 and / img_size all in float64,
// rounded to float32 only for the Fourier features. Gives the three multimask low-res logit
// planes per point, low_res [n, 3, m, m], and their predicted IoUs, iou [n, 3].
void decode_points(const SamModel& model, const ImageEmbedding& embedding, const std::vector<GridPoint>& points_px,
                   Tensor& low_res, Tensor& iou);

// The sparse prompt tokens of decode_points: [n, 2, out] float32 on the CPU (the point, then the
// padding point), for an image of orig_h x orig_w resized to input_h x input_w.
Tensor point_sparse_tokens(const SamModel& model, int input_h, int input_w, int orig_h, int orig_w,
                           const std::vector<GridPoint>& points_px);

// A mask that passed the per-batch filters, in the frame of its crop until uncropped.
struct CropMask {
  std::vector<uint32_t> rle;     // column-major runs at the ORIGINAL image size (already uncropped)
  std::array<int64_t, 4> box{};  // inclusive XYXY
  float iou = 0, stability = 0;
  GridPoint point{};  // the prompt in pixels
  int crop = 0;       // index into the crop list
  int64_t device_plane = -1;  // device path: its logit plane in DeviceCropMasks (rle still empty)
};

// Sam.mask_threshold: a mask pixel is a logit above it.
constexpr double kMaskThreshold = 0.0;

// The per-batch filter thresholds in float32: the reference compares float32 tensors with Python
// floats, i.e. in float32. Shared by the CPU filter below and the device one (amg_device.cpp).
struct FilterThresholds {
  float iou;        // pred_iou_thresh
  float stability;  // stability_score_thresh
  float above_hi;   // mask_threshold + stability_score_offset
  float above_lo;   // mask_threshold - stability_score_offset
  float mask;       // mask_threshold
  explicit FilterThresholds(const AmgOptions& o);
};

// The filters of _process_batch in their order, on CPU threads, one mask per task: predicted IoU
// (skipping the upscale of masks that fail it), then upscaling to the crop size, stability score,
// thresholding, box, the crop-edge test and the uncropped RLE. Appends survivors to `out` in the
// reference's order (point-major, then mask index).
void filter_batch(const Tensor& low_res, const Tensor& iou, const std::vector<GridPoint>& points_px,
                  const LogitUpscaler& upscaler, const CropBox& crop, int crop_index, int orig_h, int orig_w,
                  const AmgOptions& options, std::vector<CropMask>& out);

// postprocess_small_regions: holes then islands below min_area, NMS preferring unchanged masks,
// kept changed masks get their new RLE and box. Returns the kept masks in NMS order.
std::vector<CropMask> postprocess_small_regions(std::vector<CropMask> masks, int orig_h, int orig_w, int min_area,
                                                double nms_thresh);

}  // namespace vitrt::amg
