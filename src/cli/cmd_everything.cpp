// `vitrt everything`: SAM's automatic mask generator over one image, a directory of images or a
// list file, streamed one image at a time with the model loaded once. Per image it writes the
// records as JSON (the reference's record fields; COCO RLE by default) and an overlay PNG.
// --bench N times the generator on one image instead (N runs after a warm-up, nothing written).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/image_inputs.h"
#include "io/overlay.h"
#include "io/rle.h"
#include "models/sam/sam_model.h"
#include "ops/op_profiler.h"
#include "vitrt/amg.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt::cli {

namespace {
namespace fs = std::filesystem;

struct EverythingArgs {
  std::string checkpoint, config, image, out, output_mode = "coco_rle";
  std::string random_weights, random_image;  // benchmarks without a checkpoint / an image file
  std::string device = "auto", dtype = "fp32", decoder_dtype;
  int points_per_side = 32, points_per_batch = 64, crop_n_layers = 0, crop_n_points_downscale_factor = 1;
  int gpu_points_per_batch = 256;
  int min_mask_region_area = 0;
  double pred_iou_thresh = 0.88, stability_score_thresh = 0.95, stability_score_offset = 1.0;
  double box_nms_thresh = 0.7, crop_nms_thresh = 0.7, crop_overlap_ratio = 512.0 / 1500.0;
  bool no_overlay = false, quiet = false;
  int bench = 0;  // > 0: time this many runs on the first image, write nothing
};

// "WxH" -> a deterministic image with smooth structure plus noise (as the tests' random_image).
Image synthetic_image(const std::string& size) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  VITRT_CHECK(std::sscanf(size.c_str(), "%d%c%d%c", &w, &x, &h, &extra) == 3 && (x == 'x' || x == 'X') && w >= 1 &&
                  h >= 1 && static_cast<int64_t>(w) * h <= (int64_t{1} << 28),
              InvalidArgument, "--random-image expects WIDTHxHEIGHT (e.g. 1500x2250), got '", size, "'");
  Image im;
  im.width = w;
  im.height = h;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  std::mt19937 rng(3);
  for (int yy = 0; yy < h; ++yy)
    for (int xx = 0; xx < w; ++xx)
      for (int c = 0; c < 3; ++c)
        im.pixels[(static_cast<size_t>(yy) * w + xx) * 3 + c] =
            static_cast<uint8_t>((xx * 255 / w + yy * 128 / h + c * 60 + rng() % 32) % 256);
  return im;
}

SamConfig config_by_name(const std::string& name) {
  if (name == "vit_b") return SamConfig::vit_b();
  if (name == "vit_l") return SamConfig::vit_l();
  if (name == "vit_h") return SamConfig::vit_h();
  throw InvalidArgument("unknown --random-weights model '" + name + "': expected vit_b, vit_l or vit_h");
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// --bench: one warm-up run (GEMM plans, memory pool), then `runs` timed runs of generate().
void run_bench(SamAutomaticMaskGenerator& gen, const Image& image, int runs, const std::string& device,
               const std::string& dtype, const std::string& model_name) {
  gen.generate(image);
  std::vector<double> total, encode, decode_filter, rle_nms, records;
  size_t n_masks = 0;
  for (int i = 0; i < runs; ++i) {
    n_masks = gen.generate(image).size();
    const AmgTimings& t = gen.last_timings();
    total.push_back(t.total_ms);
    encode.push_back(t.encode_ms);
    decode_filter.push_back(t.decode_ms + t.filter_ms);
    rle_nms.push_back(t.nms_ms + t.rle_ms);
    records.push_back(t.postprocess_ms + t.encode_out_ms);
  }
  const nlohmann::json result = {
      {"bench", "everything"},
      {"model", model_name},
      {"device", device},
      {"dtype", dtype},
      {"width", image.width},
      {"height", image.height},
      {"points_per_side", gen.options().points_per_side.value_or(0)},
      {"gpu_points_per_batch", gen.options().gpu_points_per_batch},
      {"runs", runs},
      {"masks", n_masks},
      {"median_ms",
       {{"total", median_of(total)},
        {"encoder", median_of(encode)},
        {"decoder_and_filters", median_of(decode_filter)},
        {"nms_and_rle", median_of(rle_nms)},
        {"records", median_of(records)}}},
      {"min_total_ms", *std::min_element(total.begin(), total.end())},
      {"total_ms", total}};
  nlohmann::json out = result;
  if (device == "cuda") {
    // One more run with every CUDA operator (and the generator's own kernels) timed by events:
    // device ms per label, the largest first (ops/op_profiler.h).
    ops::profiler::take();
    ops::profiler::set_enabled(true);
    gen.generate(image);
    ops::profiler::set_enabled(false);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& e : ops::profiler::take()) rows.push_back({{"op", e.label}, {"calls", e.calls}, {"ms", e.ms}});
    out["profile_one_run"] = rows;
  }
  std::printf("%s\n", out.dump(2).c_str());
}

