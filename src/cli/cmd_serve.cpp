// `vitrt serve`: the HTTP server (src/server) with the click-to-segment page.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "models/sam/sam_model.h"
#include "server/server.h"

namespace vitrt::cli {

namespace {

struct ServeArgs {
  std::string checkpoint, config, random_model, device = "auto", dtype = "fp32", decoder_dtype;
  std::string vit_checkpoint, vit_classes;  // POST /v1/classify
  int vit_num_heads = 0;
  uint64_t seed = 1234;
  server::ServerOptions opt;
  double cache_mb = 1024, logits_cache_mb = 64, max_body_mb = 32;
};

std::shared_ptr<const SamModel> serve_model(const ServeArgs& a, Device device, DType dtype) {
  if (!a.random_model.empty()) {
    SamConfig c;
    if (a.random_model == "vit_b") c = SamConfig::vit_b();
    else if (a.random_model == "vit_l") c = SamConfig::vit_l();
    else if (a.random_model == "vit_h") c = SamConfig::vit_h();
    else throw InvalidArgument("--random-weights must be vit_b, vit_l or vit_h, got '" + a.random_model + "'");
    auto m = SamModel::from_state_dict(sam::random_state_dict(c, a.seed), c);
    return device == Device::CPU ? m : m->to(device, dtype, parse_decoder_dtype(a.decoder_dtype, device));
  }
  return load_sam(a.checkpoint, a.config, device, dtype, parse_decoder_dtype(a.decoder_dtype, device));
}

void run_serve(ServeArgs a) {
  const std::pair<Device, DType> device_dtype = parse_device(a.device, a.dtype);
  const Device device = device_dtype.first;
  const DType dtype = device_dtype.second;
  VITRT_CHECK(a.checkpoint.empty() != a.random_model.empty(), InvalidArgument,
              "give --checkpoint, or --random-weights for a benchmark model, not both");
  VITRT_CHECK(a.cache_mb > 0 && a.logits_cache_mb > 0 && a.max_body_mb > 0, InvalidArgument,
              "cache and body sizes must be > 0");
  a.opt.embedding_cache_bytes = static_cast<size_t>(a.cache_mb * 1024 * 1024);
  a.opt.logits_cache_bytes = static_cast<size_t>(a.logits_cache_mb * 1024 * 1024);
  a.opt.max_body_bytes = static_cast<size_t>(a.max_body_mb * 1024 * 1024);

  // SIGINT / SIGTERM are taken by one thread (blocked everywhere else, including the server's
  // threads, which inherit this mask) and turned into a clean stop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  StageTimer timer(false);
  auto model = timer.run(a.random_model.empty() ? "loading checkpoint " + a.checkpoint
                                                : "building " + a.random_model + " with random weights",
                         [&] { return serve_model(a, device, dtype); });
  if (!a.vit_checkpoint.empty()) {
    a.opt.classifier = timer.run("loading classifier " + a.vit_checkpoint,
                                 [&] { return load_vit(a.vit_checkpoint, device, dtype, a.vit_num_heads); });
    std::string names_path;
    a.opt.class_names = vit_class_names(a.vit_classes, vit_config(*a.opt.classifier).num_classes, &names_path);
    note(a.opt.class_names.empty() ? std::string("classifier without class names") : "class names from " + names_path);
  }
  server::SamServer srv(model, a.opt);
  const int port = srv.bind();
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    srv.stop();
  });
  std::printf("vitrt serve: listening on http://%s:%d/ (model %s, %s, %s %s)\n", a.opt.host.c_str(), port,
              sam_config(*model).name.c_str(), sam_fingerprint(*model).c_str(),
              device == Device::CUDA ? "cuda" : "cpu", dtype == DType::BF16 ? "bf16" : "fp32");
  std::fflush(stdout);
  srv.listen();
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes the signal thread if listen() ended by itself
  signal_thread.join();
  note("server stopped");
}

}  // namespace

