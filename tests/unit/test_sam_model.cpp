// SAM model plumbing on a small random-weight model: config detection, embedding files, batching,
// multimask, mask feedback. Fidelity to the official code is in tests/fidelity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "models/sam/automatic_mask_generator.h"
#include "models/sam/decoder_graph.h"
#include "sam_test_util.h"

using namespace vitrt;

namespace {
bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}
}  // namespace

TEST(SamConfig, DetectsVitBFromShapes) {
  SamConfig want = SamConfig::vit_b();
  StateDict sd = sam::random_state_dict(want, 5);
  SamConfig got = sam::config_from_state_dict(sd);
  EXPECT_EQ(got.name, "vit_b");
  EXPECT_EQ(got.embed_dim, 768);
  EXPECT_EQ(got.depth, 12);
  EXPECT_EQ(got.num_heads, 12);
  EXPECT_EQ(got.img_size, 1024);
  EXPECT_EQ(got.global_attn_indexes, (std::vector<int>{2, 5, 8, 11}));
  EXPECT_EQ(got.out_chans, 256);
  EXPECT_EQ(got.decoder_depth, 2);
  EXPECT_EQ(got.decoder_mlp_dim, 2048);
  EXPECT_NO_THROW(SamModel::from_state_dict(sd, got));
}

TEST(SamConfig, InfersCustomSizesFromShapes) {
  SamConfig c = test::small_config();
  SamConfig got = sam::config_from_state_dict(sam::random_state_dict(c, 2));
  EXPECT_EQ(got.name, "custom");
  EXPECT_EQ(got.img_size, 128);
  EXPECT_EQ(got.embed_dim, 32);
  EXPECT_EQ(got.depth, 2);
  EXPECT_EQ(got.num_heads, 2);  // from the rel-pos table width
  EXPECT_EQ(got.global_attn_indexes, std::vector<int>{1});  // rel-pos length 2 * 8 - 1
  EXPECT_EQ(got.mask_in_chans, 8);
  EXPECT_EQ(got.attention_downsample_rate, 2);
  EXPECT_EQ(got.iou_head_hidden_dim, 32);
}

TEST(SamPredictor, OutputShapesAndThreshold) {
  auto model = test::small_model();
  SamPredictor p(model);
  Image im = test::random_image(90, 60);
  p.set_image(im);
  EXPECT_EQ(p.embedding().features.shape(), (Shape{1, 32, 8, 8}));
  EXPECT_EQ(p.embedding().input_width, 128);
  EXPECT_EQ(p.embedding().input_height, 85);  // int(60 * 128/90 + 0.5)

  Prompt pr;
  pr.points = {{30.f, 20.f, 1}, {70.f, 50.f, 0}};
  Prediction multi = p.predict(pr, true, true);
  ASSERT_EQ(multi.masks.shape(), (Shape{3, 60, 90}));
  ASSERT_EQ(multi.low_res_logits.shape(), (Shape{3, 32, 32}));
  ASSERT_EQ(multi.scores.size(), 3u);
  for (int64_t i = 0; i < multi.masks.numel(); ++i)
    ASSERT_EQ(multi.masks.data<uint8_t>()[i], multi.logits.data<float>()[i] > 0.f) << i;
  for (float s : multi.scores) EXPECT_TRUE(std::isfinite(s));

  Prediction single = p.predict(pr, false);
  ASSERT_EQ(single.masks.shape(), (Shape{1, 60, 90}));
  // Multimask output drops the first mask token; single output is exactly that token.
  EXPECT_NE(std::memcmp(single.low_res_logits.raw(), multi.low_res_logits.raw(), single.low_res_logits.nbytes()), 0);
}

TEST(SamPredictor, EmbeddingFileRoundTripGivesIdenticalMasks) {
  auto model = test::small_model();
  SamPredictor a(model), b(model);
  a.set_image(test::random_image(70, 100));
  const std::string path = std::string(VITRT_TEST_TMP) + "/roundtrip.vemb";
  save_embedding(a.embedding(), path);
  b.set_embedding(load_embedding(path));
  EXPECT_TRUE(same(a.embedding().features, b.embedding().features));
  Prompt pr;
  pr.box = Box{5, 10, 60, 80};
  Prediction pa = a.predict(pr), pb = b.predict(pr);
  EXPECT_TRUE(same(pa.masks, pb.masks));
  EXPECT_TRUE(same(pa.low_res_logits, pb.low_res_logits));
}