nlohmann::json record_json(const MaskRecord& r) {
  nlohmann::json seg;
  const MaskSegmentation& s = r.segmentation;
  if (s.mode == AmgOutputMode::CocoRle)
    seg = {{"size", {s.height, s.width}}, {"counts", s.coco_counts}};
  else if (s.mode == AmgOutputMode::UncompressedRle)
    seg = {{"size", {s.height, s.width}}, {"counts", s.counts}};
  return {{"segmentation", seg},
          {"area", r.area},
          {"bbox", r.bbox},
          {"predicted_iou", r.predicted_iou},
          {"point_coords", {{r.point_coords[0], r.point_coords[1]}}},
          {"stability_score", r.stability_score},
          {"crop_box", r.crop_box}};
}

// The record's mask as row-major bytes, whatever the output mode.
std::vector<uint8_t> record_mask(const MaskRecord& r) {
  const MaskSegmentation& s = r.segmentation;
  switch (s.mode) {
    case AmgOutputMode::BinaryMask: return s.mask;
    case AmgOutputMode::UncompressedRle: return rle_decode(s.counts, s.height, s.width);
    case AmgOutputMode::CocoRle: return rle_decode(rle_from_string(s.coco_counts), s.height, s.width);
  }
  return {};
}

// One line that rewrites itself on a terminal, and plain lines (one per image) otherwise.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(fileno(stderr))) {}
  void update(const std::string& line) {
    if (quiet_ || !tty_) return;
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  }
  void done(const std::string& line) {
    if (quiet_) return;
    std::fprintf(stderr, tty_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
    std::fflush(stderr);
  }

 private:
  bool quiet_, tty_;
};

