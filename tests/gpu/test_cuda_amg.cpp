// "Segment everything" on the GPU (issue #5) against the CPU path:
//  - kernels (ops/cuda/amg.h) vs amg_utils on random inputs: stability counts and boxes of
//    upscaled planes (empty masks, masks touching the edges, rows wider than int16), the
//    bit-packed masks, and the column-major RLE (all-zero, all-one, single pixel, odd sizes,
//    crops placed anywhere in the image) -- all bit-identical;
//  - the device post-processing (amg_device.h) vs amg::filter_batch on the SAME low-res logits,
//    downloaded from the device decoder: identical masks, boxes, scores, RLE;
//  - SamAutomaticMaskGenerator with the model on CUDA (fp32) vs on the CPU, end to end: the same
//    number of records and every mask matched with IoU >= 0.99 (the decoders differ by ~1e-6, so
//    near-zero logits may flip a few pixels); bf16 runs.
// Every test skips without CUDA or a device.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "amg_test_util.h"
#include "gpu_test_util.h"
#include "io/rle.h"
#include "models/sam/amg_device.h"
#include "models/sam/amg_utils.h"
#include "models/sam/automatic_mask_generator.h"
#include "models/sam/sam_model.h"
#include "ops/ops.h"
#include "vitrt/amg.h"
#include "vitrt/checkpoint.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/amg.h"
#include "ops/cuda/runtime.h"
#endif

using namespace vitrt;
namespace fs = std::filesystem;

namespace {

// Equal, or both NaN (the stability score of an empty mask is 0 / 0, as in the reference).
template <class T>
bool same_value(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

const fs::path kFix = fs::path(VITRT_FIXTURES);

class CudaAmg : public test::CudaTest {};

#ifdef VITRT_HAVE_CUDA

using test::amg_cases;
using test::amg_model;
AmgOptions options_from(const nlohmann::json& o) {
  return test::amg_options_from(o, AmgOutputMode::UncompressedRle);
}

// ResizeLongestSide.get_preprocess_shape.
std::pair<int, int> preprocess_shape(int h, int w, int target) {
  const double scale = target * 1.0 / std::max(h, w);
  return {static_cast<int>(h * scale + 0.5), static_cast<int>(w * scale + 0.5)};
}

double rle_iou(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, int h, int w) {
  const std::vector<uint8_t> ma = rle_decode(a, h, w), mb = rle_decode(b, h, w);
  int64_t inter = 0, uni = 0;
  for (size_t i = 0; i < ma.size(); ++i) inter += ma[i] && mb[i], uni += ma[i] || mb[i];
  return uni == 0 ? 1.0 : static_cast<double>(inter) / uni;
}

// Smooth random logits (a few low-frequency waves plus noise) so that masks have structure,
// as float32 planes; plus some fixed patterns.
std::vector<float> random_planes(int n, int m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n) * m * m);
  for (int p = 0; p < n; ++p) {
    const float fx = 0.05f + 0.3f * std::abs(nd(rng)), fy = 0.05f + 0.3f * std::abs(nd(rng));
    const float ph = nd(rng), off = 0.7f * nd(rng), amp = 2.f + std::abs(nd(rng));
    for (int y = 0; y < m; ++y)
      for (int x = 0; x < m; ++x)
        v[(static_cast<size_t>(p) * m + y) * m + x] =
            off + amp * std::sin(fx * x + ph) * std::cos(fy * y - ph) + 0.3f * nd(rng);
  }
  return v;
}

// Device copy of host planes in dtype dt, and the host float32 values the device actually holds
// (bf16-rounded for BF16), and the device address of each plane.
struct DevicePlanes {
  Tensor dev, host_exact, ptrs;
};
DevicePlanes upload_planes(const std::vector<float>& v, int n, int m, DType dt) {
  DevicePlanes d;
  Tensor host = Tensor::from_vector(v, {n, m, m});
  d.dev = ops::cast(host, dt).to(Device::CUDA);
  d.host_exact = ops::cast(ops::cast(host, dt), DType::F32);
  std::vector<const void*> p(n);
  const size_t bytes = static_cast<size_t>(m) * m * dtype_size(dt);
  for (int i = 0; i < n; ++i) p[i] = static_cast<const char*>(d.dev.raw()) + i * bytes;
  Tensor ph = Tensor::empty({static_cast<int64_t>(n * sizeof(void*))}, DType::U8);
  std::memcpy(ph.raw(), p.data(), n * sizeof(void*));
  d.ptrs = ph.to(Device::CUDA);
  return d;
}

