// SamAutomaticMaskGenerator (segment_anything/automatic_mask_generator.py), step for step:
//   per crop: set_image(crop); per batch of grid points: decode (3 masks per point), filter by
//   predicted IoU, stability score, threshold, box, crop-edge test, uncrop + RLE; NMS in the crop;
//   across crops: NMS preferring smaller crops; then optional small-region cleanup; records.
// What differs is only how it is computed: masks failing the IoU filter are never upscaled, and
// each surviving mask is upscaled, scored, thresholded and run-length encoded in one pass on its
// own thread instead of as [B*3, H, W] float tensors. With the model on CUDA the same steps run
// on the device (amg_device.h): large decoder batches, the per-pixel filters and the RLE there,
// NMS and everything after it here, on the few numbers and runs that come back.
#include "models/sam/automatic_mask_generator.h"

#include "models/sam/amg_device.h"
#include "ops/ops.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "io/rle.h"
#include "vitrt/error.h"

namespace vitrt {

AmgOutputMode parse_amg_output_mode(const std::string& name) {
  if (name == "binary_mask") return AmgOutputMode::BinaryMask;
  if (name == "uncompressed_rle") return AmgOutputMode::UncompressedRle;
  if (name == "coco_rle") return AmgOutputMode::CocoRle;
  throw InvalidArgument(
      detail::concat("unknown output mode '", name, "': expected binary_mask, uncompressed_rle or coco_rle"));
}

const char* amg_output_mode_name(AmgOutputMode mode) {
  switch (mode) {
    case AmgOutputMode::BinaryMask: return "binary_mask";
    case AmgOutputMode::UncompressedRle: return "uncompressed_rle";
    case AmgOutputMode::CocoRle: return "coco_rle";
  }
  return "?";
}

void AmgOptions::validate() const {
  auto in01 = [](double v, const char* name) {
    VITRT_CHECK(v >= 0.0 && v <= 1.0, InvalidArgument, name, " must be in [0, 1], got ", v);
  };
  VITRT_CHECK(points_per_side.has_value() != !point_grids.empty(), InvalidArgument,
              "exactly one of points_per_side and point_grids must be given (got ",
              points_per_side ? "both" : "neither", ")");
  if (points_per_side)
    VITRT_CHECK(*points_per_side >= 1, InvalidArgument, "points_per_side must be at least 1, got ",
                *points_per_side);
  VITRT_CHECK(crop_n_layers >= 0 && crop_n_layers <= 8, InvalidArgument, "crop_n_layers must be in [0, 8], got ",
              crop_n_layers);
  if (!points_per_side) {
    VITRT_CHECK(point_grids.size() >= static_cast<size_t>(crop_n_layers) + 1, InvalidArgument, "point_grids has ",
                point_grids.size(), " grid(s) but crop_n_layers ", crop_n_layers, " needs one per layer (",
                crop_n_layers + 1, ")");
    for (size_t g = 0; g < point_grids.size(); ++g) {
      VITRT_CHECK(!point_grids[g].empty(), InvalidArgument, "point grid ", g, " is empty");
      for (size_t i = 0; i < point_grids[g].size(); ++i)
        for (double v : point_grids[g][i])
          VITRT_CHECK(v >= 0.0 && v <= 1.0, InvalidArgument, "point ", i, " of grid ", g, " has coordinate ", v,
                      " outside [0, 1] (grids are normalised)");
    }
  }
  VITRT_CHECK(points_per_batch >= 1, InvalidArgument, "points_per_batch must be at least 1, got ", points_per_batch);
  VITRT_CHECK(gpu_points_per_batch >= 1, InvalidArgument, "gpu_points_per_batch must be at least 1, got ",
              gpu_points_per_batch);
  in01(pred_iou_thresh, "pred_iou_thresh");
  in01(stability_score_thresh, "stability_score_thresh");
  VITRT_CHECK(std::isfinite(stability_score_offset) && stability_score_offset >= 0, InvalidArgument,
              "stability_score_offset must be finite and >= 0, got ", stability_score_offset);
  in01(box_nms_thresh, "box_nms_thresh");
  in01(crop_nms_thresh, "crop_nms_thresh");
  VITRT_CHECK(crop_overlap_ratio >= 0.0 && crop_overlap_ratio < 1.0, InvalidArgument,
              "crop_overlap_ratio must be in [0, 1), got ", crop_overlap_ratio);
  VITRT_CHECK(crop_n_points_downscale_factor >= 1, InvalidArgument,
              "crop_n_points_downscale_factor must be at least 1, got ", crop_n_points_downscale_factor);
  VITRT_CHECK(min_mask_region_area >= 0, InvalidArgument, "min_mask_region_area must be >= 0, got ",
              min_mask_region_area);
}

namespace amg {

Tensor point_sparse_tokens(const SamModel& model, int input_h, int input_w, int orig_h, int orig_w,
                           const std::vector<GridPoint>& pts) {
  const SamConfig& c = model.config;
  const sam::PromptEncoder& pe = model.prompt_encoder;
  const int64_t n = static_cast<int64_t>(pts.size()), D = c.out_chans;
  // ResizeLongestSide.apply_coords: coords * (new_w / old_w) in float64. The prompt encoder then
  // adds 0.5 and divides by the input size, still in float64 (the tensor is float64), and only
  // casts to float32 for the Fourier features.
  const double sx = static_cast<double>(input_w) / orig_w;
  const double sy = static_cast<double>(input_h) / orig_h;
  std::vector<float> coords01(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    coords01[2 * i] = static_cast<float>((pts[i][0] * sx + 0.5) / c.img_size);
    coords01[2 * i + 1] = static_cast<float>((pts[i][1] * sy + 0.5) / c.img_size);
  }
  // Sparse tokens: the point (label 1) and the padding point (label -1: not_a_point only).
  Tensor sparse = Tensor::empty({n, 2, D});
  std::vector<float> enc(static_cast<size_t>(n) * D);
  pe.pe_encoding(coords01.data(), n, enc.data());
  const float* pos = pe.point_embed[1].data<float>();
  const float* nap = pe.not_a_point.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float* t = sparse.data<float>() + i * 2 * D;
    for (int64_t d = 0; d < D; ++d) t[d] = enc[i * D + d] + pos[d];
    std::memcpy(t + D, nap, sizeof(float) * D);
  }
  return sparse;
}

void decode_points(const SamModel& model, const ImageEmbedding& e, const std::vector<GridPoint>& pts, Tensor& low_res,
                   Tensor& iou) {
  const SamConfig& c = model.config;
  const sam::PromptEncoder& pe = model.prompt_encoder;
  // The host path: the filters of filter_batch read host memory (amg_device.h is the GPU's).
  VITRT_CHECK(!e.features.is_cuda() && !pe.no_mask.is_cuda() && model.device == Device::CPU, InvalidArgument,
              "amg::decode_points runs the CPU path; a CUDA model goes through amg_device.h");
  const int64_t n = static_cast<int64_t>(pts.size()), D = c.out_chans, HW = c.grid_size() * c.grid_size();
  const int64_t m = c.low_res_size();
  const Tensor sparse = point_sparse_tokens(model, e.input_height, e.input_width, e.original_height,
                                            e.original_width, pts);
  // Dense: no_mask_embed broadcast over the grid.
  Tensor dense = Tensor::empty({n, HW, D});
  const float* nm = pe.no_mask.data<float>();
  for (int64_t i = 0; i < n * HW; ++i) std::memcpy(dense.data<float>() + i * D, nm, sizeof(float) * D);

  Tensor masks, ious;
  model.mask_decoder.forward(e.features, pe.dense_pe, sparse, dense, masks, ious);
  // multimask_output=True: outputs 1..3 of the M = 4.
  const int64_t M = masks.size(1), K = M - 1;
  low_res = Tensor::empty({n, K, m, m});
  iou = Tensor::empty({n, K});
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(low_res.data<float>() + i * K * m * m, masks.data<float>() + (i * M + 1) * m * m,
                sizeof(float) * K * m * m);
    for (int64_t k = 0; k < K; ++k) iou.data<float>()[i * K + k] = ious.data<float>()[i * M + 1 + k];
  }
}

