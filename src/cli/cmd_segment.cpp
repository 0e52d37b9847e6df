// `vitrt segment` (`vitrt embed` is cmd_embed.cpp).
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/npy.h"
#include "io/overlay.h"
#include "io/rle.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt::cli {

namespace {

std::vector<float> parse_numbers(const std::string& s, const char* what, size_t min_n, size_t max_n) {
  std::vector<float> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stof(item, &used));
      VITRT_CHECK(used == item.size(), InvalidArgument, "");
    } catch (const std::exception&) {
      throw InvalidArgument(detail::concat("cannot read ", what, " '", s, "': '", item, "' is not a number"));
    }
  }
  VITRT_CHECK(v.size() >= min_n && v.size() <= max_n, InvalidArgument, what, " '", s, "' must have ",
              min_n == max_n ? std::to_string(min_n) : std::to_string(min_n) + " or " + std::to_string(max_n),
              " comma-separated numbers");
  return v;
}

struct SegmentArgs {
  std::string checkpoint, config, image, embedding, mask_input, out;
  std::vector<std::string> points, boxes;
  std::string device = "auto", dtype = "fp32", decoder_dtype;
  bool single_mask = false, logits = false, quiet = false;
};

void run_segment(const SegmentArgs& a) {
  StageTimer timer(a.quiet);
  Image image = timer.run("reading image " + a.image, [&] { return read_image(a.image); });
  if (!a.quiet) note("image " + std::to_string(image.width) + "x" + std::to_string(image.height));

  Prompt prompt;
  for (const std::string& p : a.points) {
    auto v = parse_numbers(p, "point", 2, 3);
    VITRT_CHECK(v.size() == 2 || v[2] == 0 || v[2] == 1 || v[2] == -1, InvalidArgument, "point '", p,
                "': the label must be 1 (foreground), 0 (background) or -1");
    prompt.points.push_back({v[0], v[1], v.size() == 3 ? static_cast<int>(v[2]) : 1});
  }
  std::vector<Prompt> prompts;
  for (const std::string& b : a.boxes) {
    auto v = parse_numbers(b, "box", 4, 4);
    Prompt p = prompt;
    p.box = Box{v[0], v[1], v[2], v[3]};
    prompts.push_back(p);
  }
  if (!a.mask_input.empty()) {
    prompt.mask_input = timer.run("reading mask input " + a.mask_input, [&] { return read_npy_f32(a.mask_input); });
    for (Prompt& p : prompts) p.mask_input = prompt.mask_input;
  }
  if (prompts.empty()) prompts.push_back(prompt);

  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;
  auto model = timer.run("loading checkpoint " + a.checkpoint,
                         [&] { return load_sam(a.checkpoint, a.config, device, dtype, parse_decoder_dtype(a.decoder_dtype, device)); });
  if (!a.quiet)
    note("model " + sam_config(*model).name + " (" + sam_fingerprint(*model) + ") on " +
         (device == Device::CUDA ? "cuda " : "cpu ") + dtype_name(dtype));
  SamPredictor predictor(model);
  if (!a.embedding.empty()) {
    ImageEmbedding e = timer.run("loading embedding " + a.embedding, [&] { return load_embedding(a.embedding); });
    VITRT_CHECK(e.original_height == image.height && e.original_width == image.width, InvalidArgument,
                "embedding '", a.embedding, "' was made from a ", e.original_width, "x", e.original_height,
                " image, not this ", image.width, "x", image.height, " one");
    predictor.set_embedding(std::move(e));
  } else {
    timer.run("encoding image", [&] { predictor.set_image(image); });
  }
  std::vector<Prediction> preds =
      timer.run("decoding " + std::to_string(prompts.size()) + " prompt set(s)",
                [&] { return predictor.predict_batch(prompts, !a.single_mask, a.logits); });

  std::filesystem::create_directories(a.out);
  nlohmann::json result = {{"image", a.image}, {"width", image.width}, {"height", image.height},
                           {"checkpoint", a.checkpoint}, {"model", sam_fingerprint(*model)},
                           {"multimask", !a.single_mask}};
  std::vector<const uint8_t*> overlay_masks_list;
  nlohmann::json masks = nlohmann::json::array();
  timer.run("writing results to " + a.out, [&] {
    const size_t plane = static_cast<size_t>(image.width) * image.height;
    for (size_t pi = 0; pi < preds.size(); ++pi) {
      const Prediction& pr = preds[pi];
      const int64_t K = pr.masks.size(0);
      size_t best = 0;
      for (int64_t k = 0; k < K; ++k) {
        if (pr.scores[k] > pr.scores[best]) best = k;
        const uint8_t* m = pr.masks.data<uint8_t>() + k * plane;
        const std::string stem = detail::concat("mask_", pi, "_", k);
        write_png((std::filesystem::path(a.out) / (stem + ".png")).string(), mask_to_image(m, image.width, image.height));
        write_npy((std::filesystem::path(a.out) / (stem + "_low_res_logits.npy")).string(),
                  pr.low_res_logits.slice0(k, k + 1));
        if (a.logits)
          write_npy((std::filesystem::path(a.out) / (stem + "_logits.npy")).string(), pr.logits.slice0(k, k + 1));
        auto counts = rle_counts(m, image.height, image.width);
        auto bbox = mask_bbox_xywh(m, image.height, image.width);
        int64_t area = 0;
        for (size_t i = 0; i < plane; ++i) area += m[i];
        masks.push_back({{"prompt", pi}, {"index", k}, {"score", pr.scores[k]}, {"area", area},
                         {"bbox", bbox}, {"png", stem + ".png"}, {"low_res_logits", stem + "_low_res_logits.npy"},
                         {"segmentation", {{"size", {image.height, image.width}}, {"counts", rle_to_string(counts)}}}});
      }
      overlay_masks_list.push_back(pr.masks.data<uint8_t>() + best * plane);
      result["best"].push_back(detail::concat("mask_", pi, "_", best));
    }
    result["masks"] = masks;
    write_png((std::filesystem::path(a.out) / "overlay.png").string(), overlay_masks(image, overlay_masks_list));
  });
  nlohmann::json t;
  for (const auto& [name, ms] : timer.stages()) t.push_back({{"stage", name}, {"ms", ms}});
  result["timings"] = t;
  std::ofstream((std::filesystem::path(a.out) / "result.json").string()) << result.dump(2) << "\n";
  for (const auto& m : masks)
    std::printf("%s  score %.4f  area %lld  bbox [%g, %g, %g, %g]\n", m["png"].get<std::string>().c_str(),
                m["score"].get<double>(), static_cast<long long>(m["area"].get<int64_t>()), m["bbox"][0].get<double>(),
                m["bbox"][1].get<double>(), m["bbox"][2].get<double>(), m["bbox"][3].get<double>());
  std::printf("wrote %zu mask(s), overlay.png and result.json to %s\n", masks.size(), a.out.c_str());
}

}  // namespace