template <class T>
std::vector<T> download(const Tensor& t, int64_t n) {
  std::vector<T> v(n);
  const Tensor h = t.to(Device::CPU);
  std::memcpy(v.data(), h.raw(), n * sizeof(T));
  return v;
}
Tensor device_bytes(int64_t n) { return Tensor::zeros({std::max<int64_t>(1, n)}, DType::U8, Device::CUDA); }

struct Geometry {
  int m, S, ih, iw, oh, ow;
};

// Upscaled-plane stats and bits of every geometry and dtype equal the CPU's on the same values.
TEST_F(CudaAmg, UpscaledStatsAndBitsMatchCpu) {
  const std::vector<Geometry> geometries = {
      {16, 64, 43, 64, 90, 134},    // upscale, landscape
      {16, 64, 64, 37, 51, 29},     // downscale in the second resize, odd sizes
      {32, 128, 128, 128, 128, 128},  // identity second resize
      {8, 32, 21, 32, 3, 40000},    // rows wider than int16: the per-row counts wrap
      {16, 64, 64, 64, 1, 1},       // one pixel
  };
  const int n = 7;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " m " << g.m << " S " << g.S << " input " << g.ih << "x"
                                        << g.iw << " out " << g.oh << "x" << g.ow);
      std::vector<float> v = random_planes(n, g.m, 11 + g.oh);
      const size_t mm = static_cast<size_t>(g.m) * g.m;
      // Plane 4: empty; 5: all set; 6: only the low-res corner (0, 0) set -> touches the edges.
      std::fill(v.begin() + 4 * mm, v.begin() + 5 * mm, -3.f);
      std::fill(v.begin() + 5 * mm, v.begin() + 6 * mm, 2.f);
      std::fill(v.begin() + 6 * mm, v.begin() + 7 * mm, -5.f);
      v[6 * mm] = 40.f;
      const DevicePlanes d = upload_planes(v, n, g.m, dt);
      cuda::MaskUpscale up{g.m, g.m, g.S, g.ih, g.iw, g.oh, g.ow};
      const float thr = 0.f, hi = 1.f, lo = -1.f;
      Tensor stats_dev = device_bytes(n * sizeof(cuda::MaskPlaneStats));
      cuda::upscaled_mask_stats(dt, static_cast<const void* const*>(d.ptrs.raw()), n, up, thr, hi, lo,
                                static_cast<cuda::MaskPlaneStats*>(stats_dev.raw()));
      const auto stats = download<cuda::MaskPlaneStats>(stats_dev, n);
      const int64_t wpp = cuda::mask_words_per_plane(g.oh, g.ow);
      Tensor words_dev = device_bytes(n * wpp * 4);
      cuda::upscaled_mask_bits(dt, static_cast<const void* const*>(d.ptrs.raw()), n, up, thr,
                               static_cast<uint32_t*>(words_dev.raw()));
      const auto words = download<uint32_t>(words_dev, n * wpp);

      const amg::LogitUpscaler cpu(g.m, g.S, g.ih, g.iw, g.oh, g.ow);
      amg::LogitUpscaler::Scratch scratch;
      std::vector<float> logits(static_cast<size_t>(g.oh) * g.ow);
      for (int p = 0; p < n; ++p) {
        SCOPED_TRACE("plane " + std::to_string(p));
        cpu.run_plane(d.host_exact.data<float>() + p * mm, scratch, logits.data());
        // calculate_stability_score's counts, per row through int16.
        int32_t above_hi = 0, above_lo = 0;
        std::vector<uint8_t> mask(logits.size());
        for (int y = 0; y < g.oh; ++y) {
          int32_t rh = 0, rl = 0;
          for (int x = 0; x < g.ow; ++x) {
            const float lv = logits[static_cast<size_t>(y) * g.ow + x];
            rh += lv > hi;
            rl += lv > lo;
            mask[static_cast<size_t>(y) * g.ow + x] = lv > thr;
          }
          above_hi += static_cast<int16_t>(rh);
          above_lo += static_cast<int16_t>(rl);
        }
        EXPECT_EQ(stats[p].above_hi, above_hi);
        EXPECT_EQ(stats[p].above_lo, above_lo);
        // An all-background plane has no union: 0 / 0 is NaN in the reference too (and fails every
        // threshold), so NaN must meet NaN.
        EXPECT_TRUE(same_value(amg::stability_score(stats[p].above_hi, stats[p].above_lo),
                               amg::calculate_stability_score(logits.data(), g.oh, g.ow, 0.0, 1.0)));
        const auto box = amg::mask_to_box(mask.data(), g.oh, g.ow);
        const bool empty = std::find(mask.begin(), mask.end(), 1) == mask.end();
        EXPECT_EQ(stats[p].empty(), empty);
        if (!empty) {
          EXPECT_EQ(stats[p].x0, box[0]);
          EXPECT_EQ(stats[p].y0, box[1]);
          EXPECT_EQ(stats[p].x1, box[2]);
          EXPECT_EQ(stats[p].y1, box[3]);
        }
        if (p == 4) EXPECT_TRUE(stats[p].empty());
        if (p == 5) EXPECT_EQ(above_lo, g.oh * static_cast<int32_t>(static_cast<int16_t>(g.ow)));
        if (p == 6 && !empty) EXPECT_EQ(box[0] + box[1], 0) << "the corner mask touches the top-left edges";
        int bad = 0;
        for (int y = 0; y < g.oh; ++y)
          for (int x = 0; x < g.ow; ++x) {
            const uint32_t wd = words[p * wpp + static_cast<int64_t>(y / 32) * g.ow + x];
            bad += ((wd >> (y % 32)) & 1u) != mask[static_cast<size_t>(y) * g.ow + x];
          }
        EXPECT_EQ(bad, 0) << "mask bits that differ from the CPU's threshold";
      }
    }
  }
}