void add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "Serve SAM over HTTP with a click-to-segment web page.");
  c->footer(
      "Endpoints: POST /v1/embed, POST /v1/segment, POST /v1/everything, POST /v1/classify (with\n"
      "--vit-checkpoint), GET /v1/health, GET /metrics, and the page at /. Request and answer formats:\n"
      "src/server/API.md.\n"
      "Example: vitrt serve --checkpoint sam_vit_b_01ec64.pth --port 8080, then open http://127.0.0.1:8080/");
  add_sam_model_options(c, a->checkpoint, a->config, /*required=*/false);  // or --random-weights
  c->add_option("--vit-checkpoint", a->vit_checkpoint,
                "A ViT classifier for POST /v1/classify: torchvision VisionTransformer state_dict or vitrt model "
                "file (block-sparse, from `vitrt sparsify`)")
      ->check(CLI::ExistingFile);
  c->add_option("--vit-classes", a->vit_classes,
                "Its class names, one per line (default for 1000 classes: the ImageNet list, as `vitrt classify`)");
  c->add_option("--vit-num-heads", a->vit_num_heads, "Its attention heads (default: as `vitrt classify --num-heads`)");
  c->add_option("--random-weights", a->random_model, "Serve vit_b / vit_l / vit_h with random weights (benchmarks)");
  c->add_option("--seed", a->seed, "Seed of --random-weights")->capture_default_str();
  c->add_option("--device", a->device, "auto (cuda when a GPU is present), cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kDecoderDtypeHelp);
  c->add_option("--host", a->opt.host, "Address to listen on (default loopback only)")->capture_default_str();
  c->add_option("--port", a->opt.port, "Port; 0 picks a free one (printed on start)")->capture_default_str();
  c->add_option("--cache-mb", a->cache_mb, "Embedding cache size in MiB (vit_b: 4 MiB per image)")->capture_default_str();
  c->add_option("--logits-cache-mb", a->logits_cache_mb, "Size of the store of low-res logits for mask_input_id, MiB")
      ->capture_default_str();
  c->add_option("--max-batch", a->opt.encode.max_batch, "Images per image-encoder call")->capture_default_str();
  c->add_option("--batch-wait-ms", a->opt.encode.max_wait_ms, "How long an encode waits for others to batch with")
      ->capture_default_str();
  c->add_option("--queue-depth", a->opt.encode.max_queue, "Images waiting for the encoder before 503")
      ->capture_default_str();
  c->add_option("--decode-workers", a->opt.decode_workers, "Threads running decodes")->capture_default_str();
  c->add_option("--decode-threads", a->opt.decode_threads, "OpenMP threads per decode worker (0: default)")
      ->capture_default_str();
  c->add_option("--decode-queue", a->opt.decode_queue, "Decodes waiting before 503")->capture_default_str();
  c->add_option("--classify-batch", a->opt.classify.max_batch, "Images per classifier forward (concurrent requests)")
      ->capture_default_str();
  c->add_option("--classify-wait-ms", a->opt.classify.max_wait_ms,
                "How long a classification waits for others to batch with")
      ->capture_default_str();
  c->add_option("--classify-queue", a->opt.classify.max_queue, "Classifications waiting before 503")
      ->capture_default_str();
  c->add_option("--http-threads", a->opt.http_threads, "Connections served at once")->capture_default_str();
  c->add_option("--max-body-mb", a->max_body_mb, "Largest request body, MiB (413 beyond)")->capture_default_str();
  c->add_option("--max-pixels", a->opt.max_image_pixels, "Largest image, in pixels (400 beyond)")->capture_default_str();
  c->add_option("--encode-timeout-s", a->opt.encode_timeout_s, "How long a request waits for its embedding (503 after)")
      ->capture_default_str();
  c->add_flag("--log", a->opt.access_log, "Print one line per request on stderr");
  c->callback([a] { run_serve(*a); });
}

}  // namespace vitrt::cli
