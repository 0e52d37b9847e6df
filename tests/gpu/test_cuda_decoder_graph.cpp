// The mask decoder replayed as CUDA graphs (models/sam/decoder_graph.h) against the same decoder
// run eagerly on the same model (graphs switched off with DecoderGraphCache::set_enabled): the same
// kernels in the same order, so masks, scores, low-res logits and full-size logits must be
// bit-identical -- on the first call of a shape (eager, through the cache's buffers), the second
// (captured, then launched) and later ones (replayed with new inputs). Each test also checks from
// the cache's counters that graphs were really captured and replayed (a silent fallback to eager
// would otherwise pass). Cases: 1 and 64 prompts, a ragged multi-image batch, prompts of several
// token counts and a mask input in one batch, new prompts of the same shape, switching images,
// the automatic mask generator, several threads, the cache's bound, and the switches that turn
// graphs off. The decoder has SAM's real size (256 channels, 64 x 64 grid), so the graphs hold the
// kernels SAM runs; the encoder is tiny and mostly unused (random embeddings).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "models/sam/sam_model.h"
#include "vitrt/amg.h"
#include "vitrt/sam.h"

#ifdef VITRT_HAVE_CUDA
#include "models/sam/amg_device.h"
#include "models/sam/decoder_graph.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"
#endif