FilterThresholds::FilterThresholds(const AmgOptions& o)
    : iou(static_cast<float>(o.pred_iou_thresh)),
      stability(static_cast<float>(o.stability_score_thresh)),
      above_hi(static_cast<float>(kMaskThreshold + o.stability_score_offset)),
      above_lo(static_cast<float>(kMaskThreshold - o.stability_score_offset)),
      mask(static_cast<float>(kMaskThreshold)) {}

void filter_batch(const Tensor& low_res, const Tensor& iou, const std::vector<GridPoint>& pts,
                  const LogitUpscaler& up, const CropBox& crop, int crop_index, int orig_h, int orig_w,
                  const AmgOptions& o, std::vector<CropMask>& out) {
  const int64_t n = low_res.size(0), K = low_res.size(1), m = low_res.size(2);
  const int ch = up.out_h(), cw = up.out_w();
  const FilterThresholds t(o);

  // The IoU filter first: it needs no pixels.
  std::vector<int64_t> cand;
  for (int64_t i = 0; i < n * K; ++i)
    if (!(o.pred_iou_thresh > 0.0) || iou.data<float>()[i] > t.iou) cand.push_back(i);
  std::vector<std::optional<CropMask>> slots(cand.size());

#pragma omp parallel
  {
    LogitUpscaler::Scratch scratch;
    std::vector<uint8_t> mask(static_cast<size_t>(ch) * cw);
#pragma omp for schedule(dynamic, 1)
    for (int64_t ci = 0; ci < static_cast<int64_t>(cand.size()); ++ci) {
      const int64_t idx = cand[ci];
      int32_t inter = 0, uni = 0;
      up.run(low_res.data<float>() + idx * m * m, scratch, [&](int y, const float* row) {
        int32_t ri = 0, ru = 0;
        uint8_t* mr = mask.data() + static_cast<size_t>(y) * cw;
        for (int x = 0; x < cw; ++x) {
          const float v = row[x];
          ri += v > t.above_hi;
          ru += v > t.above_lo;
          mr[x] = v > t.mask;
        }
        inter += static_cast<int16_t>(ri);  // .sum(-1, dtype=torch.int16)
        uni += static_cast<int16_t>(ru);
      });
      const float stab = stability_score(inter, uni);
      if (o.stability_score_thresh > 0.0 && !(stab >= t.stability)) continue;
      const auto box = mask_to_box(mask.data(), ch, cw);
      if (is_box_near_crop_edge(box, crop, orig_w, orig_h)) continue;
      CropMask cm;
      cm.rle = rle_counts_uncropped(mask.data(), ch, cw, crop.x0, crop.y0, orig_h, orig_w);
      cm.box = box;
      cm.iou = iou.data<float>()[idx];
      cm.stability = stab;
      cm.point = pts[idx / K];
      cm.crop = crop_index;
      slots[ci] = std::move(cm);
    }
  }
  for (auto& s : slots)
    if (s) out.push_back(std::move(*s));
}

