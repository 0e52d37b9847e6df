// `vitrt classify`: ImageNet top-k of a torchvision ViT checkpoint on one or more images (text, or
// JSON with the logits for fidelity scripts such as scripts/fidelity_vit.py).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"

namespace vitrt::cli {

namespace {

struct ClassifyArgs {
  std::string checkpoint, classes;
  std::vector<std::string> images;
  std::string device = "auto", dtype = "fp32";
  int topk = 5;
  int num_heads = 0;
  int batch = 32;
  bool quiet = false, json = false, logits = false;
};

// The class list: --classes if given; else Debian's opencv-doc file when that package is
// installed; else the copy made from the same package by scripts/make_vit_fixtures.py, found next to
// this source file (a build-tree fallback: installs should have opencv-doc or pass --classes).
std::string find_class_names_file(const std::string& requested) {
  if (!requested.empty()) return requested;
  if (std::filesystem::exists(kOpencvDocImagenetClasses)) return kOpencvDocImagenetClasses;
  const auto copy = std::filesystem::path(__FILE__).parent_path() / "../../tests/fixtures/vit/imagenet_classes.txt";
  if (std::filesystem::exists(copy)) return std::filesystem::weakly_canonical(copy).string();
  return {};
}

void run_classify(const ClassifyArgs& a) {
  VITRT_CHECK(a.topk >= 1, InvalidArgument, "--topk must be at least 1, got ", a.topk);
  VITRT_CHECK(!a.images.empty(), InvalidArgument, "classify: no --image given");
  VITRT_CHECK(a.batch >= 1, InvalidArgument, "--batch must be at least 1, got ", a.batch);
  StageTimer timer(a.quiet || a.json);
  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;
  auto model = timer.run("loading checkpoint " + a.checkpoint,
                         [&] { return load_vit(a.checkpoint, device, dtype, a.num_heads); });
  const VitConfig& cfg = vit_config(*model);

  const std::string names_path = find_class_names_file(a.classes);
  std::vector<std::string> names;
  if (!names_path.empty()) {
    names = read_class_names(names_path);
    // An explicit list must fit the head; the default ImageNet list is only used for 1000-way heads.
    VITRT_CHECK(!a.classes.empty() || static_cast<int>(names.size()) == 1000 || cfg.num_classes != 1000, IoError,
                "class names file '", names_path, "' has ", names.size(), " names, expected 1000");
    if (a.classes.empty() && cfg.num_classes != 1000) names.clear();
    VITRT_CHECK(names.empty() || static_cast<int>(names.size()) == cfg.num_classes, InvalidArgument,
                "class names file '", names_path, "' has ", names.size(), " names but the model has ",
                cfg.num_classes, " classes");
  }
  if (!a.quiet && !a.json) {
    note("model " + cfg.name + " (" + std::to_string(cfg.image_size) + "px, patch " + std::to_string(cfg.patch_size) +
         ", " + std::to_string(cfg.num_layers) + " layers of " + std::to_string(cfg.hidden_dim) + ", " +
         std::to_string(cfg.num_classes) + " classes) on " + (device == Device::CUDA ? "cuda " : "cpu ") +
         dtype_name(dtype));
    note(names.empty() ? std::string("no class names for a ") + std::to_string(cfg.num_classes) + "-class head"
                       : "class names from " + names_path);
  }
  nlohmann::json results = nlohmann::json::array();
  // Images go through the model in batches of --batch (one forward each): each image's logits are
  // those of a batch of one up to the GEMMs' summation order.
  const int64_t n = static_cast<int64_t>(a.images.size());
  for (int64_t first = 0; first < n; first += a.batch) {
    const int64_t count = std::min<int64_t>(a.batch, n - first);
    std::vector<Image> images;
    for (int64_t i = 0; i < count; ++i) {
      const std::string& path = a.images[first + i];
      images.push_back(timer.run("reading image " + path, [&] { return read_image(path); }));
    }
    Tensor logits;
    timer.run("classifying " + std::to_string(count) + " image" + (count > 1 ? "s" : ""),
              [&] { logits = vit_image_logits(*model, images); });
    for (int64_t i = 0; i < count; ++i) {
      const std::string& path = a.images[first + i];
      const float* row = logits.data<float>() + i * cfg.num_classes;
      const auto top = top_k_softmax(row, cfg.num_classes, a.topk);
      if (a.json) {
        nlohmann::json r = {{"image", path}, {"top", nlohmann::json::array()}};
        for (const auto& [cls, p] : top) {
          nlohmann::json t = {{"class", cls}, {"prob", p}};
          if (!names.empty()) t["name"] = names[cls];
          r["top"].push_back(t);
        }
        if (a.logits) r["logits"] = std::vector<float>(row, row + cfg.num_classes);
        results.push_back(std::move(r));
        continue;
      }
      if (n > 1) std::printf("%s:\n", path.c_str());
      for (size_t k = 0; k < top.size(); ++k) {
        const auto [cls, p] = top[k];
        if (names.empty()) std::printf("%zu. %6.2f%%  [%d]\n", k + 1, 100.0 * p, cls);
        else std::printf("%zu. %6.2f%%  [%d] %s\n", k + 1, 100.0 * p, cls, names[cls].c_str());
      }
    }
  }
  if (a.json) {
    const nlohmann::json out = {{"model", cfg.name},
                                {"device", device == Device::CUDA ? "cuda" : "cpu"},
                                {"dtype", dtype_name(dtype)},
                                {"num_classes", cfg.num_classes},
                                {"results", results}};
    std::printf("%s\n", out.dump().c_str());
  }
}

}  // namespace

void add_classify(CLI::App& app) {
  auto a = std::make_shared<ClassifyArgs>();
  CLI::App* c = app.add_subcommand("classify", "Classify an image with a torchvision ViT checkpoint (vit_b_16, ...).");
  c->footer(
      "Preprocessing is torchvision's ImageNet eval transform: resize the shorter side to 256 (Pillow\n"
      "bilinear), centre crop 224, normalise. Prints the top-k classes with softmax probabilities.\n"
      "Example: vitrt classify --checkpoint vit_b_16-c867db91.pth --image cat.jpg");
  c->add_option("--checkpoint", a->checkpoint, "torchvision VisionTransformer state_dict (.pth or .safetensors)")
      ->required()->check(CLI::ExistingFile);
  c->add_option("--image", a->images, "Input image(s) (PNG or JPEG); repeat, or list several, to classify each")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--topk", a->topk, "How many classes to print")->capture_default_str();
  c->add_option("--classes", a->classes,
                std::string("Class names, one per line (default: ") + kOpencvDocImagenetClasses +
                    " from Debian's opencv-doc, else the copy in tests/fixtures/vit)");
  c->add_option("--num-heads", a->num_heads,
                "Attention heads (default: <checkpoint>.json's num_heads, else the count a vitrt model file "
                "records, else hidden size / 64)");
  c->add_option("--device", a->device, "auto (cuda if present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_flag("-q,--quiet", a->quiet, "Do not print stage timings");
  c->add_option("--batch", a->batch, "Images per forward pass")->capture_default_str();
  c->add_flag("--json", a->json, "Print one JSON object (top-k per image) instead of text");
  c->add_flag("--logits", a->logits, "With --json: include each image's logits");
  c->callback([a] { run_classify(*a); });
}

}  // namespace vitrt::cli