namespace vitrt {
namespace {

class CudaDecoderGraph : public test::CudaTest {};

#ifdef VITRT_HAVE_CUDA

using Stats = sam::DecoderGraphCache::Stats;

// vit_b's prompt encoder and decoder behind a one-block, 64-wide encoder.
std::shared_ptr<SamModel> decoder_sized_model() {
  SamConfig c = SamConfig::vit_b();
  c.name = "custom";
  c.embed_dim = 64;
  c.depth = 1;
  c.num_heads = 2;
  c.mlp_dim = 128;
  c.global_attn_indexes = {0};
  return SamModel::from_state_dict(sam::random_state_dict(c, 7), c);
}

// ResizeLongestSide.get_preprocess_shape.
std::pair<int, int> preprocess_shape(int h, int w, int target) {
  const double scale = target * 1.0 / std::max(h, w);
  return {static_cast<int>(h * scale + 0.5), static_cast<int>(w * scale + 0.5)};
}

// A random image embedding of an H x W image for `model`.
ImageEmbedding random_embedding(const SamModel& model, int H, int W, uint32_t seed) {
  const SamConfig& c = sam_config(model);
  ImageEmbedding e;
  e.features = Tensor::empty({1, c.out_chans, c.grid_size(), c.grid_size()});
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < e.features.numel(); ++i) e.features.data<float>()[i] = nd(rng);
  e.original_height = H;
  e.original_width = W;
  std::tie(e.input_height, e.input_width) = preprocess_shape(H, W, c.img_size);
  e.model_fingerprint = sam_fingerprint(model);
  return e;
}

// n single foreground clicks inside a W x H image.
std::vector<Prompt> clicks(int n, int W, int H, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ux(0.f, static_cast<float>(W)), uy(0.f, static_cast<float>(H));
  std::vector<Prompt> p(static_cast<size_t>(n));
  for (Prompt& q : p) q.points = {{ux(rng), uy(rng), 1}};
  return p;
}

void set_graphs(const SamModel& model, bool on) { model.mask_decoder.graphs->set_enabled(on); }
Stats graph_stats(const SamModel& model) { return model.mask_decoder.graphs->stats(); }

bool identical(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  const Tensor x = a.to(Device::CPU), y = b.to(Device::CPU);
  return x.shape() == y.shape() && x.dtype() == y.dtype() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

void expect_identical(const BatchPrediction& got, const BatchPrediction& want) {
  EXPECT_TRUE(identical(got.masks, want.masks)) << "masks";
  EXPECT_TRUE(identical(got.scores, want.scores)) << "scores";
  EXPECT_TRUE(identical(got.low_res_logits, want.low_res_logits)) << "low-res logits";
  EXPECT_TRUE(identical(got.logits, want.logits)) << "logits";
}

void expect_identical(const Prediction& got, const Prediction& want) {
  EXPECT_TRUE(identical(got.masks, want.masks)) << "masks";
  EXPECT_EQ(got.scores, want.scores) << "scores";
  EXPECT_TRUE(identical(got.low_res_logits, want.low_res_logits)) << "low-res logits";
  EXPECT_TRUE(identical(got.logits, want.logits)) << "logits";
}

// The counters moved by `runs` calls of `keys` new shapes: each key's first call eager, its second
// captured (and launched), later ones replayed; no capture failed.
void expect_graph_use(const Stats& before, const Stats& after, int64_t keys, int64_t runs) {
  EXPECT_EQ(after.capture_failures, before.capture_failures);
  EXPECT_EQ(after.eager_runs - before.eager_runs, keys);
  EXPECT_EQ(after.captures - before.captures, keys);
  EXPECT_EQ(after.replays - before.replays, keys * (runs - 1));
}

TEST_F(CudaDecoderGraph, OneAndSixtyFourPromptsEqualEager) {
  const auto cpu_model = decoder_sized_model();
  for (DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dt == DType::BF16 ? "bf16" : "fp32");
    const auto model = cpu_model->to(Device::CUDA, dt, dt);
    SamPredictor p(model);
    p.set_embedding(random_embedding(*model, 480, 640, 1));
    for (int n : {1, 64}) {
      for (bool multimask : {true, false}) {
        SCOPED_TRACE("prompts " + std::to_string(n) + (multimask ? " multimask" : " single mask"));
        const std::vector<Prompt> prompts = clicks(n, 640, 480, 10 + n);
        set_graphs(*model, false);
        const BatchPrediction want = p.predict_batch_on_device(prompts, multimask, /*return_logits=*/true);
        const std::vector<Prediction> want_host = p.predict_batch(prompts, multimask);
        set_graphs(*model, true);
        const Stats before = graph_stats(*model);
        for (int run = 0; run < 3; ++run) {  // eager, capture + launch, replay
          SCOPED_TRACE("call " + std::to_string(run));
          expect_identical(p.predict_batch_on_device(prompts, multimask, true), want);
        }
        expect_graph_use(before, graph_stats(*model), 1, 3);
        // The host path (predict / predict_batch) replays the same graph.
        const std::vector<Prediction> got_host = p.predict_batch(prompts, multimask);
        ASSERT_EQ(got_host.size(), want_host.size());
        for (size_t j = 0; j < got_host.size(); ++j) expect_identical(got_host[j], want_host[j]);
        if (n == 1) expect_identical(p.predict(prompts[0], multimask), want_host[0]);
      }
    }
  }
}

TEST_F(CudaDecoderGraph, RaggedMultiImageBatchEqualsEager) {
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  const std::vector<ImageEmbedding> embs = {random_embedding(*model, 480, 640, 2),
                                            random_embedding(*model, 600, 400, 3),
                                            random_embedding(*model, 300, 300, 4)};
  // Image 0: 5 clicks (2 tokens) and 2 click + box (3 tokens); image 1: none; image 2: 9 clicks and
  // a box (2 tokens): two groups, counts {5, 10} and {2}.
  std::vector<std::vector<Prompt>> prompts(3);
  prompts[0] = clicks(5, 640, 480, 20);
  for (int j = 0; j < 2; ++j) {
    Prompt q;
    q.points = {{100.f + 50 * j, 200.f, 1}};
    q.box = Box{50.f, 100.f + 20 * j, 300.f, 400.f};
    prompts[0].push_back(q);
  }
  prompts[2] = clicks(9, 300, 300, 21);
  prompts[2].push_back(Prompt{});
  prompts[2].back().box = Box{10, 20, 200, 250};

  set_graphs(*model, false);
  const auto want = predict_multi_image(*model, embs, prompts, true, true);
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("call " + std::to_string(run));
    const auto got = predict_multi_image(*model, embs, prompts, true, true);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].size(), want[i].size());
      for (size_t j = 0; j < want[i].size(); ++j) {
        SCOPED_TRACE("image " + std::to_string(i) + " prompt " + std::to_string(j));
        expect_identical(got[i][j], want[i][j]);
      }
    }
  }
  expect_graph_use(before, graph_stats(*model), 2, 3);
}

