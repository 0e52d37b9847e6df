// The pure functions of the automatic mask generator and of eval-coco against values the
// reference computes (tests/fixtures/amg/units.{pth,json}, from scripts/make_amg_fixtures.py:
// segment_anything.utils.amg, torchvision batched_nms, OpenCV, pycocotools, and
// segment-anything-fast's _get_center_point), plus the exactness of the fused mask upscaling
// against the predictor's own two-resize path.
#include <gtest/gtest.h>

#include <cmath>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/rle.h"
#include "models/sam/amg_utils.h"
#include "models/sam/automatic_mask_generator.h"
#include "sam_test_util.h"
#include "ops/ops.h"
#include "vitrt/checkpoint.h"
#include "vitrt/error.h"

namespace vitrt {
namespace {

using namespace amg;

const StateDict& units() {
  static const StateDict sd = load_state_dict(std::string(VITRT_FIXTURES) + "/amg/units.pth");
  return sd;
}
const nlohmann::json& units_json() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(VITRT_FIXTURES) + "/amg/units.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}
const Tensor& T(const std::string& key) {
  auto it = units().find(key);
  if (it == units().end()) throw std::runtime_error("fixture tensor missing: " + key);
  return it->second;
}
std::vector<uint8_t> bytes(const Tensor& t, int64_t offset, int64_t n) {
  const uint8_t* p = t.data<uint8_t>() + offset;
  return std::vector<uint8_t>(p, p + n);
}

TEST(AmgUtils, PointGridsMatchReference) {
  const auto& cases = units_json()["grids"];
  ASSERT_GE(cases.size(), 5u);
  for (size_t gi = 0; gi < cases.size(); ++gi) {
    const auto& c = cases[gi];
    const auto grids = build_all_layer_point_grids(c["n"], c["layers"], c["scale"]);
    ASSERT_EQ(grids.size(), c["count"].get<size_t>());
    for (size_t li = 0; li < grids.size(); ++li) {
      const Tensor& ref = T("grid" + std::to_string(gi) + "." + std::to_string(li));
      ASSERT_EQ(static_cast<int64_t>(grids[li].size()), ref.size(0)) << gi << "/" << li;
      for (size_t i = 0; i < grids[li].size(); ++i)
        for (int k = 0; k < 2; ++k)  // bit-exact float64
          ASSERT_EQ(grids[li][i][k], ref.data<double>()[i * 2 + k]) << gi << "/" << li << " point " << i;
    }
  }
}

TEST(AmgUtils, CropBoxesMatchReference) {
  const auto& cases = units_json()["crops"];
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const auto& c = cases[ci];
    const auto boxes = generate_crop_boxes(c["h"], c["w"], c["layers"], c["ratio"]);
    const Tensor& ref = T("crops" + std::to_string(ci));
    ASSERT_EQ(static_cast<int64_t>(boxes.size()), ref.size(0)) << ci;
    for (size_t i = 0; i < boxes.size(); ++i) {
      const int64_t* r = ref.data<int64_t>() + i * 5;
      EXPECT_EQ((std::array<int64_t, 5>{boxes[i].x0, boxes[i].y0, boxes[i].x1, boxes[i].y1, boxes[i].layer}),
                (std::array<int64_t, 5>{r[0], r[1], r[2], r[3], r[4]}))
          << "case " << ci << " box " << i;
    }
  }
}

TEST(AmgUtils, StabilityScoreMatchesReference) {
  const Tensor& logits = T("stab.logits");
  const int64_t n = logits.size(0), h = logits.size(1), w = logits.size(2);
  for (double off : {1.0, 0.3}) {
    const Tensor& ref = T(off == 1.0 ? "stab.1.0" : "stab.0.3");
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(calculate_stability_score(logits.data<float>() + i * h * w, h, w, 0.0, off), ref.data<float>()[i])
          << "offset " << off << " mask " << i;
  }
  EXPECT_TRUE(std::isnan(stability_score(0, 0)));  // empty at the low threshold: 0 / 0
}

TEST(AmgUtils, BatchedNmsMatchesTorchvision) {
  for (const char* tag : {"small", "large"}) {  // "large" takes torchvision's per-class path
    const Tensor& bt = T(std::string("nms.") + tag + ".boxes");
    const Tensor& st = T(std::string("nms.") + tag + ".scores");
    const int64_t n = bt.size(0);
    std::vector<BoxF> boxes(n);
    std::vector<float> scores(st.data<float>(), st.data<float>() + n);
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < 4; ++k) boxes[i][k] = bt.data<float>()[i * 4 + k];
    for (const char* thr : {"0.7", "0.3"}) {
      const Tensor& ref = T(std::string("nms.") + tag + ".keep" + thr);
      const std::vector<int64_t> want(ref.data<int64_t>(), ref.data<int64_t>() + ref.numel());
      const auto got = batched_nms(boxes, scores, std::stod(thr));
      EXPECT_EQ(got, want) << tag << " at " << thr;
      if (std::string(tag) == "large") {  // the kept set never depends on the tie order
        auto a = got, b = want;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b);
      }
    }
  }
}

