// ViT classifier pieces that need no reference model: presets, config inference from a state_dict,
// batching, the crop arithmetic of the preprocessing, top-k, class-name files and `vitrt classify`.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/vit/vit_model.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"
#include "vit_test_util.h"

namespace vitrt {
namespace {

const std::string& kDir = test::kVitFixtures;
VitConfig small_config() { return test::small_vit_config(); }

Image gradient_image(int w, int h) { return vitrt::test::pattern_image(w, h); }

TEST(Vit, PresetsAreTorchvisions) {
  const VitConfig b = VitConfig::vit_b_16();
  EXPECT_EQ(b.num_tokens(), 197);
  EXPECT_EQ(b.hidden_dim, 768);
  EXPECT_EQ(b.mlp_dim, 3072);
  EXPECT_EQ(b.num_layers, 12);
  EXPECT_EQ(VitConfig::preset("vit_l_16").hidden_dim, 1024);
  EXPECT_EQ(VitConfig::preset("vit_l_16").num_layers, 24);
  const VitConfig h = VitConfig::preset("vit_h_14");
  EXPECT_EQ(h.num_tokens(), 16 * 16 + 1);
  EXPECT_EQ(h.mlp_dim, 5120);
  EXPECT_THROW(VitConfig::preset("vit_s_16"), InvalidArgument);
}

TEST(Vit, ConfigFromStateDictShapes) {
  const VitConfig c = small_config();
  const StateDict sd = vit_random_state_dict(c, 7);
  const VitConfig got = vit_config_from_state_dict(sd, 3);
  EXPECT_EQ(got.image_size, 32);
  EXPECT_EQ(got.patch_size, 8);
  EXPECT_EQ(got.hidden_dim, 24);
  EXPECT_EQ(got.num_layers, 2);
  EXPECT_EQ(got.num_heads, 3);
  EXPECT_EQ(got.mlp_dim, 40);
  EXPECT_EQ(got.num_classes, 5);
  EXPECT_EQ(got.name, "custom");
  // Without a head count: 64-wide heads, which 24 does not divide.
  EXPECT_THROW(vit_config_from_state_dict(sd), CheckpointError);
}

TEST(Vit, PresetNameRecognisedFromShapes) {
  // Config inference reads only shapes: uninitialised tensors of vit_b_16's shapes are enough.
  StateDict sd;
  sd["conv_proj.weight"] = Tensor::empty({768, 3, 16, 16});
  sd["encoder.pos_embedding"] = Tensor::empty({1, 197, 768});
  for (int i = 0; i < 12; ++i) sd["encoder.layers.encoder_layer_" + std::to_string(i) + ".ln_1.weight"] = Tensor::empty({768});
  sd["encoder.layers.encoder_layer_0.mlp.0.weight"] = Tensor::empty({3072, 768});
  sd["heads.head.weight"] = Tensor::empty({1000, 768});
  const VitConfig got = vit_config_from_state_dict(sd);
  EXPECT_EQ(got.name, "vit_b_16");
  EXPECT_EQ(got.num_heads, 12);
  EXPECT_EQ(got.image_size, 224);
}

TEST(Vit, BatchEqualsSingleImages) {
  const VitConfig c = small_config();
  auto model = vit_from_state_dict(vit_random_state_dict(c, 11), Device::CPU, DType::F32, c.num_heads);
  const Tensor a = vit_preprocess(gradient_image(50, 40), 36, 32);
  const Tensor b = vit_preprocess(gradient_image(33, 70), 36, 32);
  const Tensor batch = [&] {
    Tensor t = Tensor::empty({2, 32, 32, 3});
    std::copy_n(a.data<float>(), a.numel(), t.data<float>());
    std::copy_n(b.data<float>(), b.numel(), t.data<float>() + a.numel());
    return t;
  }();
  const Tensor la = vit_logits(*model, a), lb = vit_logits(*model, b), lab = vit_logits(*model, batch);
  ASSERT_EQ(lab.shape(), (Shape{2, 5}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(lab.data<float>()[i], la.data<float>()[i], 1e-5f);
    EXPECT_NEAR(lab.data<float>()[5 + i], lb.data<float>()[i], 1e-5f);
  }
  EXPECT_NE(la.data<float>()[0], lb.data<float>()[0]);
}

TEST(Vit, ResizeAndCropSizesAndOffsets) {
  // 256 on the short side, long side truncated: 300x517 -> 256x441; crop offsets round half even.
  const Image im = gradient_image(300, 517);
  const Image crop = vit_resize_and_crop(im, 256, 224);
  EXPECT_EQ(crop.width, 224);
  EXPECT_EQ(crop.height, 224);
  // Already 256 on the short side: no resize, the crop is a plain copy. 341 - 224 = 117 -> 58.5
  // -> 58 (Python's round half to even), 256 - 224 = 32 -> 16.
  const Image exact = gradient_image(256, 341);
  const Image c2 = vit_resize_and_crop(exact, 256, 224);
  for (int y = 0; y < 224; y += 37)
    for (int x = 0; x < 224; x += 29)
      for (int ch = 0; ch < 3; ++ch) ASSERT_EQ(c2.row(y)[x * 3 + ch], exact.row(y + 58)[(x + 16) * 3 + ch]);
  // Half to even both ways: width 257 -> 16.5 -> 16, width 259 -> 17.5 -> 18 (top 16 for height 256).
  const Image w257 = gradient_image(257, 256), w259 = gradient_image(259, 256);
  const Image c3 = vit_resize_and_crop(w257, 256, 224), c4 = vit_resize_and_crop(w259, 256, 224);
  for (int ch = 0; ch < 3; ++ch) {
    EXPECT_EQ(c3.row(0)[ch], w257.row(16)[16 * 3 + ch]);
    EXPECT_EQ(c4.row(0)[ch], w259.row(16)[18 * 3 + ch]);
  }
}

TEST(Vit, NormalisationIsTorchvisions) {
  Image im;
  im.width = im.height = 4;
  im.pixels.assign(4 * 4 * 3, 0);
  for (size_t i = 0; i < im.pixels.size(); i += 3) im.pixels[i] = 255;  // red
  const Tensor x = vit_preprocess(im, 4, 4);
  EXPECT_FLOAT_EQ(x.data<float>()[0], (1.0f - 0.485f) / 0.229f);
  EXPECT_FLOAT_EQ(x.data<float>()[1], (0.0f - 0.456f) / 0.224f);
  EXPECT_FLOAT_EQ(x.data<float>()[2], (0.0f - 0.406f) / 0.225f);
}

TEST(Vit, TopKSoftmax) {
  const float z[5] = {1.f, 3.f, 3.f, -2.f, 0.5f};
  const auto top = top_k_softmax(z, 5, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);  // tie with 2: lower index first
  EXPECT_EQ(top[1].first, 2);
  EXPECT_EQ(top[2].first, 0);
  double sum = 0;
  for (float v : z) sum += std::exp(v);
  EXPECT_NEAR(top[0].second, std::exp(3.0) / sum, 1e-6);
  EXPECT_EQ(top_k_softmax(z, 5, 50).size(), 5u);
  EXPECT_THROW(top_k_softmax(z, 5, 0), InvalidArgument);
}

TEST(Vit, ClassNamesFileFromOpencvDoc) {
  const auto names = read_class_names(kDir + "/imagenet_classes.txt");
  ASSERT_EQ(names.size(), 1000u);
  EXPECT_EQ(names[0], "tench, Tinca tinca");
  EXPECT_EQ(names[999], "toilet tissue, toilet paper, bathroom tissue");
  const std::string crlf = std::string(VITRT_TEST_TMP) + "/vit_names_crlf.txt";
  std::ofstream(crlf) << "a\r\nb, c\r\n\n";
  EXPECT_EQ(read_class_names(crlf), (std::vector<std::string>{"a", "b, c"}));
}

using vitrt::test::CliResult;
using vitrt::test::run_cli;

TEST(Vit, CliClassifyPrintsTop5WithImagenetNames) {
  // vit_tiny_p14 has a 1000-class head: the ImageNet names apply.
  const std::string image = kDir + "/images/landscape_512x384.png";
  auto model = load_vit(kDir + "/vit_tiny_p14.pth");
  const auto top = vit_classify(*model, read_image(image), 5);
  const auto names = read_class_names(kDir + "/imagenet_classes.txt");
  const CliResult r = run_cli("classify --checkpoint " + kDir + "/vit_tiny_p14.pth --image " + image +
                              " --device cpu --classes " + kDir + "/imagenet_classes.txt");
  ASSERT_EQ(r.code, 0) << r.out;
  for (int i = 0; i < 5; ++i) {
    const std::string line = std::to_string(i + 1) + ". ";
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[" + std::to_string(top[i].first) + "] " + names[top[i].first]), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(r.out.find("6. "), std::string::npos);
  // Default class list: the installed opencv-doc file, else the fixture copy; either is named.
  const CliResult d = run_cli("classify --checkpoint " + kDir + "/vit_tiny_p14.pth --image " + image +
                              " --device cpu --topk 2");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("class names from "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("[" + std::to_string(top[0].first) + "] " + names[top[0].first]), std::string::npos)
      << d.out;
  EXPECT_EQ(d.out.find("3. "), std::string::npos);
}

TEST(Vit, CliClassifyJsonCoversEveryImageWithLogits) {
  // Three images in one run, --json --logits, in batches of 2 (a full and a partial batch) and of 1:
  // one result per image, in order, with the logits of the library's own single-image pipeline (up
  // to the GEMMs' summation order: 1e-5) and the same top-k. --batch 0 is refused.
  const std::string paths[] = {kDir + "/images/landscape_512x384.png", kDir + "/images/small_150x97.png",
                               kDir + "/images/wide_800x241.png"};
  auto model = load_vit(kDir + "/vit_tiny.pth");
  for (const char* batch : {"2", "1"}) {
    SCOPED_TRACE(std::string("--batch ") + batch);
    const CliResult r = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + paths[0] + " --image " +
                                paths[1] + " " + paths[2] + " --device cpu --topk 3 --json --logits --batch " + batch);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto brace = r.out.find('{');
    ASSERT_NE(brace, std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out.substr(brace));
    ASSERT_EQ(j["results"].size(), 3u);
    EXPECT_EQ(j["num_classes"].get<int>(), 10);
    for (int i = 0; i < 3; ++i) {
      const auto& res = j["results"][i];
      EXPECT_EQ(res["image"].get<std::string>(), paths[i]);
      const Tensor logits = vit_logits(*model, vit_preprocess(read_image(paths[i]), 256, 224));
      const auto got = res["logits"].get<std::vector<float>>();
      ASSERT_EQ(got.size(), 10u);
      for (int c = 0; c < 10; ++c)
        EXPECT_NEAR(got[c], logits.data<float>()[c], 1e-5 * (1 + std::abs(logits.data<float>()[c])))
            << "image " << i << " class " << c;
      const auto top = vit_classify(*model, read_image(paths[i]), 3);
      ASSERT_EQ(res["top"].size(), 3u);
      for (int k = 0; k < 3; ++k) EXPECT_EQ(res["top"][k]["class"].get<int>(), top[k].first);
    }
  }
  const CliResult bad = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + paths[0] +
                                " --device cpu --batch 0");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--batch"), std::string::npos) << bad.out;
}

// Many images: a directory and a list, read and preprocessed on a pool of threads, results streamed
// as JSON lines in input order (--out), an unreadable image skipped and reported under --keep-going
// (exit code still 1), and fatal without it.
TEST(Vit, CliClassifyStreamsJsonLinesForFoldersAndLists) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(VITRT_TEST_TMP) / "classify_bulk";
  fs::remove_all(dir);
  fs::create_directories(dir / "photos");
  const std::vector<std::string> names = {"landscape_512x384.png", "small_150x97.png", "square_224.png",
                                          "wide_800x241.png"};
  for (const std::string& name : names) fs::copy_file(kDir + "/images/" + name, dir / "photos" / name);
  { std::ofstream(dir / "photos" / "broken.png") << "not a png"; }
  { std::ofstream(dir / "list.txt") << "# two of them\nphotos/square_224.png\n\nphotos/small_150x97.png\n"; }
  auto model = load_vit(kDir + "/vit_tiny.pth");
  auto read_lines = [](const fs::path& p) {
    std::vector<nlohmann::json> out;
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  // One reader and one model thread in batches of 2; three readers and two model threads in
  // batches of 1 (batches may finish out of order: the lines must not).
  for (const char* opts : {"--threads 1 --workers 1 --batch 2", "--threads 3 --workers 2 --batch 1"}) {
    SCOPED_TRACE(opts);
    const fs::path out = dir / (std::string("labels_") + opts[10] + ".jsonl");
    const CliResult r = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " + (dir / "photos").string() +
                                " --image " + (dir / "list.txt").string() + " --device cpu --topk 2 --logits " + opts +
                                " --keep-going --out " + out.string());
    EXPECT_EQ(r.code, 1) << r.out;  // one image skipped
    EXPECT_NE(r.out.find("skipped"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("classified 6 images into"), std::string::npos) << r.out;
    const std::vector<nlohmann::json> lines = read_lines(out);
    // The directory sorted (broken.png first), then the list's two.
    const std::vector<std::string> want = {"broken.png", names[0], names[1], names[2], names[3], "square_224.png",
                                           "small_150x97.png"};
    ASSERT_EQ(lines.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const std::string image = lines[i]["image"].get<std::string>();
      EXPECT_EQ(fs::path(image).filename().string(), want[i]) << i;
      if (i == 0) {
        EXPECT_TRUE(lines[i].contains("error")) << lines[i].dump();
        continue;
      }
      const Tensor logits = vit_logits(*model, vit_preprocess(read_image(image), 256, 224));
      const auto got = lines[i]["logits"].get<std::vector<float>>();
      ASSERT_EQ(got.size(), 10u);
      for (int c = 0; c < 10; ++c)
        EXPECT_NEAR(got[c], logits.data<float>()[c], 1e-5 * (1 + std::abs(logits.data<float>()[c]))) << image;
      EXPECT_EQ(lines[i]["top"].size(), 2u);
    }
  }
  // Without --keep-going the unreadable image stops the run and is named.
  const CliResult strict = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " +
                                   (dir / "photos").string() + " --device cpu -q --out " + (dir / "strict.jsonl").string());
  EXPECT_EQ(strict.code, 1) << strict.out;
  EXPECT_NE(strict.out.find("broken.png"), std::string::npos) << strict.out;
  // A missing input is refused before any work.
  const CliResult missing = run_cli("classify --checkpoint " + kDir + "/vit_tiny.pth --image " +
                                    (dir / "nope").string() + " --device cpu");
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("does not exist"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace vitrt