TEST_F(CudaDecoderGraph, MixedPromptKindsEqualEager) {
  // Clicks and boxes (2 tokens), click + box and two clicks (3 tokens) in graphs; three clicks
  // with a mask input (4 tokens) through the eager mask-input path; scattered back in order.
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  SamPredictor p(model);
  p.set_embedding(random_embedding(*model, 480, 640, 5));
  std::vector<Prompt> prompts = clicks(6, 640, 480, 30);
  prompts[1].points.clear();
  prompts[1].box = Box{20, 30, 400, 300};
  prompts[2].box = Box{0, 0, 640, 480};
  prompts[3].points.push_back({300, 200, 0});
  prompts[5].points.push_back({10, 10, 1});
  prompts[5].points.push_back({630, 470, 0});
  set_graphs(*model, false);
  prompts[5].mask_input = p.predict(prompts[0]).low_res_logits.slice0(0, 1).clone();
  const BatchPrediction want = p.predict_batch_on_device(prompts, true, true);
  const std::vector<Prediction> want_host = p.predict_batch(prompts, false, true);
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("call " + std::to_string(run));
    expect_identical(p.predict_batch_on_device(prompts, true, true), want);
  }
  expect_graph_use(before, graph_stats(*model), 2, 3);
  for (int run = 0; run < 3; ++run) {  // single-mask outputs: other mask planes, other graphs
    const std::vector<Prediction> got_host = p.predict_batch(prompts, false, true);
    for (size_t j = 0; j < got_host.size(); ++j) expect_identical(got_host[j], want_host[j]);
  }
}

TEST_F(CudaDecoderGraph, NewPromptsOfTheSameShapeReplayWithTheirOwnResults) {
  // The graph reads the prompt tokens from a buffer uploaded before each launch: results must
  // follow the prompts (and differ between them), never repeat what was captured.
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  SamPredictor p(model);
  p.set_embedding(random_embedding(*model, 480, 640, 6));
  std::vector<BatchPrediction> want;
  for (uint32_t round = 0; round < 5; ++round) {
    set_graphs(*model, false);
    want.push_back(p.predict_batch_on_device(clicks(64, 640, 480, 100 + round)));
  }
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  BatchPrediction previous;
  for (uint32_t round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const BatchPrediction got = p.predict_batch_on_device(clicks(64, 640, 480, 100 + round));
    expect_identical(got, want[round]);
    if (round > 0) {
      EXPECT_FALSE(identical(got.low_res_logits, previous.low_res_logits)) << "results did not follow the prompts";
      EXPECT_FALSE(identical(got.scores, previous.scores));
    }
    previous = got;
  }
  expect_graph_use(before, graph_stats(*model), 1, 5);
}

TEST_F(CudaDecoderGraph, SwitchingImagesFollowsTheEmbedding) {
  // The image features are copied into the graph's input buffer on every call: switching the
  // predictor's embedding, or two predictors on one model, replays one graph with each image.
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  const ImageEmbedding e1 = random_embedding(*model, 480, 640, 7), e2 = random_embedding(*model, 480, 640, 8);
  const std::vector<Prompt> prompts = clicks(16, 640, 480, 40);
  SamPredictor p(model);
  set_graphs(*model, false);
  p.set_embedding(e1);
  const BatchPrediction want1 = p.predict_batch_on_device(prompts);
  p.set_embedding(e2);
  const BatchPrediction want2 = p.predict_batch_on_device(prompts);
  ASSERT_FALSE(identical(want1.low_res_logits, want2.low_res_logits));
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("call " + std::to_string(run));
    p.set_embedding(e1);
    expect_identical(p.predict_batch_on_device(prompts), want1);
    p.set_embedding(e2);
    expect_identical(p.predict_batch_on_device(prompts), want2);
  }
  expect_graph_use(before, graph_stats(*model), 1, 6);
  SamPredictor p1(model), p2(model);
  p1.set_embedding(e1);
  p2.set_embedding(e2);
  for (int run = 0; run < 2; ++run) {
    expect_identical(p1.predict_batch_on_device(prompts), want1);
    expect_identical(p2.predict_batch_on_device(prompts), want2);
  }
  EXPECT_EQ(graph_stats(*model).captures, before.captures + 1);
}

