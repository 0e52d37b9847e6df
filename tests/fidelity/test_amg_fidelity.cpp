// The automatic mask generator against the OFFICIAL SamAutomaticMaskGenerator: every case in
// tests/fixtures/amg/amg_cases.json was written by scripts/make_amg_fixtures.py (output_mode
// coco_rle) with tiny1024 from tests/fixtures/sam and the mask-head patch amg_patch.pth.
// Bars (issue #5): the same number of records; each reference mask matched by a vitrt mask with
// IoU >= 0.95 and the same bbox; identical masks have identical RLE strings. Beyond the bar we
// also expect the same order, scores and prompts, and report how many masks are bit-identical.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "amg_test_util.h"
#include "io/rle.h"
#include "models/sam/sam_model.h"
#include "vitrt/amg.h"

using namespace vitrt;
namespace fs = std::filesystem;

namespace {
const fs::path kFix = fs::path(VITRT_FIXTURES);

using test::amg_model;
const nlohmann::json& cases() { return test::amg_cases(); }
AmgOptions options_from(const nlohmann::json& o) { return test::amg_options_from(o, AmgOutputMode::CocoRle); }

// IoU of two RLEs of the same size by walking both run lists (pycocotools' rleIou).
double rle_iou(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  uint64_t inter = 0, uni = 0;
  size_t ia = 0, ib = 0;
  uint64_t ra = a.empty() ? 0 : a[0], rb = b.empty() ? 0 : b[0];
  bool va = false, vb = false;
  while (ia < a.size() && ib < b.size()) {
    const uint64_t c = std::min(ra, rb);
    if (va || vb) uni += c;
    if (va && vb) inter += c;
    ra -= c;
    rb -= c;
    while (ra == 0 && ++ia < a.size()) ra = a[ia], va = !va;
    while (rb == 0 && ++ib < b.size()) rb = b[ib], vb = !vb;
  }
  return uni == 0 ? 1.0 : static_cast<double>(inter) / uni;
}

class AmgFidelity : public ::testing::TestWithParam<std::string> {};
}  // namespace

TEST(AmgFidelityFixtures, Present) {
  // Without crops and with crop_n_layers 1, each with and without min_mask_region_area.
  bool crops0 = false, crops1 = false, minarea0 = false, minarea1 = false;
  for (const auto& [name, c] : cases().items()) {
    const bool crops = c["options"].value("crop_n_layers", 0) > 0;
    const bool minarea = c["options"].value("min_mask_region_area", 0) > 0;
    crops0 |= !crops;
    crops1 |= crops;
    minarea0 |= !minarea;
    minarea1 |= minarea;
    EXPECT_GE(c["records"].size(), 5u) << name << ": too few records to mean anything";
  }
  EXPECT_TRUE(crops0 && crops1 && minarea0 && minarea1);
}

