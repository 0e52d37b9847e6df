// `vitrt classify`: ImageNet top-k of a torchvision ViT checkpoint (or a vitrt model file) on one
// image or millions: text, one JSON object (with the logits for fidelity scripts such as
// scripts/fidelity_vit.py), or JSON lines written as results come (--out). Images are read and
// preprocessed (torchvision's eval transform) by a pool of threads while the previous batch runs
// through the model; with --keep-going an unreadable image is reported and skipped.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bulk_pipeline.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/image_inputs.h"
#include "vitrt/image.h"
#include "vitrt/vit.h"

namespace vitrt::cli {

namespace {

struct ClassifyArgs {
  std::string checkpoint, classes, out;
  std::vector<std::string> images;
  std::string device = "auto", dtype = "fp32";
  int topk = 5;
  int num_heads = 0;
  int batch = 32;
  int threads = 0;  // 0: default_reader_threads()
  int workers = 1;
  bool quiet = false, json = false, logits = false, keep_going = false;
};

void run_classify(const ClassifyArgs& a) {
  VITRT_CHECK(a.topk >= 1, InvalidArgument, "--topk must be at least 1, got ", a.topk);
  VITRT_CHECK(!a.images.empty(), InvalidArgument, "classify: no --image given");
  VITRT_CHECK(a.threads >= 0, InvalidArgument, "--threads must be at least 1, got ", a.threads);
  VITRT_CHECK(a.workers >= 1 && a.workers <= 8, InvalidArgument, "--workers must be 1 to 8, got ", a.workers);
  VITRT_CHECK(a.batch >= 1, InvalidArgument, "--batch must be at least 1, got ", a.batch);
  StageTimer timer(a.quiet || a.json);
  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;
  auto model = timer.run("loading checkpoint " + a.checkpoint,
                         [&] { return load_vit(a.checkpoint, device, dtype, a.num_heads); });
  const VitConfig& cfg = vit_config(*model);

  std::string names_path;
  const std::vector<std::string> names = vit_class_names(a.classes, cfg.num_classes, &names_path);
  if (!a.quiet && !a.json) {
    note("model " + cfg.name + " (" + std::to_string(cfg.image_size) + "px, patch " + std::to_string(cfg.patch_size) +
         ", " + std::to_string(cfg.num_layers) + " layers of " + std::to_string(cfg.hidden_dim) + ", " +
         std::to_string(cfg.num_classes) + " classes) on " + (device == Device::CUDA ? "cuda " : "cpu ") +
         dtype_name(dtype));
    note(names.empty() ? std::string("no class names for a ") + std::to_string(cfg.num_classes) + "-class head"
                       : "class names from " + names_path);
  }
  std::vector<std::string> inputs;
  for (const std::string& arg : a.images) {
    const std::vector<std::string> found = collect_images(arg);
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  const size_t n = inputs.size(), batch = static_cast<size_t>(a.batch), batches = (n + batch - 1) / batch;
  const int threads = a.threads > 0 ? a.threads : default_reader_threads();
  const int workers = a.workers;
  std::ofstream lines;
  if (!a.out.empty()) {
    lines.open(a.out, std::ios::trunc);
    VITRT_CHECK(lines.good(), IoError, "cannot write '", a.out, "'");
  }
  if (!a.quiet && !a.json && n > 1)
    note(std::to_string(n) + " images, batches of " + std::to_string(batch) + ", " + std::to_string(threads) +
         " reader thread" + (threads > 1 ? "s" : ""));

  // One result per input, in input order: top-k (and logits), or why the image could not be read.
  auto result_json = [&](const std::string& path, const float* row) {
    nlohmann::json r = {{"image", path}, {"top", nlohmann::json::array()}};
    for (const auto& [cls, p] : top_k_softmax(row, cfg.num_classes, a.topk)) {
      nlohmann::json t = {{"class", cls}, {"prob", p}};
      if (!names.empty()) t["name"] = names[cls];
      r["top"].push_back(t);
    }
    if (a.logits) r["logits"] = std::vector<float>(row, row + cfg.num_classes);
    return r;
  };
  nlohmann::json results = nlohmann::json::array();  // --json without --out
  size_t classified = 0;
  std::vector<std::string> skipped;
  auto emit = [&](const std::string& path, const float* row, const std::string& error) {
    if (!error.empty()) {
      skipped.push_back(path);
      std::fprintf(stderr, "[vitrt] skipped %s: %s\n", path.c_str(), error.c_str());
      if (lines.is_open()) lines << nlohmann::json{{"image", path}, {"error", error}}.dump() << "\n";
      else if (a.json) results.push_back({{"image", path}, {"error", error}});
      return;
    }
    ++classified;
    if (lines.is_open()) {
      lines << result_json(path, row).dump() << "\n";
    } else if (a.json) {
      results.push_back(result_json(path, row));
    } else {
      if (n > 1) std::printf("%s:\n", path.c_str());
      const auto top = top_k_softmax(row, cfg.num_classes, a.topk);
      for (size_t k = 0; k < top.size(); ++k) {
        const auto [cls, p] = top[k];
        if (names.empty()) std::printf("%zu. %6.2f%%  [%d]\n", k + 1, 100.0 * p, cls);
        else std::printf("%zu. %6.2f%%  [%d] %s\n", k + 1, 100.0 * p, cls, names[cls].c_str());
      }
    }
  };

  // Three stages joined by short queues: a reader thread decodes and preprocesses each batch on
  // `threads` threads (the Pillow-exact resize of a photo costs more than its share of a forward),
  // `workers` threads run the model (below), this thread writes the results in input order. The
  // first error anywhere stops every stage and is reported.
  const int crop = cfg.image_size, resize = vit_resize_size(crop);
  struct Batch {
    size_t first = 0;
    Tensor pixels;                    // [images read, crop, crop, 3]
    std::vector<int64_t> row;         // per input of the batch: its row of pixels, or -1
    std::vector<std::string> errors;  // per input of the batch: why it was not read
  };
  BoundedQueue<Batch> prepared(2);
  std::exception_ptr failure;
  std::mutex mu;
  std::atomic<int64_t> read_us{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    try {
      for (size_t b = 0; b < batches; ++b) {
        const size_t first = b * batch, count = std::min(batch, n - first);
        const auto r0 = std::chrono::steady_clock::now();
        ReadBatch<Tensor> d = read_batch<Tensor>(inputs, first, count, threads, [&](const std::string& path) {
          return vit_preprocess(read_image(path), resize, crop);
        });
        Batch out;
        out.first = first;
        out.errors = std::move(d.errors);
        int64_t ok = 0;
        for (size_t i = 0; i < count; ++i) {
          // (the image readers' messages name the file; the preprocessing's may not)
          const std::string& why = out.errors[i];
          VITRT_CHECK(d.items[i] || a.keep_going, ImageError,
                      why.find(inputs[first + i]) != std::string::npos ? why : inputs[first + i] + ": " + why);
          out.row.push_back(d.items[i] ? ok++ : -1);
        }
        const int64_t per_image = int64_t{crop} * crop * 3;
        out.pixels = Tensor::empty({ok, crop, crop, 3});
        for (size_t i = 0; i < count; ++i)
          if (d.items[i]) std::copy_n(d.items[i]->data<float>(), per_image, out.pixels.data<float>() + out.row[i] * per_image);
        read_us += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - r0).count();
        if (!prepared.push(std::move(out))) return;  // aborted
      }
      prepared.close();
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
      prepared.abort();
    }
  });
  // `workers` threads run the model (each on its own CUDA stream, as `embed`'s encoders: one's
  // uploads overlap the other's forward); this thread writes the results in input order.
  struct Done {
    Batch batch;
    Tensor logits;  // [images read, classes], host float32
  };
  BoundedQueue<Done> done(2 + static_cast<size_t>(workers));
  std::atomic<int> workers_left{workers};
  std::atomic<int64_t> model_us_total{0};
  std::vector<std::thread> runners;
  for (int w = 0; w < workers; ++w)
    runners.emplace_back([&] {
      try {
        while (std::optional<Batch> job = prepared.pop()) {
          Done d;
          if (job->pixels.size(0) > 0) {
            const auto m0 = std::chrono::steady_clock::now();
            d.logits = vit_logits(*model, job->pixels);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count();
            model_us_total += static_cast<int64_t>(ms * 1e3);
            if (!a.quiet && !a.json && batches > 1)
              std::fprintf(stderr, "[vitrt] batch %zu/%zu: %lld image%s in %.1f ms\n", job->first / batch + 1, batches,
                           static_cast<long long>(job->pixels.size(0)), job->pixels.size(0) > 1 ? "s" : "", ms);
          }
          job->pixels = Tensor();
          d.batch = std::move(*job);
          if (!done.push(std::move(d))) return;  // aborted
        }
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!failure) failure = std::current_exception();
        }
        prepared.abort();
        done.abort();
      }
      if (--workers_left == 0) done.close();
    });
  try {
    std::map<size_t, Done> early;  // batches finished ahead of one still running, by first input
    size_t next = 0;
    while (std::optional<Done> d = done.pop()) {
      early.emplace(d->batch.first, std::move(*d));
      for (auto it = early.find(next); it != early.end(); it = early.find(next)) {
        const Batch& job = it->second.batch;
        for (size_t i = 0; i < job.row.size(); ++i) {
          const std::string& path = inputs[job.first + i];
          if (job.row[i] < 0) emit(path, nullptr, job.errors[i]);
          else emit(path, it->second.logits.data<float>() + job.row[i] * cfg.num_classes, "");
        }
        next = job.first + job.row.size();
        early.erase(it);
      }
      if (lines.is_open()) {
        lines.flush();
        VITRT_CHECK(lines.good(), IoError, "cannot write '", a.out, "'");
      }
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
    prepared.abort();
    done.abort();
  }
  for (std::thread& t : runners) t.join();
  const int64_t model_us = model_us_total.load();
  reader.join();
  if (failure) std::rethrow_exception(failure);
  if (a.json && !lines.is_open()) {
    const nlohmann::json out = {{"model", cfg.name},
                                {"device", device == Device::CUDA ? "cuda" : "cpu"},
                                {"dtype", dtype_name(dtype)},
                                {"num_classes", cfg.num_classes},
                                {"results", results}};
    std::printf("%s\n", out.dump().c_str());
  }
  if (lines.is_open() || (!a.quiet && !a.json && n > 1)) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per = 1e-3 / std::max<double>(1, static_cast<double>(batches));
    std::printf("classified %zu image%s%s%s in %.2f s: %.1f images/s; per batch: reading %.1f ms (%d thread%s), "
                "model %.1f ms (%d worker%s)%s\n",
                classified, classified == 1 ? "" : "s", lines.is_open() ? " into " : "", a.out.c_str(), s,
                classified / std::max(s, 1e-9), read_us.load() * per, threads, threads > 1 ? "s" : "",
                model_us * per, workers, workers > 1 ? "s at once" : "",
                skipped.empty() ? "" : detail::concat("; ", skipped.size(), " unreadable skipped").c_str());
  }
  VITRT_CHECK(skipped.empty(), ImageError, skipped.size(), " of ", n, " images could not be read (first: ",
              skipped.front(), ")");
}

}  // namespace