namespace {
std::vector<BoxF> boxes_f32(const std::vector<CropMask>& v) {
  std::vector<BoxF> b(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    for (int k = 0; k < 4; ++k) b[i][k] = static_cast<float>(v[i].box[k]);
  return b;
}
std::vector<CropMask> take(std::vector<CropMask>& v, const std::vector<int64_t>& keep) {
  std::vector<CropMask> out;
  out.reserve(keep.size());
  for (int64_t i : keep) out.push_back(std::move(v[i]));
  return out;
}
}  // namespace

std::vector<CropMask> postprocess_small_regions(std::vector<CropMask> masks, int H, int W, int min_area,
                                                double nms_thresh) {
  if (masks.empty()) return masks;
  const int64_t n = static_cast<int64_t>(masks.size());
  std::vector<float> scores(n);
  std::vector<BoxF> boxes(n);
  std::vector<std::vector<uint32_t>> new_rle(n);
  std::vector<std::array<int64_t, 4>> new_box(n);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    std::vector<uint8_t> mask = rle_decode(masks[i].rle, H, W);
    const bool holes = remove_small_regions(mask, H, W, min_area, RegionMode::Holes);
    const bool islands = remove_small_regions(mask, H, W, min_area, RegionMode::Islands);
    const bool unchanged = !holes && !islands;
    scores[i] = unchanged ? 1.0f : 0.0f;  // NMS prefers masks that needed no cleanup
    new_box[i] = mask_to_box(mask.data(), H, W);
    for (int k = 0; k < 4; ++k) boxes[i][k] = static_cast<float>(new_box[i][k]);
    if (!unchanged) new_rle[i] = rle_counts(mask.data(), H, W);
  }
  const std::vector<int64_t> keep = batched_nms(boxes, scores, nms_thresh);
  for (int64_t i : keep)
    if (scores[i] == 0.0f) masks[i].rle = std::move(new_rle[i]), masks[i].box = new_box[i];
  return take(masks, keep);
}

}  // namespace amg

SamAutomaticMaskGenerator::SamAutomaticMaskGenerator(std::shared_ptr<const SamModel> model, AmgOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  VITRT_CHECK(model_ != nullptr, InvalidArgument, "SamAutomaticMaskGenerator needs a model");
  options_.validate();
  if (options_.points_per_side)
    grids_ = amg::build_all_layer_point_grids(*options_.points_per_side, options_.crop_n_layers,
                                              options_.crop_n_points_downscale_factor);
  else
    grids_ = options_.point_grids;
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Image crop_image(const Image& rgb, const amg::CropBox& c) {
  Image out;
  out.width = c.width();
  out.height = c.height();
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < out.height; ++y)
    std::memcpy(out.row(y), rgb.row(c.y0 + y) + static_cast<size_t>(c.x0) * 3, static_cast<size_t>(out.width) * 3);
  return out;
}

}  // namespace