TEST_P(AmgFidelity, MatchesOfficialGenerator) {
  const nlohmann::json& c = cases()[GetParam()];
  const Image image = read_image((kFix / "sam" / "images" / (c["image"].get<std::string>() + ".png")).string());
  SamAutomaticMaskGenerator gen(amg_model(), options_from(c["options"]));
  const std::vector<MaskRecord> got = gen.generate(image);
  const nlohmann::json& ref = c["records"];
  ASSERT_EQ(got.size(), ref.size()) << "number of records";

  std::vector<std::vector<uint32_t>> got_rle;
  for (const MaskRecord& r : got) {
    EXPECT_EQ(r.segmentation.height, image.height);
    EXPECT_EQ(r.segmentation.width, image.width);
    got_rle.push_back(rle_from_string(r.segmentation.coco_counts));
  }
  int identical = 0, same_position = 0;
  double worst_iou = 1.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const nlohmann::json& rr = ref[i];
    SCOPED_TRACE("reference record " + std::to_string(i));
    EXPECT_EQ(rr["segmentation"]["size"], (nlohmann::json{image.height, image.width}));
    const std::string ref_str = rr["segmentation"]["counts"];
    const std::vector<uint32_t> ref_rle = rle_from_string(ref_str);
    size_t best = 0;
    double best_iou = -1;
    for (size_t j = 0; j < got.size(); ++j) {
      const double iou = rle_iou(ref_rle, got_rle[j]);
      if (iou > best_iou) best_iou = iou, best = j;
    }
    worst_iou = std::min(worst_iou, best_iou);
    const MaskRecord& g = got[best];
    EXPECT_GE(best_iou, 0.95);
    EXPECT_EQ(std::vector<int64_t>(g.bbox.begin(), g.bbox.end()), rr["bbox"].get<std::vector<int64_t>>());
    if (got_rle[best] == ref_rle) {
      ++identical;
      EXPECT_EQ(g.segmentation.coco_counts, ref_str);
      EXPECT_EQ(g.area, rr["area"].get<int64_t>());
    }
    same_position += best == i;
    EXPECT_NEAR(g.predicted_iou, rr["predicted_iou"].get<double>(), 1e-4);
    EXPECT_NEAR(g.stability_score, rr["stability_score"].get<double>(), 2e-3);
    EXPECT_EQ(g.point_coords[0], rr["point_coords"][0].get<double>());
    EXPECT_EQ(g.point_coords[1], rr["point_coords"][1].get<double>());
    EXPECT_EQ(std::vector<int64_t>(g.crop_box.begin(), g.crop_box.end()), rr["crop_box"].get<std::vector<int64_t>>());
  }
  EXPECT_EQ(same_position, static_cast<int>(ref.size())) << "records come in the reference's order";
  std::printf("  %-22s %zu records, %d bit-identical masks, %d in the same position, worst IoU %.5f\n",
              GetParam().c_str(), ref.size(), identical, same_position, worst_iou);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AmgFidelity, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const auto& [name, c] : cases().items()) names.push_back(name);
                           return names;
                         }()));

// The three output modes describe the same masks; the progress callback sees every point.
TEST(AmgOutputModes, AgreeWithEachOther) {
  const Image image = read_image((kFix / "sam" / "images" / "portrait.png").string());
  AmgOptions o;
  o.points_per_side = 6;
  o.pred_iou_thresh = 0.1;
  o.stability_score_thresh = 0.5;
  o.stability_score_offset = 0.1;
  o.box_nms_thresh = 0.95;
  std::vector<std::vector<MaskRecord>> out;
  int64_t last_done = 0, total = 0;
  for (AmgOutputMode mode : {AmgOutputMode::BinaryMask, AmgOutputMode::UncompressedRle, AmgOutputMode::CocoRle}) {
    o.output_mode = mode;
    SamAutomaticMaskGenerator gen(amg_model(), o);
    gen.set_progress_callback([&](const AmgProgress& p) {
      EXPECT_GT(p.points_done, last_done);
      last_done = p.points_done;
      total = p.points_total;
    });
    out.push_back(gen.generate(image));
    EXPECT_EQ(last_done, 36);
    EXPECT_EQ(total, 36);
    last_done = 0;
  }
  ASSERT_FALSE(out[0].empty());
  ASSERT_EQ(out[0].size(), out[1].size());
  ASSERT_EQ(out[0].size(), out[2].size());
  for (size_t i = 0; i < out[0].size(); ++i) {
    const auto& bin = out[0][i].segmentation.mask;
    ASSERT_EQ(bin.size(), static_cast<size_t>(image.width) * image.height);
    const auto counts = rle_counts(bin.data(), image.height, image.width);
    EXPECT_EQ(out[1][i].segmentation.counts, counts);
    EXPECT_EQ(out[2][i].segmentation.coco_counts, rle_to_string(counts));
    EXPECT_EQ(out[0][i].area, static_cast<int64_t>(rle_area(counts)));
    EXPECT_EQ(out[0][i].bbox, out[2][i].bbox);
  }
}
