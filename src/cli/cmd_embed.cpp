// `vitrt embed`: image embeddings for `segment --embedding`, one image or many.
//
// Many images (--image repeated, each an image, a directory of them or a .txt list: the convention of
// `everything`) go through the image encoder in
// batches of --batch (embed_images: one encoder launch per batch, images of any sizes) and each
// embedding is written to <out>/<file stem>.vemb. The work is pipelined so that the device never
// waits for the host: while batch b is encoded, batch b + 1 is decoded by --threads reader
// threads and batch b - 1's files are written.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/image_inputs.h"
#include "vitrt/image.h"
#include "vitrt/sam.h"

namespace vitrt::cli {

namespace {

namespace fs = std::filesystem;

struct EmbedArgs {
  std::string checkpoint, config, out;
  std::vector<std::string> images;
  std::string device = "auto", dtype = "fp32", decoder_dtype;
  int batch = 0;    // 0: 16 on cuda, 1 on cpu
  int threads = 0;  // 0: min(8, hardware threads)
  bool keep_going = false, quiet = false;
};

// Output file per input: <out>/<stem>.vemb. Two inputs with the same stem would overwrite each
// other's file: refused before any work is done.
std::vector<std::string> output_paths(const std::vector<std::string>& inputs, const std::string& dir) {
  std::map<std::string, const std::string*> seen;
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    const std::string stem = fs::path(in).stem().string();
    VITRT_CHECK(!stem.empty(), InvalidArgument, "cannot name an embedding file for the input '", in, "'");
    auto [it, fresh] = seen.emplace(stem, &in);
    VITRT_CHECK(fresh, InvalidArgument, "the inputs '", *it->second, "' and '", in, "' would both be written to ",
                (fs::path(dir) / (stem + ".vemb")).string(), ": give images with distinct file names");
    out.push_back((fs::path(dir) / (stem + ".vemb")).string());
  }
  return out;
}

// One batch read from disk: each image, or the reason it could not be read.
struct DecodedBatch {
  std::vector<std::optional<Image>> images;
  std::vector<std::string> errors;
};

DecodedBatch decode_batch(const std::vector<std::string>& paths, size_t first, size_t count, int threads) {
  DecodedBatch d;
  d.images.resize(count);
  d.errors.resize(count);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        d.images[i] = read_image(paths[first + i]);
      } catch (const std::exception& e) {
        d.errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t helpers = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), count) - 1;
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return d;
}

