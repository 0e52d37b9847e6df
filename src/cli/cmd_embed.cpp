// `vitrt embed`: image embeddings for `segment --embedding`, one image or many.
//
// Many images (--image repeated, each an image, a directory of them or a .txt list: the convention of
// `everything`) go through the image encoder in
// batches of --batch (embed_images: one encoder launch per batch, images of any sizes) and each
// embedding is written to <out>/<file stem>.vemb. The work is pipelined so that the device never
// waits for the host: a reader thread decodes the next batches (with --threads helpers), --workers
// threads encode (two on the GPU: one's uploads and copies back overlap the other's forward), and
// the main thread writes the files.
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/bulk_pipeline.h"
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
  int threads = 0;  // 0: hardware threads - 1 (1 .. 32)
  int workers = 0;  // 0: 2 on cuda, 1 on cpu
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

void run_embed(const EmbedArgs& a) {
  std::vector<std::string> inputs;
  for (const std::string& arg : a.images) {
    const std::vector<std::string> found = collect_images(arg);
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  VITRT_CHECK(!inputs.empty(), InvalidArgument, "embed: no images given (--image IMG|DIR|LIST.txt)");
  VITRT_CHECK(a.batch >= 0, InvalidArgument, "--batch must be at least 1, got ", a.batch);
  VITRT_CHECK(a.threads >= 0, InvalidArgument, "--threads must be at least 1, got ", a.threads);
  VITRT_CHECK(a.workers >= 0 && a.workers <= 8, InvalidArgument, "--workers must be 1 to 8, got ", a.workers);
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
  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;
  auto model = timer.run("loading checkpoint " + a.checkpoint, [&] {
    return load_sam(a.checkpoint, a.config, device, dtype, parse_decoder_dtype(a.decoder_dtype, device));
  });
  const size_t batch = static_cast<size_t>(a.batch > 0 ? a.batch : device == Device::CUDA ? 16 : 1);
  // JPEG decoding is the pipeline's slowest stage on a big GPU (2026-12-04 on an H200: 8 readers kept
  // vit_b bf16 at ~250 images/s of 1500x1000 photos against ~470 for the encoder): every core but one.
  const int threads = a.threads > 0 ? a.threads : default_reader_threads();
  const size_t n = inputs.size(), batches = (n + batch - 1) / batch;
  if (!a.quiet)
    note(std::to_string(n) + " image" + (n > 1 ? "s" : "") + ", batches of " + std::to_string(batch) + " on " +
         (device == Device::CUDA ? "cuda " : "cpu ") + dtype_name(dtype) + ", " + std::to_string(threads) +
         " reader thread" + (threads > 1 ? "s" : ""));

  // Three stages joined by short queues: one thread reads batches (with `threads` helpers each),
  // `workers` threads encode them (each on its own CUDA stream: while one worker's forward runs, the
  // other uploads its next images and copies its last embeddings back, which would otherwise
  // leave the GPU idle for ~40% of each batch), and this thread writes the files. The first error
  // anywhere stops every stage and is reported.
  const int workers = a.workers > 0 ? a.workers : device == Device::CUDA ? 2 : 1;
  struct Batch {
    size_t number = 0;
    std::vector<Image> images;
    std::vector<size_t> index;  // input index of each image
    std::vector<ImageEmbedding> embeddings;
  };
  BoundedQueue<Batch> decoded(2), encoded(2);
  std::mutex mu;
  std::exception_ptr failure;
  std::vector<std::string> skipped;
  auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = e;
    }
    decoded.abort();
    encoded.abort();
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> encode_us{0}, read_us{0}, write_us{0};
  std::thread reader([&] {
    try {
      for (size_t b = 0; b < batches; ++b) {
        const size_t first = b * batch;
        const auto r0 = std::chrono::steady_clock::now();
        ReadBatch<Image> d = read_batch<Image>(inputs, first, std::min(batch, n - first), threads,
                                               [](const std::string& path) { return read_image(path); });
        read_us += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - r0).count();
        Batch out;
        out.number = b;
        for (size_t i = 0; i < d.items.size(); ++i) {
          if (d.items[i]) {
            out.images.push_back(std::move(*d.items[i]));
            out.index.push_back(first + i);
            continue;
          }
          if (!a.keep_going) throw ImageError(d.errors[i]);
          std::fprintf(stderr, "[vitrt] skipped %s: %s\n", inputs[first + i].c_str(), d.errors[i].c_str());
          std::lock_guard<std::mutex> lock(mu);
          skipped.push_back(inputs[first + i]);
        }
        if (!out.images.empty() && !decoded.push(std::move(out))) return;  // aborted
      }
      decoded.close();
    } catch (...) {
      fail(std::current_exception());
    }
  });
  std::atomic<int> encoders_left{workers};
  std::vector<std::thread> encoders;
  for (int w = 0; w < workers; ++w)
    encoders.emplace_back([&] {
      try {
        while (std::optional<Batch> job = decoded.pop()) {
          const auto e0 = std::chrono::steady_clock::now();
          job->embeddings = embed_images(*model, job->images);
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - e0).count();
          encode_us += static_cast<int64_t>(ms * 1e3);
          if (!a.quiet)
            std::fprintf(stderr, "[vitrt] batch %zu/%zu: %zu image%s encoded in %.1f ms\n", job->number + 1, batches,
                         job->images.size(), job->images.size() > 1 ? "s" : "", ms);
          job->images.clear();
          if (!encoded.push(std::move(*job))) return;  // aborted
        }
      } catch (...) {
        fail(std::current_exception());
      }
      if (--encoders_left == 0) encoded.close();
    });
  size_t written = 0;
  try {
    while (std::optional<Batch> done = encoded.pop()) {
      const auto w0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < done->embeddings.size(); ++i) save_embedding(done->embeddings[i], outputs[done->index[i]]);
      write_us += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - w0).count();
      written += done->embeddings.size();
    }
  } catch (...) {
    fail(std::current_exception());
  }
  reader.join();
  for (std::thread& t : encoders) t.join();
  if (failure) std::rethrow_exception(failure);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (single_file && written == 1) {
    std::printf("wrote embedding of %s to %s (model %s)\n", inputs[0].c_str(), outputs[0].c_str(),
                sam_fingerprint(*model).c_str());
  } else {
    // Per batch, each stage's own time: the stage that takes longest bounds the rate (reading with
    // `threads` threads; encoding on `workers` at once, so its share is divided by them).
    const double per = 1e-3 / std::max<double>(1, static_cast<double>(batches));
    std::printf("wrote %zu embedding%s to %s in %.2f s: %.1f images/s; per batch: reading %.1f ms (%d thread%s), "
                "encoding %.1f ms (%d worker%s), writing %.1f ms",
                written, written == 1 ? "" : "s", a.out.c_str(), total_s, written / std::max(total_s, 1e-9),
                read_us.load() * per, threads, threads > 1 ? "s" : "", encode_us.load() * per, workers, workers > 1 ? "s at once" : "",
                write_us.load() * per);
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
      "Reading, encoding (--workers batches at once) and writing overlap.\n"
      "Example: vitrt embed --checkpoint sam_vit_b_01ec64.pth --image photos/ --out embeddings/ --dtype bf16");
  add_sam_model_options(c, a->checkpoint, a->config);
  c->add_option("--image", a->images,
                "IMG, DIR (its PNG/JPEG files) or LIST.txt (one path per line, relative to the list); repeatable")
      ->required();
  c->add_option("--out", a->out, "Embedding file (one image), or output directory (several)")->required();
  c->add_option("--batch", a->batch, "Images per encoder launch (default 16 on cuda, 1 on cpu)");
  c->add_option("--threads", a->threads, "Image reader threads (default: hardware threads - 1, at most 32)");
  c->add_option("--workers", a->workers,
                "Batches encoded at once, each on its own thread and CUDA stream (default 2 on cuda, 1 on cpu)");
  c->add_flag("--keep-going", a->keep_going,
              "Skip unreadable images (reported on stderr) and embed the rest; the exit code is still 1");
  c->add_option("--device", a->device, "auto (cuda if present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kDecoderDtypeHelp);
  c->add_flag("-q,--quiet", a->quiet, "Do not print stage timings");
  c->callback([a] { run_embed(*a); });
}

}  // namespace vitrt::cli
