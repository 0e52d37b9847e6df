// The pure pieces of the automatic mask generator (segment_anything/utils/amg.py) and of the
// COCO accuracy tool, each reproducing its reference bit for bit: point grids and crop boxes in
// float64 like NumPy, stability scores counted like calculate_stability_score, torchvision's
// NMS in float32, OpenCV-style 8-connected components for remove_small_regions, SAM's mask
// upscaling (Sam.postprocess_masks) fused per mask, and pycocotools' polygon rasterisation.
// Internal header.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vitrt::amg {

using GridPoint = std::array<double, 2>;  // (x, y) in [0, 1]
using PointGrid = std::vector<GridPoint>;

// build_point_grid: n x n points, x varying fastest, at np.linspace(1/(2n), 1 - 1/(2n), n).
PointGrid build_point_grid(int n_per_side);
// build_all_layer_point_grids: layer i has int(n_per_side / scale_per_layer**i) points per side.
std::vector<PointGrid> build_all_layer_point_grids(int n_per_side, int n_layers, int scale_per_layer);

// A crop in XYXY pixels (exclusive x1, y1) and its layer (0 = the whole image).
struct CropBox {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int layer = 0;
  int width() const { return x1 - x0; }
  int height() const { return y1 - y0; }
};
// generate_crop_boxes: the whole image, then (2^(i+1))^2 overlapping crops for layer i + 1,
// x0 outer and y0 inner as itertools.product gives them.
std::vector<CropBox> generate_crop_boxes(int im_h, int im_w, int n_layers, double overlap_ratio);

// calculate_stability_score from the two pixel counts: int32 / int32 -> float32 (0/0 = NaN).
float stability_score(int32_t intersections, int32_t unions);
// calculate_stability_score on one plane of logits: counts of logit > (threshold + offset) and
// logit > (threshold - offset), thresholds rounded to float32, summed per row in int16 (which
// wraps like the reference's dtype=torch.int16 for rows over 32767 pixels) then in int32.
float calculate_stability_score(const float* logits, int h, int w, double mask_threshold, double offset);

// torchvision.ops.nms on float32 XYXY boxes: scores sorted descending with a stable sort, IoU
// in float32, suppressed when (double)IoU > iou_threshold. Returns kept indices, best first.
using BoxF = std::array<float, 4>;
std::vector<int64_t> nms(const std::vector<BoxF>& boxes, const std::vector<float>& scores, double iou_threshold);
// torchvision.ops.batched_nms with every box in one category, as the generator calls it. Past
// 1000 boxes torchvision re-sorts the kept indices with an unstable sort; ties (equal scores)
// may then come out in another order than here. The set of kept boxes is the same.
std::vector<int64_t> batched_nms(const std::vector<BoxF>& boxes, const std::vector<float>& scores,
                                 double iou_threshold);

// is_box_near_crop_edge for one inclusive XYXY box in crop coordinates: near (|d| <= atol, in
// float32) a crop edge that is not also an edge of the original image.
bool is_box_near_crop_edge(const std::array<int64_t, 4>& box_in_crop, const CropBox& crop, int orig_w, int orig_h,
                           float atol = 20.0f);

// batched_mask_to_box for one mask: inclusive XYXY; [0, 0, 0, 0] for an empty mask.
std::array<int64_t, 4> mask_to_box(const uint8_t* mask, int h, int w);

// mask_to_rle_pytorch(uncrop_masks(mask)): column-major runs of a crop's h x w mask placed at
// (x0, y0) in an H x W image of zeros.
std::vector<uint32_t> rle_counts_uncropped(const uint8_t* crop_mask, int h, int w, int x0, int y0, int H, int W);

// remove_small_regions(mask, area_thresh, mode): "holes" fills background components (of the
// 8-connected complement) smaller than area_thresh; "islands" removes foreground components
// smaller than it, keeping the largest when all are. Returns whether the mask changed.
enum class RegionMode { Holes, Islands };
bool remove_small_regions(std::vector<uint8_t>& mask, int h, int w, double area_thresh, RegionMode mode);