TEST(AmgUtils, NmsKeepsFirstOfTiesAndSuppressesAboveThreshold) {
  // Equal scores: the earlier box wins (stable sort). IoU exactly at the threshold survives.
  const std::vector<BoxF> boxes = {{0, 0, 10, 10}, {0, 0, 10, 10}, {0, 0, 10, 5}, {20, 20, 30, 30}};
  EXPECT_EQ(nms(boxes, {0.5f, 0.5f, 0.9f, 0.1f}, 0.5), (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(nms(boxes, {0.5f, 0.5f, 0.4f, 0.1f}, 0.49), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(nms({}, {}, 0.7).empty());
}

TEST(AmgUtils, RemoveSmallRegionsMatchesOpenCv) {
  const Tensor& masks = T("regions.masks");
  const int64_t n = masks.size(0), h = masks.size(1), w = masks.size(2);
  for (int area : {3, 30, 400})
    for (const char* mode : {"holes", "islands"}) {
      const std::string key = std::string("regions.") + mode + "." + std::to_string(area);
      const Tensor& ref = T(key);
      const Tensor& changed = T(key + ".changed");
      for (int64_t i = 0; i < n; ++i) {
        std::vector<uint8_t> m = bytes(masks, i * h * w, h * w);
        const bool ch = remove_small_regions(m, h, w, area,
                                             std::string(mode) == "holes" ? RegionMode::Holes : RegionMode::Islands);
        EXPECT_EQ(ch, changed.data<int64_t>()[i] != 0) << key << " mask " << i;
        EXPECT_EQ(m, bytes(ref, i * h * w, h * w)) << key << " mask " << i;
      }
    }
  const Tensor& tiny = T("regions.tiny");
  std::vector<uint8_t> m = bytes(tiny, 0, tiny.numel());
  EXPECT_TRUE(remove_small_regions(m, tiny.size(0), tiny.size(1), 10, RegionMode::Islands));
  EXPECT_EQ(m, bytes(T("regions.tiny.islands"), 0, tiny.numel()));  // only the largest island stays
}

TEST(AmgUtils, ConnectedComponentsUseEightConnectivity) {
  const uint8_t m[] = {1, 0, 0, 1,  //
                       0, 1, 0, 1,  //
                       0, 0, 0, 0,  //
                       1, 1, 0, 1};
  std::vector<int32_t> labels;
  std::vector<int64_t> sizes;
  EXPECT_EQ(connected_components8(m, 4, 4, labels, sizes), 5);  // background + 4
  EXPECT_EQ(labels[0], labels[5]);  // diagonal neighbours join
  EXPECT_EQ(sizes, (std::vector<int64_t>{9, 2, 2, 2, 1}));
}

TEST(AmgUtils, RleStringsMatchReference) {
  const Tensor& masks = T("rle.masks");
  const int h = static_cast<int>(masks.size(1)), w = static_cast<int>(masks.size(2));
  const auto& ref = units_json()["rle"];
  ASSERT_EQ(static_cast<int64_t>(ref.size()), masks.size(0));
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::vector<uint8_t> m = bytes(masks, i * h * w, h * w);
    const auto counts = rle_counts(m.data(), h, w);
    EXPECT_EQ(counts, ref[i]["counts"].get<std::vector<uint32_t>>()) << i;
    EXPECT_EQ(rle_to_string(counts), ref[i]["coco"].get<std::string>()) << i;
    // Round trips: string -> counts -> mask.
    EXPECT_EQ(rle_from_string(ref[i]["coco"].get<std::string>()), counts);
    EXPECT_EQ(rle_decode(counts, h, w), m);
  }
}

TEST(AmgUtils, UncroppedRleEqualsRleOfPaddedMask) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const int H = 5 + rng() % 30, W = 5 + rng() % 30;
    const int h = 1 + rng() % H, w = 1 + rng() % W;
    const int y0 = rng() % (H - h + 1), x0 = rng() % (W - w + 1);
    std::vector<uint8_t> crop(static_cast<size_t>(h) * w), full(static_cast<size_t>(H) * W, 0);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) full[(y + y0) * W + x + x0] = crop[y * w + x] = (rng() % 3 == 0) || trial == 0;
    EXPECT_EQ(rle_counts_uncropped(crop.data(), h, w, x0, y0, H, W), rle_counts(full.data(), H, W)) << trial;
  }
}

