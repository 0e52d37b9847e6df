// Broken ViT checkpoints, images and class lists: each fails with the right exception type (or a
// non-zero exit of `vitrt classify`) and a message that names what is wrong.
#include <gtest/gtest.h>

#include "error_test_util.h"
#include "cli_test_util.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <functional>

#include "models/vit/vit_model.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"
#include "vit_test_util.h"

namespace vitrt {
namespace {

using test::expect_error;

const std::string& kDir = test::kVitFixtures;
VitConfig small_config() { return test::small_vit_config(); }


void load(const StateDict& sd) { vit_from_state_dict(sd, Device::CPU, DType::F32, 3); }

TEST(BadVit, MissingTensorIsNamed) {
  StateDict sd = vit_random_state_dict(small_config(), 1);
  sd.erase("encoder.layers.encoder_layer_1.self_attention.out_proj.weight");
  expect_error<CheckpointError>([&] { load(sd); },
                                {"missing", "encoder.layers.encoder_layer_1.self_attention.out_proj.weight"});
  StateDict no_head = vit_random_state_dict(small_config(), 1);
  no_head.erase("heads.head.weight");
  expect_error<CheckpointError>([&] { load(no_head); }, {"heads.head.weight", "missing"});
}

TEST(BadVit, WrongShapeIsNamedWithBothShapes) {
  StateDict sd = vit_random_state_dict(small_config(), 1);
  sd["encoder.layers.encoder_layer_0.mlp.3.bias"] = Tensor::zeros({23});
  expect_error<CheckpointError>([&] { load(sd); }, {"encoder.layers.encoder_layer_0.mlp.3.bias", "[23]", "[24]"});
  StateDict qkv = vit_random_state_dict(small_config(), 1);
  qkv["encoder.layers.encoder_layer_1.self_attention.in_proj_weight"] = Tensor::zeros({48, 24});
  expect_error<CheckpointError>([&] { load(qkv); }, {"in_proj_weight", "[48, 24]", "[72, 24]"});
  StateDict pos = vit_random_state_dict(small_config(), 1);
  pos["encoder.pos_embedding"] = Tensor::zeros({1, 16, 24});  // 15 patches: no square grid
  expect_error<CheckpointError>([&] { load(pos); }, {"encoder.pos_embedding", "square grid"});
}

TEST(BadVit, UnexpectedAndUnsupportedTensors) {
  StateDict sd = vit_random_state_dict(small_config(), 1);
  sd["encoder.extra_norm.weight"] = Tensor::zeros({24});
  expect_error<CheckpointError>([&] { load(sd); }, {"unexpected", "encoder.extra_norm.weight"});
  StateDict pre = vit_random_state_dict(small_config(), 1);
  pre["heads.pre_logits.weight"] = Tensor::zeros({24, 24});
  expect_error<CheckpointError>([&] { load(pre); }, {"pre_logits", "not support"});
  StateDict gap = vit_random_state_dict(small_config(), 1);
  for (const char* k : {"ln_1.weight", "ln_1.bias"}) {
    gap[std::string("encoder.layers.encoder_layer_5.") + k] = gap["encoder.layers.encoder_layer_1." + std::string(k)];
  }
  expect_error<CheckpointError>([&] { load(gap); }, {"numbered", "encoder_layer_5"});
}

TEST(BadVit, NotAVitCheckpoint) {
  expect_error<CheckpointError>([] { load_vit(std::string(VITRT_FIXTURES) + "/sam/tiny1024.pth"); },
                                {"not a torchvision VisionTransformer", "conv_proj.weight"});
  expect_error<CheckpointError>([] { load(StateDict{}); }, {"not a torchvision VisionTransformer"});
}

TEST(BadVit, HeadCountThatDoesNotSplitTheWidth) {
  const StateDict sd = vit_random_state_dict(small_config(), 1);
  expect_error<CheckpointError>([&] { vit_from_state_dict(sd, Device::CPU, DType::F32, 5); },
                                {"hidden size 24", "5 attention heads"});
  expect_error<CheckpointError>([&] { vit_from_state_dict(sd); }, {"hidden size 24", "give the head count"});
}

TEST(BadVit, EmptyAndMalformedImages) {
  Image empty;
  expect_error<ImageError>([&] { vit_preprocess(empty); }, {"empty image"});
  Image short_buffer;
  short_buffer.width = 10;
  short_buffer.height = 10;
  short_buffer.pixels.resize(299);
  expect_error<ImageError>([&] { vit_preprocess(short_buffer); }, {"10x10x3", "299 bytes"});
  Image gray;
  gray.width = gray.height = 10;
  gray.channels = 1;
  gray.pixels.resize(100);
  expect_error<ImageError>([&] { vit_preprocess(gray); }, {"RGB"});
  Image ok;
  ok.width = ok.height = 10;
  ok.pixels.resize(300);
  expect_error<InvalidArgument>([&] { vit_preprocess(ok, 200, 224); }, {"crop (224)", "resize (200)"});
}

TEST(BadVit, WrongInputShapeAndTopk) {
  const VitConfig c = small_config();
  auto model = vit_from_state_dict(vit_random_state_dict(c, 1), Device::CPU, DType::F32, 3);
  expect_error<InvalidArgument>([&] { vit_logits(*model, Tensor::zeros({1, 224, 224, 3})); },
                                {"[B, 32, 32, 3]", "[1, 224, 224, 3]"});
  Image im;
  im.width = im.height = 40;
  im.pixels.assign(40 * 40 * 3, 128);
  expect_error<InvalidArgument>([&] { vit_classify(*model, im, 0); }, {"topk"});
  expect_error<InvalidArgument>([&] { model->to(Device::CPU, DType::BF16); }, {"float32 only"});
}

TEST(BadVit, ClassNamesFileMissing) {
  expect_error<IoError>([] { read_class_names(kDir + "/no_such_classes.txt"); }, {"no_such_classes.txt"});
}

using vitrt::test::CliResult;
using vitrt::test::run_cli;

TEST(BadVit, CliRejectsWrongClassCountAndBadFiles) {
  const std::string image = kDir + "/images/square_224.png";
  // vit_tiny has 10 classes; the ImageNet list has 1000.
  CliResult r = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + image +
                        " --device cpu --classes " + kDir + "/imagenet_classes.txt");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("has 1000 names but the model has 10 classes"), std::string::npos) << r.out;
  const std::string short_list = std::string(VITRT_TEST_TMP) + "/vit_999_classes.txt";
  {
    std::ofstream out(short_list);
    for (int i = 0; i < 999; ++i) out << "class " << i << "\n";
  }
  r = run_cli("classify --checkpoint " + kDir + "/vit_tiny_p14.pth --image " + image + " --device cpu --classes " +
              short_list);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("has 999 names but the model has 1000 classes"), std::string::npos) << r.out;
  // A SAM checkpoint is not a ViT classifier.
  r = run_cli("classify --checkpoint " + std::string(VITRT_FIXTURES) + "/sam/tiny1024.pth --image " + image +
              " --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("not a torchvision VisionTransformer"), std::string::npos) << r.out;
  // An image that is not an image.
  r = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + kDir + "/vit_tiny.pth.json --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  r = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + image + " --device cpu --topk 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--topk"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vitrt