TEST_F(CudaDecoderGraph, AutomaticMaskGeneratorEqualsEager) {
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  // The generator's decoder batches (decode_points_on_device: all four mask planes), including a
  // smaller last batch.
  const SamConfig& c = model->config;
  Tensor features = ops::cast(random_embedding(*model, 480, 640, 9).features.to(Device::CUDA), DType::BF16);
  const auto [ih, iw] = preprocess_shape(480, 640, c.img_size);
  std::vector<std::vector<amg::GridPoint>> batches;
  for (int b = 0; b < 4; ++b) {
    std::vector<amg::GridPoint> pts;
    for (int i = 0; i < (b == 3 ? 100 : 256); ++i)
      pts.push_back({(i * 37 + b * 11) % 640 + 0.5, (i * 53 + b) % 480 + 0.25});
    batches.push_back(pts);
  }
  std::vector<Tensor> want_masks, want_iou;
  set_graphs(*model, false);
  for (const auto& pts : batches) {
    Tensor m, i;
    amg::decode_points_on_device(*model, features, ih, iw, 480, 640, pts, m, i);
    want_masks.push_back(m);
    want_iou.push_back(i);
  }
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  for (int run = 0; run < 2; ++run) {
    for (size_t b = 0; b < batches.size(); ++b) {
      SCOPED_TRACE("run " + std::to_string(run) + " batch " + std::to_string(b));
      Tensor m, i;
      amg::decode_points_on_device(*model, features, ih, iw, 480, 640, batches[b], m, i);
      EXPECT_EQ(m.shape(), want_masks[b].shape());
      EXPECT_TRUE(identical(m, want_masks[b]));
      EXPECT_TRUE(identical(i, want_iou[b]));
    }
  }
  // Two shapes (256 and 100 points): 256 eager, captured, then replayed 4 times; 100 eager, captured.
  const Stats after = graph_stats(*model);
  EXPECT_EQ(after.capture_failures, before.capture_failures);
  EXPECT_EQ(after.captures - before.captures, 2);
  EXPECT_EQ(after.replays - before.replays, 5 + 1);

  // The whole generator (its batches go through the same decoder call), graphs on and off.
  AmgOptions o;
  o.points_per_side = 16;
  o.gpu_points_per_batch = 64;
  o.points_per_batch = 64;
  o.pred_iou_thresh = 0;
  o.stability_score_thresh = 0;
  o.crop_n_layers = 1;
  o.output_mode = AmgOutputMode::UncompressedRle;
  Image image;
  image.width = 160;
  image.height = 120;
  image.pixels.resize(static_cast<size_t>(160) * 120 * 3);
  for (size_t k = 0; k < image.pixels.size(); ++k) image.pixels[k] = static_cast<uint8_t>((k * 7919) % 251);
  set_graphs(*model, false);
  const std::vector<MaskRecord> want = SamAutomaticMaskGenerator(model, o).generate(image);
  set_graphs(*model, true);
  const int64_t replays_before = graph_stats(*model).replays;
  const std::vector<MaskRecord> got = SamAutomaticMaskGenerator(model, o).generate(image);
  EXPECT_GT(graph_stats(*model).replays, replays_before + 4);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_GT(want.size(), 0u);
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("record " + std::to_string(k));
    EXPECT_EQ(got[k].segmentation.counts, want[k].segmentation.counts);
    EXPECT_EQ(got[k].bbox, want[k].bbox);
    EXPECT_EQ(got[k].predicted_iou, want[k].predicted_iou);
    EXPECT_EQ(got[k].stability_score, want[k].stability_score);
    EXPECT_EQ(got[k].point_coords, want[k].point_coords);
  }
}