// Packs row-major masks into upscaled_mask_bits's layout.
std::vector<uint32_t> pack(const std::vector<std::vector<uint8_t>>& masks, int h, int w) {
  const int64_t wpp = cuda::mask_words_per_plane(h, w);
  std::vector<uint32_t> words(masks.size() * wpp, 0);
  for (size_t j = 0; j < masks.size(); ++j)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        if (masks[j][static_cast<size_t>(y) * w + x]) words[j * wpp + (y / 32) * w + x] |= 1u << (y % 32);
  return words;
}

std::vector<std::vector<uint32_t>> device_rle(const std::vector<std::vector<uint8_t>>& masks,
                                              const cuda::MaskPlacement& p) {
  const int64_t n = static_cast<int64_t>(masks.size());
  const std::vector<uint32_t> words = pack(masks, p.h, p.w);
  Tensor wh = Tensor::empty({static_cast<int64_t>(words.size() * 4)}, DType::U8);
  std::memcpy(wh.raw(), words.data(), words.size() * 4);
  const Tensor wd = wh.to(Device::CUDA);
  Tensor col_offsets = device_bytes(cuda::rle_col_offsets_size(n, p) * 8);
  Tensor starts_dev = device_bytes((n + 1) * 8);
  cuda::rle_plan(static_cast<const uint32_t*>(wd.raw()), n, p, static_cast<int64_t*>(col_offsets.raw()),
                 static_cast<int64_t*>(starts_dev.raw()));
  const auto starts = download<int64_t>(starts_dev, n + 1);
  Tensor counts_dev = device_bytes(starts[n] * 4);
  cuda::rle_write(static_cast<const uint32_t*>(wd.raw()), n, p, static_cast<const int64_t*>(col_offsets.raw()),
                  static_cast<const int64_t*>(starts_dev.raw()), starts[n], static_cast<uint32_t*>(counts_dev.raw()));
  const auto counts = download<uint32_t>(counts_dev, starts[n]);
  std::vector<std::vector<uint32_t>> out(n);
  for (int64_t j = 0; j < n; ++j) out[j].assign(counts.begin() + starts[j], counts.begin() + starts[j + 1]);
  return out;
}

