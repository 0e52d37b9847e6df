// Bad input to the model and predictor: every case a clear exception, never a crash.
#include <gtest/gtest.h>

#include <fstream>

#include "sam_test_util.h"

using namespace vitrt;

namespace {
template <class Exc, class F>
void expect_error(F&& f, const std::string& must_contain) {
  try {
    f();
    FAIL() << "no exception; expected one mentioning '" << must_contain << "'";
  } catch (const Exc& e) {
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
  }
}

struct Fixture : ::testing::Test {
  std::shared_ptr<SamModel> model = test::small_model();
  SamPredictor p{model};
  void SetUp() override { p.set_image(test::random_image(100, 80)); }
};
}  // namespace

using BadPrompt = Fixture;

TEST_F(BadPrompt, PointOutsideTheImage) {
  Prompt pr;
  pr.points = {{101.f, 10.f, 1}};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "outside the 100x80 image");
  pr.points = {{-1.f, 10.f, 1}};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "outside");
}

TEST_F(BadPrompt, NonFiniteAndBadLabels) {
  Prompt pr;
  pr.points = {{NAN, 10.f, 1}};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "non-finite");
  pr.points = {{10.f, 10.f, 7}};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "label 7");
}

TEST_F(BadPrompt, NegativeBoxSize) {
  Prompt pr;
  pr.box = Box{50, 10, 20, 30};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "negative size");
  pr.box = Box{10, 10, 20, 200};
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "outside");
}

TEST_F(BadPrompt, MaskInputOfTheWrongShape) {
  Prompt pr;
  pr.mask_input = Tensor::zeros({1, 64, 64});
  expect_error<InvalidArgument>([&] { p.predict(pr); }, "mask input must be");
}

TEST(BadPredictor, NoImageSet) {
  SamPredictor p(test::small_model());
  expect_error<InvalidArgument>([&] { p.predict(Prompt{}); }, "no image set");
}

TEST(BadPredictor, EmptyImage) {
  SamPredictor p(test::small_model());
  expect_error<ImageError>([&] { p.set_image(Image{}); }, "empty image");
}

TEST(BadEmbedding, FromAnotherModel) {
  SamPredictor a(test::small_model(1)), b(test::small_model(2));
  a.set_image(test::random_image(30, 30));
  expect_error<InvalidArgument>([&] { b.set_embedding(a.embedding()); }, "not by the loaded model");
}

TEST(BadEmbedding, CorruptFiles) {
  const std::string dir = VITRT_TEST_TMP;
  SamPredictor a(test::small_model(1));
  a.set_image(test::random_image(30, 30));
  save_embedding(a.embedding(), dir + "/good.vemb");
  std::ifstream in(dir + "/good.vemb", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir + "/trunc.vemb", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  expect_error<InvalidArgument>([&] { load_embedding(dir + "/trunc.vemb"); }, "truncated");
  std::ofstream(dir + "/junk.vemb", std::ios::binary) << "hello";
  expect_error<InvalidArgument>([&] { load_embedding(dir + "/junk.vemb"); }, "not a vitrt embedding");
  expect_error<IoError>([&] { load_embedding(dir + "/missing.vemb"); }, "cannot open");
}

TEST(BadCheckpoint, MissingExtraAndMisshapedTensors) {
  SamConfig c = test::small_config();
  StateDict sd = sam::random_state_dict(c, 1);
  StateDict missing = sd;
  missing.erase("mask_decoder.iou_token.weight");
  expect_error<CheckpointError>([&] { SamModel::from_state_dict(missing, c); }, "'mask_decoder.iou_token.weight'");
  StateDict extra = sd;
  extra["image_encoder.blocks.9.norm1.weight"] = Tensor::zeros({32});
  expect_error<CheckpointError>([&] { SamModel::from_state_dict(extra, c); }, "image_encoder.blocks.9.norm1.weight");
  StateDict bad = sd;
  bad["image_encoder.blocks.0.attn.qkv.weight"] = Tensor::zeros({96, 31});
  expect_error<CheckpointError>([&] { SamModel::from_state_dict(bad, c); }, "[96, 31], the model expects [96, 32]");
  StateDict ints = sd;
  ints["image_encoder.neck.1.weight"] = Tensor::zeros({32}, DType::I64);
  expect_error<CheckpointError>([&] { SamModel::from_state_dict(ints, c); }, "dtype int64");
}