TEST(AmgUtils, BoxNearCropEdge) {
  const CropBox crop{100, 50, 300, 250, 1};
  // Box in crop coordinates; uncropped [100+x0, 50+y0, ...]. Near the crop's left edge (x0 = 0).
  EXPECT_TRUE(is_box_near_crop_edge({0, 60, 50, 100}, crop, 400, 300));
  EXPECT_TRUE(is_box_near_crop_edge({20, 60, 50, 100}, crop, 400, 300));   // |120 - 100| = 20 <= atol
  EXPECT_FALSE(is_box_near_crop_edge({21, 60, 50, 100}, crop, 400, 300));
  // A crop edge that is also the image edge does not count.
  const CropBox corner{0, 0, 200, 150, 1};
  EXPECT_FALSE(is_box_near_crop_edge({0, 0, 50, 50}, corner, 400, 300));
  EXPECT_TRUE(is_box_near_crop_edge({0, 0, 190, 50}, corner, 400, 300));  // right edge 190 vs 200
  const CropBox whole{0, 0, 400, 300, 0};
  EXPECT_FALSE(is_box_near_crop_edge({0, 0, 399, 299}, whole, 400, 300));
}

TEST(AmgUtils, MaskToBox) {
  const uint8_t m[] = {0, 0, 0, 0,  //
                       0, 1, 0, 0,  //
                       0, 0, 1, 0};
  EXPECT_EQ(mask_to_box(m, 3, 4), (std::array<int64_t, 4>{1, 1, 2, 2}));
  const uint8_t z[6] = {};
  EXPECT_EQ(mask_to_box(z, 2, 3), (std::array<int64_t, 4>{0, 0, 0, 0}));
}

// The fused upscaler must give the predictor's logits bit for bit (Sam.postprocess_masks).
TEST(AmgUtils, LogitUpscalerIsBitExact) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  struct Size {
    int m, S, ih, iw, H, W;
  };
  for (const Size& s : {Size{64, 256, 144, 256, 360, 640},   // upscale (input smaller than the image)
                        Size{64, 256, 256, 154, 500, 300},   // portrait
                        Size{32, 128, 128, 96, 61, 45},      // downscale
                        Size{16, 64, 64, 64, 64, 64},        // identity second resize
                        Size{256, 1024, 576, 1024, 720, 1280}}) {
    std::vector<float> low(static_cast<size_t>(s.m) * s.m);
    for (float& v : low) v = nd(rng);
    // Reference path: exactly what predictor.cpp does.
    Tensor full = ops::resize_bilinear(Tensor::from_vector(low, {1, s.m, s.m}), s.S, s.S);
    Tensor crop = Tensor::empty({1, s.ih, s.iw});
    for (int y = 0; y < s.ih; ++y)
      std::copy(full.data<float>() + static_cast<int64_t>(y) * s.S, full.data<float>() + static_cast<int64_t>(y) * s.S + s.iw,
                crop.data<float>() + static_cast<int64_t>(y) * s.iw);
    Tensor want = ops::resize_bilinear(crop, s.H, s.W);
    LogitUpscaler up(s.m, s.S, s.ih, s.iw, s.H, s.W);
    LogitUpscaler::Scratch scratch;
    std::vector<float> got(static_cast<size_t>(s.H) * s.W);
    up.run_plane(low.data(), scratch, got.data());
    int64_t diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += std::memcmp(&got[i], want.data<float>() + i, 4) != 0;
    EXPECT_EQ(diff, 0) << s.m << " " << s.S << " " << s.ih << "x" << s.iw << " -> " << s.H << "x" << s.W;
  }
}

TEST(AmgUtils, PolygonsMatchPycocotools) {
  for (const auto& c : units_json()["polygons"]) {
    const int h = c["h"], w = c["w"];
    std::vector<std::vector<uint32_t>> parts;
    for (size_t p = 0; p < c["segmentation"].size(); ++p) {
      parts.push_back(rle_from_polygon(c["segmentation"][p].get<std::vector<double>>(), h, w));
      EXPECT_EQ(rle_to_string(parts.back()), c["parts"][p].get<std::string>()) << c["segmentation"][p].dump();
    }
    EXPECT_EQ(rle_to_string(rle_merge(parts)), c["counts"].get<std::string>()) << c["segmentation"].dump();
  }
  for (const auto& c : units_json()["bboxes"]) {
    const auto b = c["bbox"].get<std::vector<double>>();
    EXPECT_EQ(rle_to_string(rle_from_bbox({b[0], b[1], b[2], b[3]}, c["h"], c["w"])), c["counts"].get<std::string>());
  }
}

