// Bad options and inputs for the automatic mask generator and its CLI commands: each fails with
// a clear message (the option and the value), never a crash or an empty result.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sam_test_util.h"
#include "vitrt/amg.h"

using namespace vitrt;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const SamModel> model() {
  static std::shared_ptr<const SamModel> m = test::small_model();
  return m;
}

// Constructing the generator with `o` throws InvalidArgument whose message contains `what`.
void expect_rejected(const AmgOptions& o, const std::string& what) {
  try {
    SamAutomaticMaskGenerator gen(model(), o);
    ADD_FAILURE() << "accepted; expected an error about " << what;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

using vitrt::test::CliResult;
using vitrt::test::run_cli;

}  // namespace

TEST(BadAmg, ZeroPointsPerSide) {
  AmgOptions o;
  o.points_per_side = 0;
  expect_rejected(o, "points_per_side must be at least 1, got 0");
  o.points_per_side = -3;
  expect_rejected(o, "points_per_side");
}

TEST(BadAmg, ThresholdsOutsideUnitInterval) {
  const double bad[] = {-0.01, 1.5, std::nan("")};
  for (double v : bad) {
    AmgOptions o;
    o.pred_iou_thresh = v;
    expect_rejected(o, "pred_iou_thresh must be in [0, 1]");
    o = AmgOptions{};
    o.stability_score_thresh = v;
    expect_rejected(o, "stability_score_thresh must be in [0, 1]");
    o = AmgOptions{};
    o.box_nms_thresh = v;
    expect_rejected(o, "box_nms_thresh must be in [0, 1]");
    o = AmgOptions{};
    o.crop_nms_thresh = v;
    expect_rejected(o, "crop_nms_thresh must be in [0, 1]");
  }
  AmgOptions o;
  o.crop_overlap_ratio = 1.0;
  expect_rejected(o, "crop_overlap_ratio");
  o = AmgOptions{};
  o.stability_score_offset = -1;
  expect_rejected(o, "stability_score_offset");
  // The bounds themselves are fine (0 switches a filter off).
  o = AmgOptions{};
  o.pred_iou_thresh = 0;
  o.stability_score_thresh = 1;
  EXPECT_NO_THROW(SamAutomaticMaskGenerator(model(), o));
}

TEST(BadAmg, OtherOptions) {
  AmgOptions o;
  o.points_per_batch = 0;
  expect_rejected(o, "points_per_batch");
  o = AmgOptions{};
  o.crop_n_layers = -1;
  expect_rejected(o, "crop_n_layers");
  o = AmgOptions{};
  o.crop_n_points_downscale_factor = 0;
  expect_rejected(o, "crop_n_points_downscale_factor");
  o = AmgOptions{};
  o.min_mask_region_area = -5;
  expect_rejected(o, "min_mask_region_area");
  o = AmgOptions{};
  o.points_per_side = 3;
  o.crop_n_layers = 2;
  o.crop_n_points_downscale_factor = 2;  // layer 2: int(3 / 4) = 0 points
  expect_rejected(o, "0 points per side");
}

TEST(BadAmg, PointGrids) {
  AmgOptions o;
  o.point_grids = {{{0.5, 0.5}}};  // and points_per_side still set
  expect_rejected(o, "exactly one of points_per_side and point_grids");
  o.points_per_side.reset();
  o.point_grids.clear();
  expect_rejected(o, "exactly one of points_per_side and point_grids");
  o.point_grids = {{{0.5, 1.5}}};
  expect_rejected(o, "outside [0, 1]");
  o.point_grids = {{{0.5, 0.5}}};
  o.crop_n_layers = 1;
  expect_rejected(o, "needs one per layer");
  o.point_grids = {{{0.5, 0.5}}, {}};
  expect_rejected(o, "point grid 1 is empty");
  o.point_grids = {{{0.25, 0.25}, {0.75, 0.5}}, {{0.5, 0.5}}};  // valid explicit grids
  EXPECT_NO_THROW(SamAutomaticMaskGenerator(model(), o).generate(test::random_image(40, 30)));
}

TEST(BadAmg, EmptyImage) {
  SamAutomaticMaskGenerator gen(model(), AmgOptions{});
  Image empty;
  try {
    gen.generate(empty);
    ADD_FAILURE() << "an empty image was accepted";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("empty image"), std::string::npos) << e.what();
  }
  Image bad = test::random_image(8, 8);
  bad.pixels.resize(10);  // inconsistent buffer
  EXPECT_THROW(gen.generate(bad), ImageError);
}

TEST(BadAmg, OutputModeNames) {
  EXPECT_EQ(parse_amg_output_mode("coco_rle"), AmgOutputMode::CocoRle);
  EXPECT_THROW(parse_amg_output_mode("rle"), InvalidArgument);
}

TEST(BadAmg, CliReportsBadOptionsAndInputs) {
  const std::string model = std::string(VITRT_FIXTURES) + "/sam/tiny1024.pth";
  const std::string config = std::string(VITRT_FIXTURES) + "/sam/tiny1024.json";
  const std::string image = std::string(VITRT_FIXTURES) + "/sam/images/tiny.png";
  const fs::path out = fs::path(VITRT_TEST_TMP) / "bad_amg_cli";
  fs::remove_all(out);
  const std::string base = "everything --checkpoint " + model + " --config " + config + " --out " + out.string();

  CliResult r = run_cli(base + " --image " + image + " --points-per-side 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("points_per_side must be at least 1"), std::string::npos) << r.out;

  r = run_cli(base + " --image " + image + " --pred-iou-thresh 1.2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("pred_iou_thresh must be in [0, 1]"), std::string::npos) << r.out;

  r = run_cli(base + " --image " + image + " --output-mode polygons");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("output mode"), std::string::npos) << r.out;

  // A zero-byte "image": a clear decoding error naming the file.
  fs::create_directories(out);
  const fs::path empty = out / "empty.png";
  std::ofstream(empty).close();
  r = run_cli(base + " --image " + empty.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("empty.png"), std::string::npos) << r.out;

  // A list file naming a missing image.
  const fs::path list = out / "list.txt";
  std::ofstream(list) << image << "\n" << (out / "missing.png").string() << "\n";
  r = run_cli(base + " --image " + list.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing.png"), std::string::npos) << r.out;

  // eval-coco without a data set.
  r = run_cli("eval-coco --checkpoint " + model + " --config " + config + " --coco " + (out / "nope").string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
}