void add_classify(CLI::App& app) {
  auto a = std::make_shared<ClassifyArgs>();
  CLI::App* c = app.add_subcommand("classify", "Classify an image with a torchvision ViT checkpoint (vit_b_16, ...).");
  c->footer(
      "Preprocessing is torchvision's ImageNet eval transform: resize the shorter side to 256 (Pillow\n"
      "bilinear), centre crop 224, normalise. Prints the top-k classes with softmax probabilities.\n"
      "Many images: --image repeated, a directory (its PNG/JPEG files) or a .txt list of paths; they are\n"
      "read and preprocessed on --threads threads while the previous batch runs. --out F writes one JSON\n"
      "line per image as results come ({\"image\", \"top\": [{\"class\", \"prob\", \"name\"}]}, with\n"
      "\"logits\" under --logits; {\"image\", \"error\"} for an image skipped by --keep-going).\n"
      "Example: vitrt classify --checkpoint vit_b_16-c867db91.pth --image cat.jpg\n"
      "         vitrt classify --checkpoint vit_b_16_s90.vitrt --image photos/ --out labels.jsonl --batch 256");
  c->add_option("--checkpoint", a->checkpoint, "torchvision VisionTransformer state_dict (.pth or .safetensors)")
      ->required()->check(CLI::ExistingFile);
  c->add_option("--image", a->images,
                "IMG (PNG or JPEG), DIR (its PNG/JPEG files) or LIST.txt (one path per line, relative to the "
                "list); repeatable")
      ->required();
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
  c->add_flag("--logits", a->logits, "With --json or --out: include each image's logits");
  c->add_option("--out", a->out, "Write one JSON line per image to this file, as results come");
  c->add_option("--threads", a->threads, "Image reader threads (default: hardware threads - 1, at most 32)");
  c->add_option("--workers", a->workers,
                "Batches run through the model at once, each on its own thread and CUDA stream (2 lets one "
                "batch's upload overlap another's forward; not yet measured on a GPU)")
      ->capture_default_str();
  c->add_flag("--keep-going", a->keep_going,
              "Skip unreadable images (reported on stderr and in the output) and classify the rest; the exit "
              "code is still 1");
  c->callback([a] { run_classify(*a); });
}

}  // namespace vitrt::cli