TEST(SamPredictor, BatchEqualsOneByOne) {
  auto model = test::small_model();
  SamPredictor p(model);
  p.set_image(test::random_image(64, 64));
  std::vector<Prompt> prompts(4);
  prompts[0].points = {{10, 10, 1}};
  prompts[1].points = {{40, 20, 1}};                   // same token count as [0]: one decoder batch
  prompts[2].box = Box{0, 0, 30, 30};
  prompts[3].points = {{5, 50, 1}, {50, 5, 0}};
  prompts[3].box = Box{2, 2, 60, 60};
  std::vector<Prediction> batch = p.predict_batch(prompts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    Prediction one = p.predict(prompts[i]);
    ASSERT_EQ(one.low_res_logits.shape(), batch[i].low_res_logits.shape());
    const float* x = one.low_res_logits.data<float>();
    const float* y = batch[i].low_res_logits.data<float>();
    double err = 0, ref = 0;
    for (int64_t k = 0; k < one.low_res_logits.numel(); ++k) err += (x[k] - y[k]) * (x[k] - y[k]), ref += x[k] * x[k];
    EXPECT_LT(std::sqrt(err / ref), 1e-5) << "prompt " << i;
    for (size_t k = 0; k < one.scores.size(); ++k) EXPECT_NEAR(one.scores[k], batch[i].scores[k], 1e-4);
  }
}

TEST(SamPredictor, BatchOnDeviceStacksTheBatch) {
  // On a CPU model the "device" is the host: row b of each tensor is predict_batch's answer b.
  auto model = test::small_model();
  SamPredictor p(model);
  p.set_image(test::random_image(70, 40, 5));  // 70 wide, 40 high
  std::vector<Prompt> prompts(3);
  prompts[0].points = {{10, 10, 1}};
  prompts[1].box = Box{0, 0, 30, 30};
  prompts[2].points = {{50, 20, 1}, {5, 5, 0}};
  const auto want = p.predict_batch(prompts, true, true);
  const BatchPrediction got = p.predict_batch_on_device(prompts, true, true);
  ASSERT_EQ(got.masks.shape(), (Shape{3, 3, 40, 70}));
  ASSERT_EQ(got.scores.shape(), (Shape{3, 3}));
  const int64_t m4 = sam_config(*model).low_res_size();  // 256 for the real models
  ASSERT_EQ(got.low_res_logits.shape(), (Shape{3, 3, m4, m4}));
  ASSERT_EQ(got.logits.shape(), (Shape{3, 3, 40, 70}));
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t plane = 3 * 40 * 70;
    EXPECT_EQ(std::memcmp(got.masks.data<uint8_t>() + b * plane, want[b].masks.raw(), plane), 0) << b;
    EXPECT_EQ(std::memcmp(got.logits.data<float>() + b * plane, want[b].logits.raw(), plane * 4), 0) << b;
    EXPECT_EQ(std::memcmp(got.low_res_logits.data<float>() + b * 3 * m4 * m4, want[b].low_res_logits.raw(),
                          want[b].low_res_logits.nbytes()), 0) << b;
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(got.scores.data<float>()[b * 3 + k], want[b].scores[k]);
  }
  // Without return_logits no logits are made; no prompts: empty tensors; no image: a clear error.
  EXPECT_FALSE(p.predict_batch_on_device(prompts, false).logits.defined());
  EXPECT_EQ(p.predict_batch_on_device({}).masks.shape(), (Shape{0, 3, 40, 70}));
  SamPredictor unset(model);
  EXPECT_THROW(unset.predict_batch_on_device(prompts), InvalidArgument);
}