void add_segment(CLI::App& app) {
  auto a = std::make_shared<SegmentArgs>();
  CLI::App* c = app.add_subcommand("segment", "Segment an image from point, box and mask prompts.");
  c->footer(
      "Writes to --out: mask_P_K.png (0/255) for prompt set P and mask K, mask_P_K_low_res_logits.npy\n"
      "(float32 [1, 256, 256], usable as --mask-input in the next call), overlay.png (the best mask of each\n"
      "prompt set over the image) and result.json (scores, XYWH boxes, areas, COCO RLE, timings).\n"
      "Coordinates are pixels of the original image. Several --box give one prompt set each, decoded\n"
      "in one batch; --point and --mask-input apply to every set.\n"
      "Example: vitrt segment --checkpoint sam_vit_b_01ec64.pth --image cat.jpg --point 200,150 --out out/");
  add_sam_model_options(c, a->checkpoint, a->config);
  c->add_option("--image", a->image, "Input image (PNG or JPEG)")->required()->check(CLI::ExistingFile);
  c->add_option("--point", a->points, "Point prompt x,y[,label]; label 1 = foreground (default), 0 = background; repeatable");
  c->add_option("--box", a->boxes, "Box prompt x0,y0,x1,y1; repeat for several boxes (one prompt set each)");
  c->add_option("--mask-input", a->mask_input, "Low-res logits (.npy float32 [1,256,256]) from an earlier result")
      ->check(CLI::ExistingFile);
  c->add_option("--embedding", a->embedding, "Reuse an embedding file from `vitrt embed` instead of encoding the image")
      ->check(CLI::ExistingFile);
  c->add_option("--device", a->device, "auto (cuda if present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kDecoderDtypeHelp);
  c->add_flag("--single-mask", a->single_mask, "Return one mask per prompt set instead of three");
  c->add_flag("--logits", a->logits, "Also write the full-resolution logits as mask_P_K_logits.npy");
  c->add_option("--out", a->out, "Output directory (created if missing)")->required();
  c->add_flag("-q,--quiet", a->quiet, "Do not print stage timings");
  c->callback([a] { run_segment(*a); });
}

}  // namespace vitrt::cli
