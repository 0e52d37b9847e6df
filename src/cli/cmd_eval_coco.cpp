// `vitrt eval-coco`: segment-anything-fast's accuracy metric (experiments/eval_combo.py with
// data.py and metrics.py) on a COCO instances data set:
//   images = those with at least one annotation of a listed category (COCO.getAnnIds with
//   catIds = every category, iscrowd=None, so crowd annotations count), in the file's order,
//   the first --limit of them; per annotation the mask from pycocotools' annToMask (polygons
//   rasterised and merged, uncompressed or compressed RLE), one foreground point from
//   _get_center_point (centre of mass, or their fallback), multimask prediction, the mask with
//   the highest predicted IoU (first of equals), IoU against the annotation at the original
//   size (int counts, float32 division); mIoU = mean over all annotations.
// img/s counts the model's time (encoder + decoder + IoU) per image, as theirs times the
// encoder and predict_torch; reading images and building annotation masks are outside it.
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
#include "io/rle.h"
#include "models/sam/amg_utils.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt::cli {

namespace {
namespace fs = std::filesystem;

struct EvalArgs {
  std::string checkpoint, config, coco, split = "val2017", dtype = "fp32", json_out;
  int limit = -1;
  bool quiet = false;
};

// pycocotools' COCO.annToRLE for an image of h x w: column-major runs.
std::vector<uint32_t> annotation_rle(const nlohmann::json& ann, int h, int w) {
  const nlohmann::json& segm = ann.at("segmentation");
  const auto id = ann.value("id", nlohmann::json()).dump();
  if (segm.is_array()) {  // polygons, one object in several parts: rasterised, then merged
    VITRT_CHECK(!segm.empty() && segm[0].is_array() && segm[0].size() > 4, InvalidArgument, "annotation ", id,
                ": a polygon needs more than 4 coordinates (pycocotools reads 4 as a box and fails)");
    std::vector<std::vector<uint32_t>> parts;
    for (const auto& poly : segm) parts.push_back(amg::rle_from_polygon(poly.get<std::vector<double>>(), h, w));
    return amg::rle_merge(parts);
  }
  VITRT_CHECK(segm.is_object() && segm.contains("counts") && segm.contains("size"), InvalidArgument, "annotation ",
              id, ": segmentation is neither polygons nor an RLE {size, counts}");
  const auto size = segm["size"].get<std::vector<int>>();
  VITRT_CHECK(size.size() == 2 && size[0] == h && size[1] == w, InvalidArgument, "annotation ", id, ": RLE size [",
              size.size() == 2 ? size[0] : -1, ", ", size.size() == 2 ? size[1] : -1, "] is not the image's [", h,
              ", ", w, "]");
  std::vector<uint32_t> counts = segm["counts"].is_string() ? rle_from_string(segm["counts"].get<std::string>())
                                                              : segm["counts"].get<std::vector<uint32_t>>();
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  VITRT_CHECK(total == static_cast<uint64_t>(h) * w, InvalidArgument, "annotation ", id, ": RLE counts sum to ",
              total, ", not ", h, " x ", w);
  return counts;
}

struct AnnResult {
  int64_t image_id, ann_id, category_id;
  int x, y, best;
  float iou;
};

void run_eval(const EvalArgs& a) {
  VITRT_CHECK(a.dtype == "fp32", InvalidArgument, "the CPU backend computes in fp32 only (got --dtype ", a.dtype, ")");
  const fs::path root(a.coco);
  const fs::path ann_file = root / "annotations" / ("instances_" + a.split + ".json");
  VITRT_CHECK(fs::exists(ann_file), IoError, "no annotation file ", ann_file.string(), " (expected --coco DIR with ",
              "annotations/instances_<split>.json and <split>/<image files>)");
  StageTimer timer(a.quiet);
  nlohmann::json ds = timer.run("reading " + ann_file.string(), [&] {
    std::ifstream in(ann_file);
    VITRT_CHECK(in, IoError, "cannot read ", ann_file.string());
    try {
      return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw IoError(detail::concat(ann_file.string(), " is not valid JSON: ", e.what()));
    }
  });

  // COCO.createIndex / getCatIds / getImgIds / getAnnIds(imgIds, catIds, iscrowd=None).
  std::set<int64_t> cat_ids;
  for (const auto& c : ds.value("categories", nlohmann::json::array())) cat_ids.insert(c.at("id").get<int64_t>());
  std::vector<int64_t> img_order;
  std::map<int64_t, nlohmann::json> imgs;
  for (const auto& im : ds.value("images", nlohmann::json::array())) {
    const int64_t id = im.at("id").get<int64_t>();
    if (!imgs.count(id)) img_order.push_back(id);
    imgs[id] = im;
  }
  std::map<int64_t, std::vector<const nlohmann::json*>> img_anns;
  const nlohmann::json& anns = ds.contains("annotations") ? ds["annotations"] : nlohmann::json::array();
  for (const auto& ann : anns) {
    if (!cat_ids.empty() && !cat_ids.count(ann.at("category_id").get<int64_t>())) continue;
    img_anns[ann.at("image_id").get<int64_t>()].push_back(&ann);
  }
  std::vector<int64_t> eval_ids;
  for (int64_t id : img_order)
    if (img_anns.count(id)) eval_ids.push_back(id);
  if (a.limit >= 0 && static_cast<size_t>(a.limit) < eval_ids.size()) eval_ids.resize(a.limit);
  VITRT_CHECK(!eval_ids.empty(), InvalidArgument, ann_file.string(), " has no image with annotations");

  auto model = timer.run("loading checkpoint " + a.checkpoint, [&] { return load_sam(a.checkpoint, a.config); });
  SamPredictor predictor(model);
  std::vector<AnnResult> results;
  double model_ms = 0;
  const auto t_all = std::chrono::steady_clock::now();
  for (size_t ii = 0; ii < eval_ids.size(); ++ii) {
    const nlohmann::json& info = imgs[eval_ids[ii]];
    const fs::path path = root / a.split / info.at("file_name").get<std::string>();
    Image image = read_image(path.string());
    const int h = info.at("height").get<int>(), w = info.at("width").get<int>();
    VITRT_CHECK(image.height == h && image.width == w, InvalidArgument, path.string(), " is ", image.width, "x",
                image.height, " but the annotations say ", w, "x", h);
    const auto& list = img_anns[eval_ids[ii]];
    std::vector<std::vector<uint8_t>> gt(list.size());
    std::vector<Prompt> prompts(list.size());
    std::vector<std::array<int, 2>> centres(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      gt[k] = rle_decode(annotation_rle(*list[k], h, w), h, w);
      centres[k] = amg::center_point(gt[k].data(), h, w);
      // An empty annotation mask has no centre (their code fails on it): prompt the image centre;
      // its IoU is 0 whatever the prediction.
      if (centres[k][0] < 0) centres[k] = {w / 2, h / 2};
      prompts[k].points.push_back(Point{static_cast<float>(centres[k][0]), static_cast<float>(centres[k][1]), 1});
    }
    const auto t0 = std::chrono::steady_clock::now();
    predictor.set_image(image);
    const std::vector<Prediction> preds = predictor.predict_batch(prompts, /*multimask_output=*/true);
    const size_t plane = static_cast<size_t>(h) * w;
    for (size_t k = 0; k < list.size(); ++k) {
      const Prediction& p = preds[k];
      size_t best = 0;  // torch.argmax: the first of equal maxima
      for (size_t j = 1; j < p.scores.size(); ++j)
        if (p.scores[j] > p.scores[best]) best = j;
      const uint8_t* m = p.masks.data<uint8_t>() + best * plane;
      int64_t inter = 0, uni = 0;
      for (size_t i = 0; i < plane; ++i) {
        inter += m[i] && gt[k][i];
        uni += m[i] || gt[k][i];
      }
      const float iou = static_cast<float>(inter) / static_cast<float>(uni);
      results.push_back({eval_ids[ii], list[k]->at("id").get<int64_t>(), list[k]->at("category_id").get<int64_t>(),
                         centres[k][0], centres[k][1], static_cast<int>(best), iou});
    }
    model_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!a.quiet)
      std::fprintf(stderr, "\r[vitrt] image %zu/%zu, %zu annotations, %.2f img/s ", ii + 1, eval_ids.size(),
                   results.size(), 1000.0 * (ii + 1) / model_ms);
  }
  if (!a.quiet) std::fprintf(stderr, "\n");
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  double sum = 0;
  for (const AnnResult& r : results) sum += r.iou;
  const double miou = sum / results.size();
  const double img_s = 1000.0 * eval_ids.size() / model_ms;

