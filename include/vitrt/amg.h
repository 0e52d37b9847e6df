// "Segment everything": SAM's automatic mask generator (segment_anything/automatic_mask_generator.py).
// A grid of single-point prompts over the image (and optionally over overlapping crops of it) goes
// through the mask decoder in batches; the masks are filtered by predicted IoU and stability,
// de-duplicated by box NMS within and across crops, optionally cleaned of small holes and islands,
// and returned as records with the same fields and values as the reference generator.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt {

enum class AmgOutputMode {
  BinaryMask,       // "binary_mask": MaskSegmentation::mask
  UncompressedRle,  // "uncompressed_rle": MaskSegmentation::counts
  CocoRle,          // "coco_rle": MaskSegmentation::coco_counts (pycocotools' string)
};
// "binary_mask" | "uncompressed_rle" | "coco_rle" (the reference's names); InvalidArgument otherwise.
AmgOutputMode parse_amg_output_mode(const std::string& name);
const char* amg_output_mode_name(AmgOutputMode mode);

// Every parameter of SamAutomaticMaskGenerator, with the reference's default.
struct AmgOptions {
  // Points along one side of the grid (points_per_side**2 points). Unset: point_grids is used.
  std::optional<int> points_per_side = 32;
  // Explicit grids, one per crop layer (layer 0 = the whole image), points (x, y) normalised to
  // [0, 1]. Exclusive with points_per_side.
  std::vector<std::vector<std::array<double, 2>>> point_grids;
  int points_per_batch = 64;
  // With the model on CUDA: points per decoder batch, at least points_per_batch. Results do not
  // depend on it (each mask is filtered on its own); larger batches use the GPU better and need
  // more memory (~4 MiB per point in bf16, ~8 MiB in fp32, for the decoder's image-sized tensors).
  int gpu_points_per_batch = 256;
  double pred_iou_thresh = 0.88;         // in [0, 1]; 0 turns the filter off
  double stability_score_thresh = 0.95;  // in [0, 1]; 0 turns the filter off
  double stability_score_offset = 1.0;
  double box_nms_thresh = 0.7;  // in [0, 1]
  int crop_n_layers = 0;
  double crop_nms_thresh = 0.7;                 // in [0, 1]
  double crop_overlap_ratio = 512.0 / 1500.0;  // in [0, 1)
  int crop_n_points_downscale_factor = 1;
  int min_mask_region_area = 0;  // > 0: fill holes and drop islands smaller than this (8-connectivity)
  AmgOutputMode output_mode = AmgOutputMode::BinaryMask;

  // Throws InvalidArgument naming the first bad option.
  void validate() const;
};

// A mask at the original image size, in the form AmgOptions::output_mode asks for.
struct MaskSegmentation {
  AmgOutputMode mode = AmgOutputMode::BinaryMask;
  int height = 0, width = 0;
  std::vector<uint8_t> mask;     // BinaryMask: height * width, row-major, 0/1
  std::vector<uint32_t> counts;  // UncompressedRle: column-major runs, starting with zeros
  std::string coco_counts;       // CocoRle: the compressed counts string pycocotools writes
};

// One generated mask: the fields of the reference's record dict.
struct MaskRecord {
  MaskSegmentation segmentation;
  int64_t area = 0;
  std::array<int64_t, 4> bbox{};  // XYWH of the inclusive box: w = x1 - x0 (as the reference)
  float predicted_iou = 0;
  std::array<double, 2> point_coords{};  // the prompt, in original-image pixels
  float stability_score = 0;
  std::array<int64_t, 4> crop_box{};  // XYWH of the crop the mask came from
};

// Reported after every decoded batch: enough for a progress line.
struct AmgProgress {
  int crop = 0, n_crops = 0;  // crop being processed (0-based) and how many there are
  int64_t points_done = 0, points_total = 0;  // over all crops
  int64_t masks_kept = 0;  // masks that passed the per-batch filters so far
};

// Time spent per stage in the last generate() call, in milliseconds.
// On CUDA: encode_ms waits for the encoder, decode_ms for the decoder (through the IoU scores'
// download), filter_ms covers the device filters and the download of their results, rle_ms the
// device RLE of the masks kept by NMS (on the CPU the RLE is part of filter_ms).
struct AmgTimings {
  double encode_ms = 0, decode_ms = 0, filter_ms = 0, nms_ms = 0, rle_ms = 0, postprocess_ms = 0, encode_out_ms = 0;
  double total_ms = 0;
};

class SamAutomaticMaskGenerator {
 public:
  // Throws InvalidArgument for bad options (see AmgOptions::validate).
  explicit SamAutomaticMaskGenerator(std::shared_ptr<const SamModel> model, AmgOptions options = {});

  // All masks of an RGB image. Throws ImageError for an empty image.
  std::vector<MaskRecord> generate(const Image& rgb);

  void set_progress_callback(std::function<void(const AmgProgress&)> callback) { progress_ = std::move(callback); }
  const AmgOptions& options() const { return options_; }
  const AmgTimings& last_timings() const { return timings_; }

 private:
  std::shared_ptr<const SamModel> model_;
  AmgOptions options_;
  std::vector<std::vector<std::array<double, 2>>> grids_;  // one per crop layer
  std::function<void(const AmgProgress&)> progress_;
  AmgTimings timings_;
};

}  // namespace vitrt
