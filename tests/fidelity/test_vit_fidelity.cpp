// ViT classifier against torchvision's own VisionTransformer and eval transforms
// (scripts/make_vit_fixtures.py): the 8-bit centre crop and the normalised float32 input must be
// identical bit for bit, the fp32 logits within 1e-4 relative (Frobenius), the top-1 the same.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/vit/vit_model.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"

namespace vitrt {
namespace {

const std::string kDir = std::string(VITRT_FIXTURES) + "/vit";

std::string fnv1a64_hex(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json golden() {
  std::ifstream in(kDir + "/golden.json");
  EXPECT_TRUE(in.good()) << "missing " << kDir << "/golden.json (run scripts/make_vit_fixtures.py)";
  return nlohmann::json::parse(in);
}

TEST(VitFidelity, ConfigFromCheckpointMatchesTorchvisionModel) {
  const nlohmann::json g = golden();
  for (const auto& [name, cfg] : g["models"].items()) {
    auto model = load_vit(kDir + "/" + name + ".pth");  // heads from the .pth.json sidecar
    const VitConfig& c = vit_config(*model);
    EXPECT_EQ(c.image_size, cfg["image_size"].get<int>()) << name;
    EXPECT_EQ(c.patch_size, cfg["patch_size"].get<int>()) << name;
    EXPECT_EQ(c.hidden_dim, cfg["hidden_dim"].get<int>()) << name;
    EXPECT_EQ(c.num_layers, cfg["num_layers"].get<int>()) << name;
    EXPECT_EQ(c.num_heads, cfg["num_heads"].get<int>()) << name;
    EXPECT_EQ(c.mlp_dim, cfg["mlp_dim"].get<int>()) << name;
    EXPECT_EQ(c.num_classes, cfg["num_classes"].get<int>()) << name;
  }
}

TEST(VitFidelity, PreprocessingAndLogitsMatchTorchvision) {
  const nlohmann::json g = golden();
  int cases = 0;
  double worst_rel = 0;
  for (const auto& [mname, mcfg] : g["models"].items()) {
    auto model = load_vit(kDir + "/" + mname + ".pth");
    for (const auto& [iname, entry] : g["images"].items()) {
      SCOPED_TRACE(mname + " on " + iname);
      const nlohmann::json& want = entry["models"][mname];
      const Image image = read_image(kDir + "/images/" + iname + ".png");
      ASSERT_EQ(image.width, entry["width"].get<int>());
      ASSERT_EQ(image.height, entry["height"].get<int>());
      const int resize = want["resize"].get<int>(), crop = want["crop"].get<int>();
      ASSERT_EQ(resize, vit_resize_size(crop));

      const Image cropped = vit_resize_and_crop(image, resize, crop);
      EXPECT_EQ(fnv1a64_hex(cropped.pixels.data(), cropped.pixels.size()), want["crop_fnv1a64"].get<std::string>())
          << "Resize + CenterCrop differ from torchvision on a PIL image";

      const Tensor x = vit_preprocess(image, resize, crop);
      ASSERT_EQ(x.shape(), (Shape{1, crop, crop, 3}));
      EXPECT_EQ(fnv1a64_hex(x.raw(), x.nbytes()), want["input_f32_nhwc_fnv1a64"].get<std::string>())
          << "ToTensor + Normalize differ from torchvision";
      const auto first = want["input_first"].get<std::vector<float>>();
      for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(x.data<float>()[i], first[i]) << i;

      const Tensor logits = vit_logits(*model, x);
      const auto ref = want["logits"].get<std::vector<double>>();
      ASSERT_EQ(logits.shape(), (Shape{1, static_cast<int64_t>(ref.size())}));
      double diff2 = 0, ref2 = 0;
      size_t best = 0, ref_best = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = logits.data<float>()[i] - ref[i];
        diff2 += d * d;
        ref2 += ref[i] * ref[i];
        if (logits.data<float>()[i] > logits.data<float>()[best]) best = i;
        if (ref[i] > ref[ref_best]) ref_best = i;
      }
      const double rel = std::sqrt(diff2 / ref2);
      EXPECT_LT(rel, 1e-4) << "logits relative Frobenius error";
      worst_rel = std::max(worst_rel, rel);
      EXPECT_EQ(best, ref_best);
      // vit_classify is the same pipeline end to end.
      const auto top = vit_classify(*model, image, 3);
      ASSERT_EQ(top.size(), 3u);
      EXPECT_EQ(static_cast<size_t>(top[0].first), ref_best);
      ++cases;
    }
  }
  EXPECT_GE(cases, 12);
  std::printf("%d cases, worst logits relative error %.3g\n", cases, worst_rel);
}

}  // namespace
}  // namespace vitrt