TEST(SamPredictor, MultiImageBatchEqualsPerImage) {
  // Three images of different sizes, 2 / 0 / 3 prompts, decoded together vs image by image: with a
  // mask input in the group (the per-prompt dense path), and without (the shared dense path, whose
  // layer 0 keeps one set of keys per image).
  auto model = test::small_model();
  std::vector<ImageEmbedding> embs;
  const int sizes[3][2] = {{64, 64}, {48, 80}, {90, 40}};
  for (int i = 0; i < 3; ++i) {
    SamPredictor p(model);
    p.set_image(test::random_image(sizes[i][0], sizes[i][1], 10 + i));
    embs.push_back(p.embedding());
  }
  std::vector<std::vector<Prompt>> prompts(3);
  prompts[0].resize(2);
  prompts[0][0].points = {{10, 10, 1}};
  prompts[0][1].box = Box{0, 0, 30, 30};
  prompts[2].resize(3);
  prompts[2][0].points = {{20, 5, 1}};
  prompts[2][1].points = {{70, 30, 1}};
  prompts[2][2].points = {{5, 5, 1}};
  for (bool with_mask_input : {true, false}) {
    SCOPED_TRACE(with_mask_input ? "with a mask input" : "shared dense embedding");
    if (with_mask_input) {
      SamPredictor p(model);
      p.set_embedding(embs[0]);
      prompts[2][2].mask_input = p.predict(prompts[0][0], false).low_res_logits;
    } else {
      prompts[2][2].mask_input = Tensor();
    }
    const auto multi = predict_multi_image(*model, embs, prompts);
    ASSERT_EQ(multi.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(multi[i].size(), prompts[i].size());
      if (prompts[i].empty()) continue;
      SamPredictor p(model);
      p.set_embedding(embs[i]);
      const auto single = p.predict_batch(prompts[i]);
      for (size_t j = 0; j < prompts[i].size(); ++j) {
        SCOPED_TRACE("image " + std::to_string(i) + " prompt " + std::to_string(j));
        ASSERT_EQ(multi[i][j].masks.shape(), single[j].masks.shape());
        const float* x = single[j].low_res_logits.data<float>();
        const float* y = multi[i][j].low_res_logits.data<float>();
        double err = 0, ref = 0;
        for (int64_t k = 0; k < single[j].low_res_logits.numel(); ++k)
          err += (x[k] - y[k]) * (x[k] - y[k]), ref += x[k] * x[k];
        EXPECT_LT(std::sqrt(err / ref), 1e-5);
        for (size_t k = 0; k < single[j].scores.size(); ++k) EXPECT_NEAR(multi[i][j].scores[k], single[j].scores[k], 1e-4);
      }
    }
  }
  // Mismatched lists and another model's embedding are refused.
  EXPECT_THROW(predict_multi_image(*model, embs, {prompts[0]}), InvalidArgument);
  auto other = test::small_model(2);
  EXPECT_THROW(predict_multi_image(*other, embs, prompts), InvalidArgument);
}

TEST(SamPredictor, EmbedImagesBatchEqualsOneByOne) {
  // Three images of different sizes in one encoder batch vs set_image one by one.
  auto model = test::small_model();
  const std::vector<Image> images = {test::random_image(64, 64, 21), test::random_image(30, 70, 22),
                                     test::random_image(90, 45, 23)};
  const std::vector<ImageEmbedding> batch = embed_images(*model, images);
  ASSERT_EQ(batch.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    SamPredictor p(model);
    p.set_image(images[i]);
    const ImageEmbedding& one = p.embedding();
    EXPECT_EQ(batch[i].original_height, one.original_height);
    EXPECT_EQ(batch[i].original_width, one.original_width);
    EXPECT_EQ(batch[i].input_height, one.input_height);
    EXPECT_EQ(batch[i].input_width, one.input_width);
    EXPECT_EQ(batch[i].model_fingerprint, one.model_fingerprint);
    ASSERT_EQ(batch[i].features.shape(), one.features.shape());
    const float* x = batch[i].features.data<float>();
    const float* y = one.features.data<float>();
    double err = 0, ref = 0;
    for (int64_t k = 0; k < one.features.numel(); ++k) err += (x[k] - y[k]) * (x[k] - y[k]), ref += y[k] * y[k];
    EXPECT_LT(std::sqrt(err / ref), 1e-5) << "image " << i;
  }
  EXPECT_TRUE(embed_images(*model, {}).empty());
  EXPECT_THROW(embed_images(*model, std::vector<Image>{images[0], Image{}}), ImageError);
}

TEST(SamPredictor, MaskInputChangesTheResult) {
  auto model = test::small_model();
  SamPredictor p(model);
  p.set_image(test::random_image(50, 40));
  Prompt pr;
  pr.points = {{25, 20, 1}};
  Prediction first = p.predict(pr);
  pr.mask_input = first.low_res_logits.slice0(0, 1).clone();
  Prediction second = p.predict(pr);
  EXPECT_NE(std::memcmp(first.low_res_logits.raw(), second.low_res_logits.raw(), first.low_res_logits.nbytes()), 0);
}