  if (!a.json_out.empty()) {
    nlohmann::json per = nlohmann::json::array();
    for (const AnnResult& r : results)
      per.push_back({{"image_id", r.image_id}, {"ann_id", r.ann_id}, {"category_id", r.category_id},
                     {"center", {r.x, r.y}}, {"best", r.best}, {"iou", r.iou}});
    nlohmann::json out = {{"miou", miou},       {"images", eval_ids.size()}, {"annotations", per},
                          {"img_s", img_s},     {"model_ms", model_ms},      {"wall_s", wall_s},
                          {"checkpoint", a.checkpoint}, {"model", sam_fingerprint(*model)}};
    std::ofstream(a.json_out) << out.dump(1) << "\n";
  }
  std::printf("mIoU %.6f over %zu annotations in %zu images; %.3f img/s (model time), %.1f s wall\n", miou,
              results.size(), eval_ids.size(), img_s, wall_s);
}

}  // namespace

void add_eval_coco(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* c = app.add_subcommand("eval-coco", "COCO accuracy: segment-anything-fast's single-point mIoU metric.");
  c->footer(
      "--coco DIR holds annotations/instances_<split>.json and <split>/<file_name> images (the COCO layout).\n"
      "One point per annotation (its mask's centre of mass, or segment-anything-fast's fallback when that\n"
      "lies outside the mask), three masks per point, the one with the highest predicted IoU compared with\n"
      "the annotation at the original size; prints the mean IoU and images per second.\n"
      "Example: vitrt eval-coco --checkpoint sam_vit_b_01ec64.pth --coco coco2017/ --limit 500");
  add_sam_model_options(c, a->checkpoint, a->config);
  c->add_option("--coco", a->coco, "COCO data set directory")->required();
  c->add_option("--split", a->split, "Split name: annotations/instances_<split>.json, images in <split>/")
      ->capture_default_str();
  c->add_option("--limit", a->limit, "Evaluate only the first N images that have annotations");
  c->add_option("--dtype", a->dtype, "fp32 (bf16 with the CUDA backend)")->capture_default_str();
  c->add_option("--json", a->json_out, "Also write per-annotation results (centre, best mask, IoU) to this file");
  c->add_flag("-q,--quiet", a->quiet, "No progress line");
  c->callback([a] { run_eval(*a); });
}

}  // namespace vitrt::cli
