// `vitrt everything`: SAM's automatic mask generator over one image, a directory of images or a
// list file, streamed one image at a time with the model loaded once. Per image it writes the
// records as JSON (the reference's record fields; COCO RLE by default) and an overlay PNG.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/overlay.h"
#include "io/rle.h"
#include "vitrt/amg.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt::cli {

namespace {
namespace fs = std::filesystem;

struct EverythingArgs {
  std::string checkpoint, config, image, out, output_mode = "coco_rle";
  int points_per_side = 32, points_per_batch = 64, crop_n_layers = 0, crop_n_points_downscale_factor = 1;
  int min_mask_region_area = 0;
  double pred_iou_thresh = 0.88, stability_score_thresh = 0.95, stability_score_offset = 1.0;
  double box_nms_thresh = 0.7, crop_nms_thresh = 0.7, crop_overlap_ratio = 512.0 / 1500.0;
  bool no_overlay = false, quiet = false;
};

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// IMG, DIR (its PNG/JPEG files, sorted) or LIST.txt (one path per line; relative paths are taken
// relative to the list's folder; blank lines and lines starting with # are skipped).
std::vector<std::string> collect_images(const std::string& arg) {
  const fs::path p(arg);
  VITRT_CHECK(fs::exists(p), IoError, "--image '", arg, "' does not exist");
  std::vector<std::string> out;
  if (fs::is_directory(p)) {
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file() && is_image_name(e.path())) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    VITRT_CHECK(!out.empty(), InvalidArgument, "directory '", arg, "' holds no .png/.jpg/.jpeg images");
    return out;
  }
  if (p.extension() == ".txt") {
    std::ifstream in(p);
    VITRT_CHECK(in, IoError, "cannot read image list '", arg, "'");
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      fs::path q(line);
      if (q.is_relative()) q = p.parent_path() / q;
      out.push_back(q.string());
    }
    VITRT_CHECK(!out.empty(), InvalidArgument, "image list '", arg, "' names no images");
    return out;
  }
  return {arg};
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

  const std::vector<std::string> images = collect_images(a.image);
  StageTimer timer(a.quiet);
  auto model = timer.run("loading checkpoint " + a.checkpoint, [&] { return load_sam(a.checkpoint, a.config); });
  if (!a.quiet) note("model " + sam_config(*model).name + " (" + sam_fingerprint(*model) + "), " +
                     std::to_string(images.size()) + " image(s)");
  SamAutomaticMaskGenerator gen(model, o);
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
      nlohmann::json timings = {{"encode_ms", t.encode_ms},   {"decode_ms", t.decode_ms},
                                {"filter_ms", t.filter_ms},   {"nms_ms", t.nms_ms},
                                {"postprocess_ms", t.postprocess_ms}, {"records_ms", t.encode_out_ms},
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
      progress.done(detail::concat(tag, ": ", records.size(), " masks in ", static_cast<int64_t>(ms), " ms (encode ",
                                   static_cast<int64_t>(t.encode_ms), ", decode ", static_cast<int64_t>(t.decode_ms),
                                   ", filter ", static_cast<int64_t>(t.filter_ms), ") -> ", stem, ".json"));
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
      "Example: vitrt everything --checkpoint sam_vit_b_01ec64.pth --image photos/ --out masks/");
  c->add_option("--checkpoint", a->checkpoint, "SAM checkpoint: official .pth or Hugging Face .safetensors")
      ->required()->check(CLI::ExistingFile);
  c->add_option("--config", a->config, "JSON with settings for non-standard model sizes");
  c->add_option("--image", a->image, "Image, directory of images, or .txt list of image paths")->required();
  c->add_option("--out", a->out, "Output directory (created if missing)")->required();
  c->add_option("--points-per-side", a->points_per_side, "Grid points along one side (points_per_side)")
      ->capture_default_str();
  c->add_option("--points-per-batch", a->points_per_batch, "Points decoded per batch")->capture_default_str();
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