void run_everything(const EverythingArgs& a) {
  AmgOptions o;
  o.points_per_side = a.points_per_side;
  o.points_per_batch = a.points_per_batch;
  o.gpu_points_per_batch = a.gpu_points_per_batch;
  o.pred_iou_thresh = a.pred_iou_thresh;
  o.stability_score_thresh = a.stability_score_thresh;
  o.stability_score_offset = a.stability_score_offset;
  o.box_nms_thresh = a.box_nms_thresh;
  o.crop_n_layers = a.crop_n_layers;
  o.crop_nms_thresh = a.crop_nms_thresh;
  o.crop_overlap_ratio = a.crop_overlap_ratio;
  o.crop_n_points_downscale_factor = a.crop_n_points_downscale_factor;
  o.min_mask_region_area = a.min_mask_region_area;
  o.output_mode = parse_amg_output_mode(a.output_mode);
  o.validate();  // before the (slow) model load

  VITRT_CHECK(a.checkpoint.empty() != a.random_weights.empty(), InvalidArgument,
              "give exactly one of --checkpoint and --random-weights");
  VITRT_CHECK(a.image.empty() != a.random_image.empty(), InvalidArgument,
              "give exactly one of --image and --random-image");
  VITRT_CHECK(a.bench >= 0, InvalidArgument, "--bench must be >= 0, got ", a.bench);
  VITRT_CHECK(a.bench > 0 || !a.out.empty(), InvalidArgument, "--out is required (except with --bench)");
  VITRT_CHECK(a.bench > 0 || a.random_image.empty(), InvalidArgument, "--random-image is for --bench only");
  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;

  const std::vector<std::string> images = a.image.empty() ? std::vector<std::string>{} : collect_images(a.image);
  StageTimer timer(a.quiet || a.bench > 0);
  std::shared_ptr<const SamModel> model;
  if (!a.random_weights.empty()) {
    const SamConfig cfg = config_by_name(a.random_weights);
    model = timer.run("building " + a.random_weights + " with random weights", [&] {
      std::shared_ptr<const SamModel> m = SamModel::from_state_dict(sam::random_state_dict(cfg, 1234), cfg);
      return device == Device::CUDA ? std::shared_ptr<const SamModel>(m->to(device, dtype, bulk_decoder_dtype(a.decoder_dtype, device, dtype))) : m;
    });
  } else {
    model = timer.run("loading checkpoint " + a.checkpoint,
                      [&] { return load_sam(a.checkpoint, a.config, device, dtype, bulk_decoder_dtype(a.decoder_dtype, device, dtype)); });
  }
  if (!a.quiet && a.bench == 0)
    note("model " + sam_config(*model).name + " (" + sam_fingerprint(*model) + ") on " +
         (device == Device::CUDA ? "cuda " : "cpu ") + dtype_name(dtype) + ", " + std::to_string(images.size()) +
         " image(s)");
  SamAutomaticMaskGenerator gen(model, o);
  if (a.bench > 0) {
    const Image image = a.random_image.empty() ? read_image(images.front()) : synthetic_image(a.random_image);
    run_bench(gen, image, a.bench, device == Device::CUDA ? "cuda" : "cpu", a.dtype,
              a.random_weights.empty() ? sam_config(*model).name : a.random_weights + " (random weights)");
    return;
  }
  fs::create_directories(a.out);

  Progress progress(a.quiet);
  std::set<std::string> used_stems;
  std::vector<std::string> failures;
  int64_t total_masks = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t ii = 0; ii < images.size(); ++ii) {
    const std::string& path = images[ii];
    const std::string tag = "[vitrt] image " + std::to_string(ii + 1) + "/" + std::to_string(images.size()) + " " +
                            fs::path(path).filename().string();
    try {
      gen.set_progress_callback([&](const AmgProgress& p) {
        progress.update(detail::concat(tag, ": crop ", p.crop + 1, "/", p.n_crops, ", points ", p.points_done, "/",
                                       p.points_total, ", ", p.masks_kept, " masks"));
      });
      const auto ti = std::chrono::steady_clock::now();
      Image image = read_image(path);
      std::vector<MaskRecord> records = gen.generate(image);
      const AmgTimings& t = gen.last_timings();

      // Output names: the image's stem, made unique within this run.
      std::string stem = fs::path(path).stem().string();
      for (int k = 2; used_stems.count(stem); ++k) stem = fs::path(path).stem().string() + "_" + std::to_string(k);
      used_stems.insert(stem);
      const fs::path out_dir(a.out);

      nlohmann::json anns = nlohmann::json::array();
      if (o.output_mode == AmgOutputMode::BinaryMask) fs::create_directories(out_dir / (stem + "_masks"));
      for (size_t i = 0; i < records.size(); ++i) {
        nlohmann::json j = record_json(records[i]);
        if (o.output_mode == AmgOutputMode::BinaryMask) {  // masks as PNG files next to the JSON
          const std::string name = detail::concat(stem, "_masks/", i, ".png");
          write_png((out_dir / name).string(),
                    mask_to_image(records[i].segmentation.mask.data(), image.width, image.height));
          j["segmentation"] = {{"size", {image.height, image.width}}, {"png", name}};
        }
        anns.push_back(std::move(j));
      }
      nlohmann::json options = {{"points_per_side", a.points_per_side},
                                {"points_per_batch", a.points_per_batch},
                                {"pred_iou_thresh", a.pred_iou_thresh},
                                {"stability_score_thresh", a.stability_score_thresh},
                                {"stability_score_offset", a.stability_score_offset},
                                {"box_nms_thresh", a.box_nms_thresh},
                                {"crop_n_layers", a.crop_n_layers},
                                {"crop_nms_thresh", a.crop_nms_thresh},
                                {"crop_overlap_ratio", a.crop_overlap_ratio},
                                {"crop_n_points_downscale_factor", a.crop_n_points_downscale_factor},
                                {"min_mask_region_area", a.min_mask_region_area},
                                {"output_mode", a.output_mode}};
      nlohmann::json timings = {{"device", device == Device::CUDA ? "cuda" : "cpu"},
                                {"encode_ms", t.encode_ms},
                                {"decode_ms", t.decode_ms},
                                {"filter_ms", t.filter_ms},
                                {"nms_ms", t.nms_ms},
                                {"rle_ms", t.rle_ms},
                                {"postprocess_ms", t.postprocess_ms},
                                {"records_ms", t.encode_out_ms},
                                {"generate_ms", t.total_ms}};
      nlohmann::json result = {{"image", path},          {"width", image.width},
                               {"height", image.height}, {"model", sam_fingerprint(*model)},
                               {"options", options},     {"timings", timings},
                               {"annotations", anns}};
      std::ofstream((out_dir / (stem + ".json")).string()) << result.dump() << "\n";

      if (!a.no_overlay) {
        // Largest masks first, so that small ones stay visible on top; each in its own colour.
        std::vector<std::vector<uint8_t>> masks;
        std::vector<size_t> order(records.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t x, size_t y) { return records[x].area > records[y].area; });
        for (size_t i : order) masks.push_back(record_mask(records[i]));
        std::vector<const uint8_t*> ptrs;
        for (const auto& m : masks) ptrs.push_back(m.data());
        write_png((out_dir / (stem + "_overlay.png")).string(), overlay_masks(image, ptrs));
      }
      total_masks += static_cast<int64_t>(records.size());
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ti).count();
      // generate() itself split as encoder / decoder + filters / NMS + RLE / records.
      auto f1 = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return std::string(buf);
      };
      progress.done(detail::concat(tag, ": ", records.size(), " masks in ", static_cast<int64_t>(ms),
                                   " ms; generate ", f1(t.total_ms), " ms = encoder ", f1(t.encode_ms),
                                   " + decoder/filters ", f1(t.decode_ms + t.filter_ms), " + nms/rle ",
                                   f1(t.nms_ms + t.rle_ms), " + records ", f1(t.postprocess_ms + t.encode_out_ms),
                                   " -> ", stem, ".json"));
    } catch (const Error& e) {
      // One bad file in a folder of thousands must not stop the rest: report it and go on.
      progress.done(tag + ": error: " + e.what());
      failures.push_back(path + ": " + e.what());
      if (images.size() == 1) throw;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu image(s), %lld masks, %.2f s (%.3f s/image); results in %s\n", images.size() - failures.size(),
              static_cast<long long>(total_masks), secs, secs / std::max<size_t>(1, images.size()), a.out.c_str());
  if (!failures.empty()) {
    std::string msg = detail::concat(failures.size(), " of ", images.size(), " image(s) failed:");
    for (const auto& f : failures) msg += "\n  " + f;
    throw IoError(msg);
  }
}

}  // namespace

