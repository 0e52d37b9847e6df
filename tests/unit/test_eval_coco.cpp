// `vitrt eval-coco`, run as a user runs it:
//  * on a small COCO-format data set this test makes itself (random images, rectangle polygons,
//    compressed and uncompressed RLE, a crowd annotation, an image without annotations, an
//    unknown category), against the metric recomputed here through SamPredictor;
//  * on the fixture data set (tests/fixtures/amg/coco, images from tests/fixtures/sam/images)
//    against segment-anything-fast's metric run with the official predictor
//    (tests/fixtures/amg/coco_expected.json, from scripts/make_amg_fixtures.py).
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/rle.h"
#include "sam_test_util.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace fs = std::filesystem;
using namespace vitrt;

namespace {
const fs::path kFix = fs::path(VITRT_FIXTURES);
const std::string kModel = (kFix / "sam" / "tiny1024.pth").string();
const std::string kConfig = (kFix / "sam" / "tiny1024.json").string();

using vitrt::test::CliResult;
using vitrt::test::run_cli;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

struct Rect {
  int x0, y0, x1, y1;  // pixels [x0, x1) x [y0, y1)
};
std::vector<uint8_t> rect_mask(const Rect& r, int h, int w) {
  std::vector<uint8_t> m(static_cast<size_t>(h) * w, 0);
  for (int y = r.y0; y < r.y1; ++y)
    for (int x = r.x0; x < r.x1; ++x) m[static_cast<size_t>(y) * w + x] = 1;
  return m;
}
// Round half to even, as NumPy's round.
int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }
}  // namespace