TEST_F(CudaAmg, RleMatchesCpu) {
  std::mt19937 rng(5);
  struct Case {
    int h, w, x0, y0, H, W;
  };
  const std::vector<Case> cases = {
      {1, 1, 0, 0, 1, 1},       {37, 53, 0, 0, 37, 53},   {64, 33, 0, 0, 64, 33},  {65, 31, 0, 0, 65, 31},
      {20, 17, 5, 7, 40, 30},   {40, 17, 5, 0, 40, 30},   {20, 30, 0, 7, 40, 30},  {40, 30, 0, 0, 40, 31},
      {33, 12, 18, 7, 40, 30},  {40, 13, 17, 0, 40, 30},  {31, 30, 0, 9, 40, 30},  {96, 70, 3, 0, 96, 80},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.w << "x" << c.h << " at (" << c.x0 << ", " << c.y0 << ") in " << c.W << "x"
                                      << c.H);
    const size_t np = static_cast<size_t>(c.h) * c.w;
    std::vector<std::vector<uint8_t>> masks;
    masks.emplace_back(np, 0);  // all zero
    masks.emplace_back(np, 1);  // all one
    for (size_t px : {size_t{0}, np - 1, np / 2}) {  // single pixels: first, last, middle
      masks.emplace_back(np, 0);
      masks.back()[px] = 1;
    }
    masks.emplace_back(np, 0);  // the first and last rows set (runs across column ends)
    for (int x = 0; x < c.w; ++x) masks.back()[x] = masks.back()[static_cast<size_t>(c.h - 1) * c.w + x] = 1;
    for (int density : {2, 50, 98}) {  // random, percent set
      masks.emplace_back(np);
      for (auto& b : masks.back()) b = static_cast<int>(rng() % 100) < density;
    }
    masks.emplace_back(np, 0);  // a blob
    for (int y = c.h / 4; y < (3 * c.h) / 4 + 1; ++y)
      for (int x = c.w / 3; x < c.w; ++x) masks.back()[static_cast<size_t>(y) * c.w + x] = 1;
    const cuda::MaskPlacement p{c.h, c.w, c.x0, c.y0, c.H, c.W};
    const auto got = device_rle(masks, p);
    ASSERT_EQ(got.size(), masks.size());
    for (size_t j = 0; j < masks.size(); ++j)
      EXPECT_EQ(got[j], amg::rle_counts_uncropped(masks[j].data(), c.h, c.w, c.x0, c.y0, c.H, c.W)) << "mask " << j;
  }
}

TEST_F(CudaAmg, RleRejectsMisplacedMasks) {
  Tensor buf = device_bytes(1024);
  const cuda::MaskPlacement p{10, 10, 5, 0, 10, 12};  // 5 + 10 > 12
  EXPECT_THROW(cuda::rle_plan(static_cast<const uint32_t*>(buf.raw()), 1, p, static_cast<int64_t*>(buf.raw()),
                              static_cast<int64_t*>(buf.raw())),
               InvalidArgument);
}