void add_everything(CLI::App& app) {
  auto a = std::make_shared<EverythingArgs>();
  CLI::App* c = app.add_subcommand("everything", "Segment everything: SAM's automatic mask generator.");
  c->footer(
      "Prompts a grid of points (and optionally overlapping crops), filters and de-duplicates the masks\n"
      "exactly as segment_anything's SamAutomaticMaskGenerator, with the same defaults.\n"
      "--image takes an image, a directory (every .png/.jpg/.jpeg in it) or a .txt list of paths; images\n"
      "are processed one at a time with the model loaded once. Per image, --out gets <stem>.json (records:\n"
      "segmentation, area, bbox XYWH, predicted_iou, point_coords, stability_score, crop_box; COCO RLE by\n"
      "default) and <stem>_overlay.png (each mask in its own colour). An image that fails is reported and\n"
      "skipped; the exit code is then 1.\n"
      "On cuda the masks are filtered and run-length encoded on the GPU (same results as the CPU path).\n"
      "Example: vitrt everything --checkpoint sam_vit_b_01ec64.pth --image photos/ --out masks/\n"
      "Timing: vitrt everything --random-weights vit_h --device cuda --dtype bf16 --random-image 1500x2250 --bench 10");
  add_sam_model_options(c, a->checkpoint, a->config, /*required=*/false);  // or --random-weights
  c->add_option("--random-weights", a->random_weights,
                "Instead of --checkpoint: vit_b, vit_l or vit_h with random weights (for --bench)");
  c->add_option("--image", a->image, "Image, directory of images, or .txt list of image paths");
  c->add_option("--random-image", a->random_image, "Instead of --image, with --bench: a synthetic WxH image");
  c->add_option("--out", a->out, "Output directory (created if missing)");
  c->add_option("--device", a->device, "auto (cuda if present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kBulkDecoderDtypeHelp);
  c->add_option("--bench", a->bench,
                "Time N runs of the generator on the (first) image after a warm-up; prints JSON, writes nothing")
      ->capture_default_str();
  c->add_option("--points-per-side", a->points_per_side, "Grid points along one side (points_per_side)")
      ->capture_default_str();
  c->add_option("--points-per-batch", a->points_per_batch, "Points decoded per batch")->capture_default_str();
  c->add_option("--gpu-points-per-batch", a->gpu_points_per_batch,
                "On cuda: points per decoder batch (at least --points-per-batch; results do not depend on it)")
      ->capture_default_str();
  c->add_option("--pred-iou-thresh", a->pred_iou_thresh, "Keep masks with predicted IoU above this (0 = off)")
      ->capture_default_str();
  c->add_option("--stability-score-thresh", a->stability_score_thresh,
                "Keep masks with stability score at least this (0 = off)")->capture_default_str();
  c->add_option("--stability-score-offset", a->stability_score_offset, "Logit offset of the stability score")
      ->capture_default_str();
  c->add_option("--box-nms-thresh", a->box_nms_thresh, "Box IoU above which duplicates in a crop are removed")
      ->capture_default_str();
  c->add_option("--crop-n-layers", a->crop_n_layers, "Crop layers (layer i has (2^i)^2 crops)")->capture_default_str();
  c->add_option("--crop-nms-thresh", a->crop_nms_thresh, "Box IoU for duplicates between crops")->capture_default_str();
  c->add_option("--crop-overlap-ratio", a->crop_overlap_ratio, "Overlap of neighbouring crops")->capture_default_str();
  c->add_option("--crop-n-points-downscale-factor", a->crop_n_points_downscale_factor,
                "Points per side in layer i divided by this^i")->capture_default_str();
  c->add_option("--min-mask-region-area", a->min_mask_region_area,
                "Fill holes / remove islands smaller than this many pixels (0 = off)")->capture_default_str();
  c->add_option("--output-mode", a->output_mode, "coco_rle, uncompressed_rle or binary_mask (PNG files)")
      ->capture_default_str();
  c->add_flag("--no-overlay", a->no_overlay, "Do not write the overlay PNGs");
  c->add_flag("-q,--quiet", a->quiet, "No progress or stage timings");
  c->callback([a] { run_everything(*a); });
}

}  // namespace vitrt::cli