void run_embed(const EmbedArgs& a) {
  std::vector<std::string> inputs;
  for (const std::string& arg : a.images) {
    const std::vector<std::string> found = collect_images(arg);
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  VITRT_CHECK(!inputs.empty(), InvalidArgument, "embed: no images given (--image IMG|DIR|LIST.txt)");
  VITRT_CHECK(a.batch >= 0, InvalidArgument, "--batch must be at least 1, got ", a.batch);
  VITRT_CHECK(a.threads >= 0, InvalidArgument, "--threads must be at least 1, got ", a.threads);
  // One image and --out not a directory: --out is the file (the single-image form). Otherwise --out
  // is a directory, created if missing.
  const bool single_file = a.images.size() == 1 && inputs.size() == 1 && inputs[0] == a.images[0] &&
                           !fs::is_directory(a.out) && !a.out.empty() && a.out.back() != '/';
  const std::vector<std::string> outputs = single_file ? std::vector<std::string>{a.out} : output_paths(inputs, a.out);
  if (!single_file) {
    std::error_code ec;
    fs::create_directories(a.out, ec);
    VITRT_CHECK(fs::is_directory(a.out), IoError, "cannot create the output directory '", a.out, "'");
  }

  StageTimer timer(a.quiet);
  auto [device, dtype] = parse_device(a.device, a.dtype);
  auto model = timer.run("loading checkpoint " + a.checkpoint, [&] {
    return load_sam(a.checkpoint, a.config, device, dtype, parse_decoder_dtype(a.decoder_dtype, device));
  });
  const size_t batch = static_cast<size_t>(a.batch > 0 ? a.batch : device == Device::CUDA ? 16 : 1);
  const int threads =
      a.threads > 0 ? a.threads : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  const size_t n = inputs.size(), batches = (n + batch - 1) / batch;
  if (!a.quiet)
    note(std::to_string(n) + " image" + (n > 1 ? "s" : "") + ", batches of " + std::to_string(batch) + " on " +
         (device == Device::CUDA ? "cuda " : "cpu ") + dtype_name(dtype) + ", " + std::to_string(threads) +
         " reader thread" + (threads > 1 ? "s" : ""));

  auto decode = [&](size_t b) {
    const size_t first = b * batch;
    return std::async(std::launch::async, decode_batch, std::cref(inputs), first, std::min(batch, n - first), threads);
  };
  const auto t0 = std::chrono::steady_clock::now();
  double encode_s = 0;
  size_t written = 0;
  std::vector<std::string> skipped;
  std::future<void> writing;
  std::future<DecodedBatch> next = decode(0);
  for (size_t b = 0; b < batches; ++b) {
    DecodedBatch d = next.get();
    if (b + 1 < batches) next = decode(b + 1);
    std::vector<Image> images;
    std::vector<size_t> index;  // input index of each image in `images`
    for (size_t i = 0; i < d.images.size(); ++i) {
      const size_t k = b * batch + i;
      if (d.images[i]) {
        images.push_back(std::move(*d.images[i]));
        index.push_back(k);
        continue;
      }
      if (!a.keep_going) {
        if (writing.valid()) writing.get();  // what was encoded is kept
        throw ImageError(d.errors[i]);
      }
      std::fprintf(stderr, "[vitrt] skipped %s: %s\n", inputs[k].c_str(), d.errors[i].c_str());
      skipped.push_back(inputs[k]);
    }
    if (images.empty()) continue;
    const auto e0 = std::chrono::steady_clock::now();
    std::vector<ImageEmbedding> embs = embed_images(*model, images);
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    if (!a.quiet)
      std::fprintf(stderr, "[vitrt] batch %zu/%zu: %zu image%s encoded in %.1f ms\n", b + 1, batches, images.size(),
                   images.size() > 1 ? "s" : "",
                   1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count());
    if (writing.valid()) writing.get();  // (at most one batch's files in flight; a write error stops the run)
    writing = std::async(std::launch::async, [&outputs, index = std::move(index), embs = std::move(embs)] {
      for (size_t i = 0; i < embs.size(); ++i) save_embedding(embs[i], outputs[index[i]]);
    });
    written += images.size();
  }
  if (writing.valid()) writing.get();
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (single_file && written == 1) {
    std::printf("wrote embedding of %s to %s (model %s)\n", inputs[0].c_str(), outputs[0].c_str(),
                sam_fingerprint(*model).c_str());
  } else {
    std::printf("wrote %zu embedding%s to %s in %.2f s: %.1f images/s (the encoder alone: %.1f images/s)", written,
                written == 1 ? "" : "s", a.out.c_str(), total_s, written / std::max(total_s, 1e-9),
                written / std::max(encode_s, 1e-9));
    if (!skipped.empty()) std::printf("; %zu unreadable image%s skipped", skipped.size(), skipped.size() > 1 ? "s" : "");
    std::printf("\n");
  }
  VITRT_CHECK(skipped.empty(), ImageError, skipped.size(), " of ", n, " images could not be read (first: ",
              skipped.front(), ")");
}

}  // namespace

void add_embed(CLI::App& app) {
  auto a = std::make_shared<EmbedArgs>();
  CLI::App* c = app.add_subcommand("embed", "Compute image embeddings once and save them for `segment --embedding`.");
  c->footer(
      "One image: --out is the file to write. Several (--image repeated, a directory, or a .txt list\n"
      "of paths): --out is a directory and each embedding is written to <out>/<image file stem>.vemb.\n"
      "Images are read by --threads threads while the previous batch is encoded, and the files are\n"
      "written while the next one is.\n"
      "Example: vitrt embed --checkpoint sam_vit_b_01ec64.pth --image photos/ --out embeddings/ --dtype bf16");
  c->add_option("--checkpoint", a->checkpoint, "SAM checkpoint: official .pth or Hugging Face .safetensors")
      ->required()->check(CLI::ExistingFile);
  c->add_option("--config", a->config, "JSON with settings for non-standard model sizes");
  c->add_option("--image", a->images,
                "IMG, DIR (its PNG/JPEG files) or LIST.txt (one path per line, relative to the list); repeatable")
      ->required();
  c->add_option("--out", a->out, "Embedding file (one image), or output directory (several)")->required();
  c->add_option("--batch", a->batch, "Images per encoder launch (default 16 on cuda, 1 on cpu)");
  c->add_option("--threads", a->threads, "Image reader threads (default min(8, hardware threads))");
  c->add_flag("--keep-going", a->keep_going,
              "Skip unreadable images (reported on stderr) and embed the rest; the exit code is still 1");
  c->add_option("--device", a->device, "auto (cuda if present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kDecoderDtypeHelp);
  c->add_flag("-q,--quiet", a->quiet, "Do not print stage timings");
  c->callback([a] { run_embed(*a); });
}

}  // namespace vitrt::cli