TEST_F(CudaDecoderGraph, ThreadsShareTheModelWithTheirOwnGraphs) {
  // The server's decode workers share one model; each host thread has its own stream, so each
  // gets its own graph and buffers for the same shape.
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  constexpr int kThreads = 3, kCalls = 4;
  std::vector<ImageEmbedding> embs;
  std::vector<std::vector<BatchPrediction>> want(kThreads);
  set_graphs(*model, false);
  for (int t = 0; t < kThreads; ++t) {
    embs.push_back(random_embedding(*model, 480, 640, 50 + t));
    SamPredictor p(model);
    p.set_embedding(embs[t]);
    for (int k = 0; k < kCalls; ++k)
      want[t].push_back(p.predict_batch_on_device(clicks(8, 640, 480, 60 + 10 * t + k)));
  }
  // The references' device memory is read on this thread's stream; make it complete first.
  cuda::synchronize();
  set_graphs(*model, true);
  const Stats before = graph_stats(*model);
  std::vector<std::vector<int>> ok(kThreads, std::vector<int>(kCalls, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      SamPredictor p(model);
      p.set_embedding(embs[t]);
      for (int k = 0; k < kCalls; ++k) {
        const BatchPrediction got = p.predict_batch_on_device(clicks(8, 640, 480, 60 + 10 * t + k));
        ok[t][k] = identical(got.masks, want[t][k].masks) && identical(got.scores, want[t][k].scores) &&
                   identical(got.low_res_logits, want[t][k].low_res_logits);
      }
      cuda::synchronize();
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kCalls; ++k) EXPECT_TRUE(ok[t][k]) << "thread " << t << " call " << k;
  expect_graph_use(before, graph_stats(*model), kThreads, kCalls);
}

TEST_F(CudaDecoderGraph, CacheIsBoundedAndEvictedShapesStillMatch) {
  const auto model = decoder_sized_model()->to(Device::CUDA, DType::BF16, DType::BF16);
  SamPredictor p(model);
  p.set_embedding(random_embedding(*model, 480, 640, 11));
  const int64_t cap = static_cast<int64_t>(sam::DecoderGraphCache::kCapacity);
  for (int n = 1; n <= cap + 3; ++n)
    for (int run = 0; run < 2; ++run) p.predict_batch_on_device(clicks(n, 640, 480, n));
  Stats s = graph_stats(*model);
  EXPECT_EQ(s.entries, static_cast<size_t>(cap));
  EXPECT_EQ(s.evictions, 3);
  EXPECT_EQ(s.captures, cap + 3);
  // Batch size 1 was evicted: eager again, then captured again, and still right.
  set_graphs(*model, false);
  const BatchPrediction want = p.predict_batch_on_device(clicks(1, 640, 480, 99));
  set_graphs(*model, true);
  for (int run = 0; run < 3; ++run) expect_identical(p.predict_batch_on_device(clicks(1, 640, 480, 99)), want);
  s = graph_stats(*model);
  EXPECT_EQ(s.captures, cap + 4);
  EXPECT_EQ(s.entries, static_cast<size_t>(cap));
  model->mask_decoder.graphs->clear();
  EXPECT_EQ(graph_stats(*model).entries, 0u);
  expect_identical(p.predict_batch_on_device(clicks(1, 640, 480, 99)), want);
}

TEST_F(CudaDecoderGraph, SwitchedOffByEnvironmentAndByProfiling) {
  const auto cpu_model = decoder_sized_model();
  ASSERT_EQ(setenv("VITRT_DECODER_GRAPH", "0", 1), 0);
  const auto off = cpu_model->to(Device::CUDA, DType::BF16, DType::BF16);  // reads the variable
  ASSERT_EQ(unsetenv("VITRT_DECODER_GRAPH"), 0);
  const auto on = cpu_model->to(Device::CUDA, DType::BF16, DType::BF16);
  EXPECT_FALSE(off->mask_decoder.graphs->enabled());
  EXPECT_TRUE(on->mask_decoder.graphs->enabled());
  const std::vector<Prompt> prompts = clicks(4, 640, 480, 70);
  SamPredictor p_off(off), p_on(on);
  p_off.set_embedding(random_embedding(*off, 480, 640, 12));
  p_on.set_embedding(random_embedding(*on, 480, 640, 12));
  for (int run = 0; run < 3; ++run)
    expect_identical(p_on.predict_batch_on_device(prompts), p_off.predict_batch_on_device(prompts));
  const Stats s_off = graph_stats(*off);
  EXPECT_EQ(s_off.eager_runs + s_off.captures + s_off.replays, 0);
  EXPECT_EQ(graph_stats(*on).replays, 2);
  // Profiling times eager launches: no graph is launched or captured meanwhile.
  ops::profiler::set_enabled(true);
  const Stats before = graph_stats(*on);
  p_on.predict_batch_on_device(prompts);
  p_on.predict_batch_on_device(clicks(5, 640, 480, 71));
  ops::profiler::set_enabled(false);
  EXPECT_FALSE(ops::profiler::take().empty());
  const Stats after = graph_stats(*on);
  EXPECT_EQ(after.replays, before.replays);
  EXPECT_EQ(after.captures, before.captures);
  EXPECT_EQ(after.eager_runs, before.eager_runs);
}

#else

TEST_F(CudaDecoderGraph, NeedsCuda) {}

#endif  // VITRT_HAVE_CUDA

}  // namespace
}  // namespace vitrt