// 8-connected component labels of the nonzero pixels (0 = background), numbered 1.. in the
// order of each component's first pixel in a raster scan. Returns the number of labels
// including the background; `sizes[l]` is the pixel count of label l.
int connected_components8(const uint8_t* mask, int h, int w, std::vector<int32_t>& labels,
                          std::vector<int64_t>& sizes);

// Sam.postprocess_masks for one low-res logit plane, exactly (bit for bit) as the predictor's
// two F.interpolate(bilinear, align_corners=False) calls: m x m -> S x S, crop the top-left
// input_h x input_w, -> out_h x out_w. Only the rows and columns the second resize reads are
// computed in the first, and each horizontal pass is shared by the rows that use it.
class LogitUpscaler {
 public:
  LogitUpscaler(int low_res, int img_size, int input_h, int input_w, int out_h, int out_w);
  int out_h() const { return out_h_; }
  int out_w() const { return out_w_; }

  // Per-thread working memory.
  struct Scratch {
    std::vector<float> low_h;    // horizontal pass of the low-res rows needed: [n_low_rows, n_cols1]
    std::vector<float> a_row;    // one row of the first resize at the needed columns
    std::vector<float> h2[2];    // horizontal pass of the second resize for two input rows
    int h2_row[2] = {-1, -1};
    std::vector<float> out_row;  // one output row
  };

  // Calls row_fn(y, row) for y = 0 .. out_h - 1 with the out_w logits of that output row.
  template <class RowFn>
  void run(const float* low_res, Scratch& s, RowFn&& row_fn) const {
    prepare(low_res, s);
    for (int y = 0; y < out_h_; ++y) row_fn(y, output_row(y, s));
  }
  // The whole plane into out[out_h * out_w].
  void run_plane(const float* low_res, Scratch& s, float* out) const;

 private:
  struct Tap {
    int32_t i0, i1;
    float w0, w1;
  };
  static std::vector<Tap> taps(int64_t in, int64_t out);
  void prepare(const float* low_res, Scratch& s) const;
  const float* output_row(int y, Scratch& s) const;
  const float* h2_row(int r, int keep, Scratch& s) const;  // keep: a row not to evict

  int m_, S_, ih_, iw_, out_h_, out_w_;
  std::vector<Tap> ty1_, tx1_, ty2_, tx2_;
  std::vector<int32_t> cols1_;      // columns of the first resize that the second reads
  std::vector<int32_t> col_slot_;   // first-resize column -> index in cols1_ (or -1)
  std::vector<Tap> tx2c_;           // tx2_ with i0/i1 mapped to indices in cols1_
  std::vector<int32_t> low_rows_;   // low-res rows that the needed first-resize rows read
  std::vector<int32_t> low_slot_;   // low-res row -> index in low_rows_ (or -1)
};

// ---- COCO annotations (pycocotools) ------------------------------------------------------

// rleFrPoly: one polygon [x0, y0, x1, y1, ...] rasterised to column-major runs of an h x w mask.
std::vector<uint32_t> rle_from_polygon(const std::vector<double>& xy, int h, int w);
// rleFrBbox: an XYWH box rasterised through rleFrPoly.
std::vector<uint32_t> rle_from_bbox(const std::array<double, 4>& xywh, int h, int w);
// rleMerge: union (or intersection) of several RLEs of the same size.
std::vector<uint32_t> rle_merge(const std::vector<std::vector<uint32_t>>& rles, bool intersect = false);

// segment-anything-fast's _get_center_point: the centre of mass rounded half-to-even if it lies
// in the mask, else the pixel maximising the smallest of its up/right/down/left run lengths,
// scanning rows and stopping each row once that reaches 20. Returns (x, y); (-1, -1) for an
// empty mask (where their code fails).
std::array<int, 2> center_point(const uint8_t* mask, int h, int w);

}  // namespace vitrt::amg