TEST(EvalCoco, SelfMadeDatasetMatchesMetricRecomputedHere) {
  const fs::path root = fs::path(VITRT_TEST_TMP) / "eval_coco_self";
  fs::remove_all(root);
  fs::create_directories(root / "annotations");
  fs::create_directories(root / "mini");
  struct Img {
    int id, w, h;
    std::string file;
  };
  const std::vector<Img> images = {{4, 96, 64, "a.png"}, {9, 50, 70, "b.png"}, {2, 40, 30, "c.png"}, {11, 64, 48, "d.png"}};
  for (size_t i = 0; i < images.size(); ++i)
    write_png((root / "mini" / images[i].file).string(), test::random_image(images[i].w, images[i].h, 40 + i));

  // Annotations per image: rectangles given as polygons, as compressed RLE and as uncompressed
  // RLE (crowd). Integer rectangle polygons rasterise to exactly [x0, x1) x [y0, y1).
  struct Ann {
    int id, image_id, category;
    Rect r;
    int form;  // 0 polygon, 1 compressed RLE, 2 uncompressed RLE (crowd)
  };
  const std::vector<Ann> anns = {{1, 4, 1, {10, 5, 40, 30}, 0},  {2, 4, 2, {50, 20, 90, 60}, 1},
                                 {3, 9, 1, {5, 10, 45, 30}, 2},   {4, 9, 2, {20, 35, 30, 69}, 0},
                                 {5, 4, 77, {0, 0, 10, 10}, 0},    // unknown category: not evaluated
                                 {6, 11, 1, {8, 8, 56, 40}, 0}};  // 4th image: beyond --limit 2
  nlohmann::json ds;
  for (const Img& im : images)
    ds["images"].push_back({{"id", im.id}, {"file_name", im.file}, {"width", im.w}, {"height", im.h}});
  ds["categories"] = {{{"id", 1}, {"name", "box"}, {"supercategory", "shape"}},
                      {{"id", 2}, {"name", "bar"}, {"supercategory", "shape"}}};
  ds["annotations"] = nlohmann::json::array();
  for (const Ann& a : anns) {
    const Img& im = *std::find_if(images.begin(), images.end(), [&](const Img& i) { return i.id == a.image_id; });
    nlohmann::json segm;
    const auto counts = rle_counts(rect_mask(a.r, im.h, im.w).data(), im.h, im.w);
    if (a.form == 0)
      segm = {{a.r.x0, a.r.y0, a.r.x1, a.r.y0, a.r.x1, a.r.y1, a.r.x0, a.r.y1}};
    else if (a.form == 1)
      segm = {{"size", {im.h, im.w}}, {"counts", rle_to_string(counts)}};
    else
      segm = {{"size", {im.h, im.w}}, {"counts", counts}};
    ds["annotations"].push_back({{"id", a.id}, {"image_id", a.image_id}, {"category_id", a.category},
                                 {"segmentation", segm}, {"iscrowd", a.form == 2 ? 1 : 0}});
  }
  std::ofstream(root / "annotations" / "instances_mini.json") << ds.dump();

  const fs::path out = root / "result.json";
  const CliResult r = run_cli("eval-coco --checkpoint " + kModel + " --config " + kConfig + " --coco " + root.string() +
                        " --split mini --limit 2 --json " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("mIoU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("img/s"), std::string::npos) << r.out;
  const nlohmann::json got = read_json(out);
  EXPECT_EQ(got["images"], 2);  // c.png has no annotations; d.png is past --limit 2

  // The metric recomputed: image order a (id 4), b (id 9); annotations in file order.
  SamPredictor predictor(load_sam(kModel, kConfig));
  std::vector<double> ious;
  size_t k = 0;
  for (int image_id : {4, 9}) {
    const Img& im = *std::find_if(images.begin(), images.end(), [&](const Img& i) { return i.id == image_id; });
    predictor.set_image(read_image((root / "mini" / im.file).string()));
    for (const Ann& a : anns) {
      if (a.image_id != image_id || a.category == 77) continue;
      SCOPED_TRACE("annotation " + std::to_string(a.id));
      // Centre of mass of [x0, x1) x [y0, y1): the rectangle's middle, rounded half to even.
      const int cx = round_even((a.r.x0 + a.r.x1 - 1) / 2.0), cy = round_even((a.r.y0 + a.r.y1 - 1) / 2.0);
      Prompt p;
      p.points.push_back({static_cast<float>(cx), static_cast<float>(cy), 1});
      const Prediction pred = predictor.predict(p, true);
      size_t best = 0;
      for (size_t j = 1; j < pred.scores.size(); ++j)
        if (pred.scores[j] > pred.scores[best]) best = j;
      const auto gt = rect_mask(a.r, im.h, im.w);
      const uint8_t* m = pred.masks.data<uint8_t>() + best * gt.size();
      int64_t inter = 0, uni = 0;
      for (size_t i = 0; i < gt.size(); ++i) inter += m[i] && gt[i], uni += m[i] || gt[i];
      const float iou = static_cast<float>(inter) / static_cast<float>(uni);
      ASSERT_LT(k, got["annotations"].size());
      const auto& g = got["annotations"][k++];
      EXPECT_EQ(g["ann_id"], a.id);
      EXPECT_EQ(g["center"], (nlohmann::json{cx, cy}));
      EXPECT_EQ(g["best"], static_cast<int>(best));
      EXPECT_FLOAT_EQ(g["iou"].get<float>(), iou);
      ious.push_back(iou);
    }
  }
  EXPECT_EQ(k, got["annotations"].size());
  double mean = 0;
  for (double v : ious) mean += v;
  mean /= ious.size();
  EXPECT_NEAR(got["miou"].get<double>(), mean, 1e-12);
}

TEST(EvalCoco, MatchesSegmentAnythingFastOnFixture) {
  const fs::path root = fs::path(VITRT_TEST_TMP) / "eval_coco_fixture";
  fs::remove_all(root);
  fs::create_directories(root / "annotations");
  fs::create_directories(root / "val");
  fs::copy_file(kFix / "amg" / "coco" / "annotations" / "instances_val.json",
                root / "annotations" / "instances_val.json");
  const nlohmann::json ds = read_json(root / "annotations" / "instances_val.json");
  for (const auto& im : ds["images"]) {
    const std::string f = im["file_name"];
    fs::copy_file(kFix / "sam" / "images" / f, root / "val" / f);
  }
  const fs::path out = root / "result.json";
  const CliResult r = run_cli("eval-coco -q --checkpoint " + kModel + " --config " + kConfig + " --coco " + root.string() +
                        " --split val --json " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json got = read_json(out);
  const nlohmann::json want = read_json(kFix / "amg" / "coco_expected.json");
  EXPECT_EQ(got["images"], want["images"]);
  ASSERT_EQ(got["annotations"].size(), want["annotations"].size());
  for (size_t i = 0; i < want["annotations"].size(); ++i) {
    const auto& g = got["annotations"][i];
    const auto& w = want["annotations"][i];
    SCOPED_TRACE("annotation " + w["ann_id"].dump());
    EXPECT_EQ(g["ann_id"], w["ann_id"]);
    EXPECT_EQ(g["center"], w["center"]);  // incl. the fallback for the "C" shape
    EXPECT_EQ(g["best"], w["best"]);
    EXPECT_NEAR(g["iou"].get<double>(), w["iou"].get<double>(), 1e-4);
  }
  EXPECT_NEAR(got["miou"].get<double>(), want["miou"].get<double>(), 1e-4);
}

TEST(EvalCoco, HelpNamesTheOptions) {
  const CliResult r = run_cli("eval-coco --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--checkpoint", "--coco", "--limit", "--dtype", "--split"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  const CliResult bad = run_cli("eval-coco --checkpoint " + kModel + " --config " + kConfig + " --coco . --dtype bf16");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("fp32"), std::string::npos) << bad.out;
}