// The device post-processing against amg::filter_batch on the same logits, which come from the
// device decoder: bit-identical survivors (then RLE of all of them, as if NMS kept everything).
TEST_F(CudaAmg, DeviceFilterEqualsHostFilterOnSameLogits) {
  const auto model = amg_model()->to(Device::CUDA, DType::F32);
  const SamConfig& cfg = model->config;
  const Image image = read_image((kFix / "sam" / "images" / "landscape.png").string());
  const int H = image.height, W = image.width;
  int ih = 0, iw = 0;
  const Tensor features = amg::encode_image_on_device(*model, image, &ih, &iw);
  const amg::PointGrid grid = amg::build_point_grid(10);

  // The whole image, and the same logits read as those of crops (uncropping, crop-edge filter).
  const std::vector<amg::CropBox> crops = {{0, 0, W, H, 0}, {100, 40, 420, 300, 1}, {0, 0, 330, H, 1},
                                           {W - 250, 0, W, 200, 1}};
  for (size_t ci = 0; ci < crops.size(); ++ci) {
    const amg::CropBox& crop = crops[ci];
    SCOPED_TRACE("crop " + std::to_string(ci));
    std::vector<amg::GridPoint> pts;
    for (const auto& g : grid) pts.push_back({g[0] * crop.width(), g[1] * crop.height()});
    Tensor masks, iou;
    amg::decode_points_on_device(*model, features, ih, iw, H, W, pts, masks, iou);
    const Tensor masks_host = ops::cast(masks, DType::F32).to(Device::CPU);
    const Tensor iou_host = ops::cast(iou, DType::F32).to(Device::CPU);
    const int64_t n = masks_host.size(0), M = masks_host.size(1), m = masks_host.size(2);
    ASSERT_EQ(M, 4);
    Tensor low3 = Tensor::empty({n, 3, m, m}), iou3 = Tensor::empty({n, 3});
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(low3.data<float>() + i * 3 * m * m, masks_host.data<float>() + (i * M + 1) * m * m,
                  sizeof(float) * 3 * m * m);
      for (int k = 0; k < 3; ++k) iou3.data<float>()[i * 3 + k] = iou_host.data<float>()[i * M + 1 + k];
    }
    // The crop's encoder input size (what LogitUpscaler gets from that crop's embedding).
    const auto [cih, ciw] = ci == 0 ? std::pair<int, int>{ih, iw}
                                    : preprocess_shape(crop.height(), crop.width(), cfg.img_size);
    for (const auto& [iou_t, stab_t, offset] : {std::tuple{0.3, 0.2, 1.0}, std::tuple{0.0, 0.0, 0.5},
                                                std::tuple{0.5, 0.6, 0.25}}) {
      AmgOptions o;
      o.pred_iou_thresh = iou_t;
      o.stability_score_thresh = stab_t;
      o.stability_score_offset = offset;
      const amg::LogitUpscaler up(cfg.low_res_size(), cfg.img_size, cih, ciw, crop.height(), crop.width());
      std::vector<amg::CropMask> want, got;
      amg::filter_batch(low3, iou3, pts, up, crop, static_cast<int>(ci), H, W, o, want);
      amg::DeviceCropMasks dev(cfg.low_res_size(), cfg.img_size, cih, ciw, crop, static_cast<int>(ci), H, W, o);
      // Two batches, to check that planes from several batches are addressed right.
      const int64_t half = n / 2;
      const std::vector<amg::GridPoint> p0(pts.begin(), pts.begin() + half), p1(pts.begin() + half, pts.end());
      dev.filter_batch(masks.slice0(0, half), 1, 3, iou_host.slice0(0, half).clone(), p0, got);
      dev.filter_batch(masks.slice0(half, n), 1, 3, iou_host.slice0(half, n).clone(), p1, got);
      dev.encode_rle(got);
      ASSERT_EQ(got.size(), want.size()) << "survivors";
      if (iou_t == 0.0) EXPECT_GT(want.size(), 0u) << "with the filters off some masks must survive";
      for (size_t i = 0; i < want.size(); ++i) {
        SCOPED_TRACE("mask " + std::to_string(i));
        EXPECT_EQ(got[i].box, want[i].box);
        EXPECT_EQ(got[i].iou, want[i].iou);
        EXPECT_TRUE(same_value(got[i].stability, want[i].stability)) << got[i].stability << " vs " << want[i].stability;
        EXPECT_EQ(got[i].point, want[i].point);
        EXPECT_EQ(got[i].crop, want[i].crop);
        EXPECT_EQ(got[i].rle, want[i].rle);
      }
    }
  }
}