TEST(SamPredictor, NoPromptAtAllStillDecodes) {  // the reference allows it (empty sparse tokens)
  auto model = test::small_model();
  SamPredictor p(model);
  p.set_image(test::random_image(40, 40));
  Prediction r = p.predict(Prompt{});
  EXPECT_EQ(r.masks.shape(), (Shape{3, 40, 40}));
}

TEST(MaskDecoder, SharedDenseReturnsTheRequestedMaskPlanes) {
  // forward_shared_dense(first_mask, num_masks) gives planes first .. first + num - 1 of the full
  // result, bit for bit; on the CPU the CUDA-graph cache is never touched.
  const auto model = test::small_model();
  const SamConfig& c = model->config;
  Tensor features = Tensor::empty({1, c.out_chans, c.grid_size(), c.grid_size()});
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < features.numel(); ++i) features.data<float>()[i] = nd(rng);
  const Tensor sparse = amg::point_sparse_tokens(*model, 96, 128, 60, 80, {{5.0, 7.0}, {40.0, 30.0}, {70.0, 2.0}});
  const sam::MaskDecoder& dec = model->mask_decoder;
  Tensor all, iou_all;
  dec.forward_shared_dense(features, model->image_pe, sparse, model->no_mask_dense, all, iou_all);
  const int64_t n = 3, M = all.size(1), m = all.size(2);
  ASSERT_EQ(all.shape(), (Shape{n, 4, m, m}));
  for (auto [first, count] : {std::pair<int64_t, int64_t>{1, 3}, {0, 1}, {2, 2}, {0, 4}}) {
    Tensor part, iou;
    dec.forward_shared_dense(features, model->image_pe, sparse, model->no_mask_dense, part, iou, nullptr, first,
                             count);
    ASSERT_EQ(part.shape(), (Shape{n, count, m, m}));
    EXPECT_TRUE(same(iou, iou_all));
    for (int64_t b = 0; b < n; ++b)
      EXPECT_EQ(std::memcmp(part.data<float>() + b * count * m * m, all.data<float>() + (b * M + first) * m * m,
                            sizeof(float) * count * m * m),
                0)
          << "planes " << first << "+" << count << " of prompt " << b;
  }
  Tensor x, y;
  EXPECT_THROW(dec.forward_shared_dense(features, model->image_pe, sparse, model->no_mask_dense, x, y, nullptr, 3, 2),
               InvalidArgument);
  EXPECT_THROW(dec.forward_shared_dense(features, model->image_pe, sparse, model->no_mask_dense, x, y, nullptr, -1),
               InvalidArgument);
  const sam::DecoderGraphCache::Stats s = dec.graphs->stats();
  EXPECT_EQ(s.eager_runs + s.captures + s.replays, 0);
  EXPECT_EQ(s.entries, 0u);
}

TEST(MaskDecoder, ModelCopiesStartWithTheirOwnGraphCache) {
  // A graph has its model's weight addresses baked in: SamModel::to() (a copy whose weights are
  // then replaced) must not share the cache. VITRT_DECODER_GRAPH=0 is read when a model is made.
  const auto model = test::small_model();
  const auto copy = model->to(Device::CPU, DType::F32);
  EXPECT_NE(&*copy->mask_decoder.graphs, &*model->mask_decoder.graphs);
  EXPECT_TRUE(copy->mask_decoder.graphs->enabled());
  ASSERT_EQ(setenv("VITRT_DECODER_GRAPH", "0", 1), 0);
  const auto off = model->to(Device::CPU, DType::F32);
  ASSERT_EQ(unsetenv("VITRT_DECODER_GRAPH"), 0);
  EXPECT_FALSE(off->mask_decoder.graphs->enabled());
  off->mask_decoder.graphs->set_enabled(true);
  EXPECT_TRUE(off->mask_decoder.graphs->enabled());
}

TEST(SamFlops, MatchesTheReferenceCount) {
  // ANCHORS.md: 972 / 2986 / 5961 GFLOP for vit_b / l / h with padded windows (we count the
  // encoder's GEMMs and attention; the small rest explains the last 0.5%).
  EXPECT_NEAR(sam::encoder_flops(SamConfig::vit_b()) / 1e9, 972, 972 * 0.01);
  EXPECT_NEAR(sam::encoder_flops(SamConfig::vit_h()) / 1e9, 5961, 5961 * 0.01);
}