TEST(AmgUtils, CentrePointsMatchSegmentAnythingFast) {
  const auto& want = units_json()["centres"];
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& m = T("centre" + std::to_string(i));
    const auto p = center_point(m.data<uint8_t>(), m.size(0), m.size(1));
    EXPECT_EQ((std::vector<int>{p[0], p[1]}), want[i].get<std::vector<int>>()) << "mask " << i;
  }
  const uint8_t empty[4] = {};
  EXPECT_EQ(center_point(empty, 2, 2), (std::array<int, 2>{-1, -1}));
}

TEST(AmgUtils, BadGridSizesAreRejected) {
  EXPECT_THROW(build_point_grid(0), InvalidArgument);
  EXPECT_THROW(build_all_layer_point_grids(3, 2, 2), InvalidArgument);  // layer 2: int(3 / 4) = 0
}

// The GPU path feeds the decoder one shared dense embedding, repeated over the batch on the
// device, instead of a [B, g*g, out] host tensor. On the CPU both must give the same bits, for
// batch sizes that are and are not powers of two (the repeat doubles, then tops up).
TEST(AmgUtils, DecoderWithSharedDenseEqualsBroadcastDense) {
  const auto model = test::small_model();
  const SamConfig& c = model->config;
  const int64_t D = c.out_chans, HW = static_cast<int64_t>(c.grid_size()) * c.grid_size();
  Tensor features = Tensor::empty({1, D, c.grid_size(), c.grid_size()});
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < features.numel(); ++i) features.data<float>()[i] = nd(rng);
  for (int n : {1, 4, 5, 11}) {
    std::vector<GridPoint> pts;
    for (int i = 0; i < n; ++i) pts.push_back({5.0 + 9 * i, 100.0 - 7 * i});
    const Tensor sparse = point_sparse_tokens(*model, 96, 128, 60, 80, pts);
    ASSERT_EQ(sparse.shape(), (Shape{n, 2, D}));
    Tensor dense_one = Tensor::empty({HW, D}), dense = Tensor::empty({n, HW, D});
    const float* nm = model->prompt_encoder.no_mask.data<float>();
    for (int64_t i = 0; i < HW; ++i) std::memcpy(dense_one.data<float>() + i * D, nm, sizeof(float) * D);
    for (int64_t b = 0; b < n; ++b)
      std::memcpy(dense.data<float>() + b * HW * D, dense_one.raw(), sizeof(float) * HW * D);
    Tensor masks_a, iou_a, masks_b, iou_b;
    model->mask_decoder.forward(features, model->image_pe, sparse, dense, masks_a, iou_a);
    model->mask_decoder.forward_shared_dense(features, model->image_pe, sparse, dense_one, masks_b, iou_b);
    ASSERT_EQ(masks_a.shape(), masks_b.shape()) << n;
    ASSERT_EQ(iou_a.shape(), iou_b.shape()) << n;
    // Not bit-identical: with one set of keys per image, layer 0 runs the image-side projections on
    // one image and the cross attention on the prompts' tokens stacked (other GEMM shapes, so other
    // summation orders). Both are fp32 evaluations of the same sums: within 1e-5 of each other.
    auto max_rel = [](const Tensor& x, const Tensor& y) {
      double num = 0, den = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        num = std::max(num, std::abs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
        den = std::max(den, std::abs(static_cast<double>(y.data<float>()[i])));
      }
      return num / std::max(den, 1e-30);
    };
    EXPECT_LT(max_rel(masks_b, masks_a), 1e-5) << "masks, batch " << n;
    EXPECT_LT(max_rel(iou_b, iou_a), 1e-5) << "iou, batch " << n;
    if (n == 1) {  // one prompt: the same operations in the same shapes, bit for bit
      EXPECT_EQ(std::memcmp(masks_a.raw(), masks_b.raw(), masks_a.nbytes()), 0);
      EXPECT_EQ(std::memcmp(iou_a.raw(), iou_b.raw(), iou_a.nbytes()), 0);
    }
  }
}

}  // namespace
}  // namespace vitrt