// End to end: the generator with the model on CUDA (fp32) against the CPU, on every AMG fixture
// case (with and without crops and small-region removal).
TEST_F(CudaAmg, GeneratorOnCudaMatchesCpu) {
  const auto cpu_model = amg_model();
  const std::shared_ptr<const SamModel> gpu_model = cpu_model->to(Device::CUDA, DType::F32);
  for (const auto& [name, c] : amg_cases().items()) {
    SCOPED_TRACE(name);
    const Image image = read_image((kFix / "sam" / "images" / (c["image"].get<std::string>() + ".png")).string());
    AmgOptions o = options_from(c["options"]);
    o.gpu_points_per_batch = 37;  // several device batches, of a size unrelated to points_per_batch
    SamAutomaticMaskGenerator cpu_gen(cpu_model, o), gpu_gen(gpu_model, o);
    const std::vector<MaskRecord> want = cpu_gen.generate(image);
    const std::vector<MaskRecord> got = gpu_gen.generate(image);
    ASSERT_EQ(got.size(), want.size()) << "records";
    int identical = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      double best = -1;
      size_t bj = 0;
      for (size_t j = 0; j < got.size(); ++j) {
        const double v = rle_iou(want[i].segmentation.counts, got[j].segmentation.counts, image.height, image.width);
        if (v > best) best = v, bj = j;
      }
      EXPECT_GE(best, 0.99) << "record " << i;
      EXPECT_NEAR(got[bj].predicted_iou, want[i].predicted_iou, 1e-4);
      EXPECT_NEAR(got[bj].stability_score, want[i].stability_score, 1e-3);
      identical += got[bj].segmentation.counts == want[i].segmentation.counts && bj == i;
    }
    std::printf("  %-22s %zu records, %d identical and in the same position\n", name.c_str(), want.size(),
                identical);
  }
}

// The results do not depend on the device batch size (each mask is filtered on its own).
TEST_F(CudaAmg, DeviceBatchSizeDoesNotChangeResults) {
  const std::shared_ptr<const SamModel> gpu_model = amg_model()->to(Device::CUDA, DType::F32);
  const Image image = read_image((kFix / "sam" / "images" / "portrait.png").string());
  AmgOptions o = options_from(amg_cases()["port_minarea"]["options"]);
  o.min_mask_region_area = 0;
  std::vector<std::vector<MaskRecord>> runs;
  for (int batch : {1, 64, 1000}) {
    o.gpu_points_per_batch = batch;
    o.points_per_batch = 1;
    runs.push_back(SamAutomaticMaskGenerator(gpu_model, o).generate(image));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      const double v = rle_iou(runs[0][i].segmentation.counts, runs[r][i].segmentation.counts, image.height,
                               image.width);
      EXPECT_GE(v, 0.99) << "run " << r << " record " << i;
    }
  }
}

// bf16 runs end to end and gives records of the right size.
TEST_F(CudaAmg, GeneratorRunsInBf16) {
  const std::shared_ptr<const SamModel> gpu_model = amg_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  const Image image = read_image((kFix / "sam" / "images" / "landscape.png").string());
  AmgOptions o = options_from(amg_cases()["land_pps12"]["options"]);
  o.output_mode = AmgOutputMode::CocoRle;
  const std::vector<MaskRecord> got = SamAutomaticMaskGenerator(gpu_model, o).generate(image);
  EXPECT_GT(got.size(), 0u);
  for (const MaskRecord& r : got) {
    EXPECT_EQ(r.segmentation.height, image.height);
    EXPECT_EQ(r.segmentation.width, image.width);
    EXPECT_EQ(static_cast<int64_t>(rle_area(rle_from_string(r.segmentation.coco_counts))), r.area);
  }
}

#else

TEST_F(CudaAmg, NeedsCuda) {}

#endif  // VITRT_HAVE_CUDA

}  // namespace