std::vector<MaskRecord> SamAutomaticMaskGenerator::generate(const Image& rgb) {
  VITRT_CHECK(!rgb.empty(), ImageError, "cannot generate masks for an empty image (", rgb.width, "x", rgb.height,
              ")");
  VITRT_CHECK(rgb.channels == 3 && rgb.pixels.size() == static_cast<size_t>(rgb.width) * rgb.height * 3, ImageError,
              "generate expects an RGB image with ", rgb.width, "x", rgb.height, "x3 bytes");
  timings_ = AmgTimings{};
  const auto t_start = Clock::now();
  const AmgOptions& o = options_;
  const int H = rgb.height, W = rgb.width;
  const SamConfig& cfg = model_->config;
  const auto crops = amg::generate_crop_boxes(H, W, o.crop_n_layers, o.crop_overlap_ratio);

  AmgProgress progress;
  progress.n_crops = static_cast<int>(crops.size());
  for (const auto& c : crops) progress.points_total += static_cast<int64_t>(grids_[c.layer].size());

  const bool on_device = model_->device == Device::CUDA;
  SamPredictor predictor(model_);
  std::vector<amg::CropMask> data;
  for (size_t ci = 0; ci < crops.size(); ++ci) {
    const amg::CropBox& crop = crops[ci];
    progress.crop = static_cast<int>(ci);
    const int ch = crop.height(), cw = crop.width();
    // points_for_image = grid * (crop w, crop h), in float64.
    const amg::PointGrid& grid = grids_[crop.layer];
    auto batch_points = [&](size_t b0, size_t b1) {
      std::vector<amg::GridPoint> pts;
      for (size_t i = b0; i < b1; ++i) pts.push_back({grid[i][0] * cw, grid[i][1] * ch});
      return pts;
    };
    auto report = [&](size_t n_points, size_t kept) {
      progress.points_done += static_cast<int64_t>(n_points);
      progress.masks_kept = static_cast<int64_t>(data.size() + kept);
      if (progress_) progress_(progress);
    };
    std::vector<amg::CropMask> crop_data;
    std::optional<amg::DeviceCropMasks> device_masks;
    auto t0 = Clock::now();
    if (on_device) {
      // The GPU path (amg_device.h): embedding and logits stay on the device; batches are as large
      // as gpu_points_per_batch allows (each mask's result is independent of its batch).
      int input_h = 0, input_w = 0;
      const Tensor features =
          amg::encode_image_on_device(*model_, crops.size() == 1 ? rgb : crop_image(rgb, crop), &input_h, &input_w);
      amg::sync_device();
      timings_.encode_ms += ms_since(t0);
      device_masks.emplace(cfg.low_res_size(), cfg.img_size, input_h, input_w, crop, static_cast<int>(ci), H, W, o);
      const size_t batch = static_cast<size_t>(std::max(o.points_per_batch, o.gpu_points_per_batch));
      for (size_t b0 = 0; b0 < grid.size(); b0 += batch) {
        const size_t b1 = std::min(grid.size(), b0 + batch);
        const std::vector<amg::GridPoint> pts = batch_points(b0, b1);
        t0 = Clock::now();
        Tensor masks, iou;
        amg::decode_points_on_device(*model_, features, input_h, input_w, ch, cw, pts, masks, iou);
        const Tensor iou_host = ops::cast(iou, DType::F32).to(Device::CPU);  // waits for the decoder
        timings_.decode_ms += ms_since(t0);
        t0 = Clock::now();
        device_masks->filter_batch(masks, 1, static_cast<int>(masks.size(1)) - 1, iou_host, pts, crop_data);
        timings_.filter_ms += ms_since(t0);
        report(b1 - b0, crop_data.size());
      }
    } else {
      if (crops.size() == 1)
        predictor.set_image(rgb);
      else
        predictor.set_image(crop_image(rgb, crop));
      timings_.encode_ms += ms_since(t0);
      const ImageEmbedding& e = predictor.embedding();
      const amg::LogitUpscaler upscaler(cfg.low_res_size(), cfg.img_size, e.input_height, e.input_width, ch, cw);
      for (size_t b0 = 0; b0 < grid.size(); b0 += o.points_per_batch) {
        const size_t b1 = std::min(grid.size(), b0 + static_cast<size_t>(o.points_per_batch));
        const std::vector<amg::GridPoint> pts = batch_points(b0, b1);
        Tensor low_res, iou;
        t0 = Clock::now();
        amg::decode_points(*model_, e, pts, low_res, iou);
        timings_.decode_ms += ms_since(t0);
        t0 = Clock::now();
        amg::filter_batch(low_res, iou, pts, upscaler, crop, static_cast<int>(ci), H, W, o, crop_data);
        timings_.filter_ms += ms_since(t0);
        report(b1 - b0, crop_data.size());
      }
    }

    // Duplicates within the crop, best predicted IoU first.
    t0 = Clock::now();
    std::vector<float> scores(crop_data.size());
    for (size_t i = 0; i < crop_data.size(); ++i) scores[i] = crop_data[i].iou;
    const auto keep = amg::batched_nms(amg::boxes_f32(crop_data), scores, o.box_nms_thresh);
    crop_data = amg::take(crop_data, keep);
    timings_.nms_ms += ms_since(t0);
    if (device_masks) {  // only the masks that survived NMS are run-length encoded
      t0 = Clock::now();
      device_masks->encode_rle(crop_data);
      timings_.rle_ms += ms_since(t0);
    }
    t0 = Clock::now();
    for (amg::CropMask& cm : crop_data) {
      cm.device_plane = -1;
      cm.box = {cm.box[0] + crop.x0, cm.box[1] + crop.y0, cm.box[2] + crop.x0, cm.box[3] + crop.y0};
      cm.point = {cm.point[0] + crop.x0, cm.point[1] + crop.y0};
      data.push_back(std::move(cm));
    }
    timings_.nms_ms += ms_since(t0);
  }

  // Duplicates between crops: prefer masks from smaller crops (score 1 / crop area, float32).
  if (crops.size() > 1) {
    auto t0 = Clock::now();
    std::vector<float> scores(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      const amg::CropBox& c = crops[data[i].crop];
      scores[i] = 1.0f / static_cast<float>(static_cast<int64_t>(c.width()) * c.height());
    }
    const auto keep = amg::batched_nms(amg::boxes_f32(data), scores, o.crop_nms_thresh);
    data = amg::take(data, keep);
    timings_.nms_ms += ms_since(t0);
  }

  if (o.min_mask_region_area > 0) {
    auto t0 = Clock::now();
    data = amg::postprocess_small_regions(std::move(data), H, W, o.min_mask_region_area,
                                          std::max(o.box_nms_thresh, o.crop_nms_thresh));
    timings_.postprocess_ms += ms_since(t0);
  }

  auto t0 = Clock::now();
  std::vector<MaskRecord> records(data.size());
  // Threads only for enough records to pay for waking the pool: after ~40 ms of GPU work its
  // threads sleep. On the H200 machine (`everything --bench`, vit_h 640x480, no mask surviving)
  // this step's median was 2.9 ms for zero records, with run totals split between 43.6 and 47.0 ms;
  // the parallel region is the only work here.
#pragma omp parallel for schedule(dynamic, 4) if (data.size() >= 32)
  for (int64_t i = 0; i < static_cast<int64_t>(data.size()); ++i) {
    amg::CropMask& cm = data[i];
    MaskRecord& r = records[i];
    MaskSegmentation& s = r.segmentation;
    s.mode = o.output_mode;
    s.height = H;
    s.width = W;
    switch (o.output_mode) {
      case AmgOutputMode::BinaryMask: s.mask = rle_decode(cm.rle, H, W); break;
      case AmgOutputMode::CocoRle: s.coco_counts = rle_to_string(cm.rle); break;
      case AmgOutputMode::UncompressedRle: break;
    }
    r.area = static_cast<int64_t>(rle_area(cm.rle));
    r.bbox = {cm.box[0], cm.box[1], cm.box[2] - cm.box[0], cm.box[3] - cm.box[1]};
    r.predicted_iou = cm.iou;
    r.point_coords = cm.point;
    r.stability_score = cm.stability;
    const amg::CropBox& c = crops[cm.crop];
    r.crop_box = {c.x0, c.y0, c.x1 - c.x0, c.y1 - c.y0};
    if (o.output_mode == AmgOutputMode::UncompressedRle) s.counts = std::move(cm.rle);
  }
  timings_.encode_out_ms = ms_since(t0);
  timings_.total_ms = ms_since(t_start);
  return records;
}

}  // namespace vitrt
