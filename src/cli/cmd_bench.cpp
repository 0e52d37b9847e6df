// `vitrt bench` and `vitrt fidelity-check`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <tuple>
#include <utility>

#include "cli/commands.h"
#include "cli/common.h"
#include "models/sam/decoder_graph.h"
#include "models/sam/fidelity.h"
#include "models/sam/sam_model.h"
#include "models/vit/vit_model.h"
#include "core/device_memory.h"
#include "io/vitrt_model_file.h"
#include "ops/cpu/gemm.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"
#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace vitrt::cli {

namespace {

SamConfig config_by_name(const std::string& name) {
  if (name == "vit_b") return SamConfig::vit_b();
  if (name == "vit_l") return SamConfig::vit_l();
  if (name == "vit_h") return SamConfig::vit_h();
  throw InvalidArgument("unknown model '" + name + "': expected vit_b, vit_l or vit_h");
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct BenchArgs {
  std::string device = "cpu", model = "vit_b", dtype = "fp32", decoder_dtype;
  int batch = 1, iters = 3, warmup = 1;
  double sparsity = 0.9;  // the ViT classifier (--model vit_b_16 ...): MLP block sparsity and block size
  int block = 64;
  std::string checkpoint;  // the ViT classifier: a vitrt model file's own BSR weights instead
  bool json = false, decoder = true, profile = false;
};

// The decoder benchmarks' image: a model-input-sized square whose embedding is `features`
// [1, out, g, g] (float32, host).
ImageEmbedding bench_embedding(const SamModel& model, const Tensor& features) {
  ImageEmbedding e;
  e.features = features;
  e.original_height = e.input_height = e.original_width = e.input_width = model.config.img_size;
  e.model_fingerprint = model.fingerprint;
  return e;
}

// The k-th single-point prompt of the decoder benchmarks (bench/decoder_reference.py uses the same).
Prompt bench_prompt(const SamConfig& cfg, int k) {
  Prompt p;
  p.points.push_back({float((k * 97) % cfg.img_size), float((k * 61) % cfg.img_size), 1});
  return p;
}

std::vector<Prompt> bench_prompts(const SamConfig& cfg, int n) {
  std::vector<Prompt> prompts;
  for (int k = 0; k < n; ++k) prompts.push_back(bench_prompt(cfg, k));
  return prompts;
}

nlohmann::json bench_decoder(const std::shared_ptr<SamModel>& model, const Tensor& embedding) {
  const SamConfig& cfg = model->config;
  SamPredictor predictor(model);
  const ImageEmbedding e = bench_embedding(*model, embedding);
  predictor.set_embedding(e);
  nlohmann::json dec = nlohmann::json::object();
  // Calls of each shape before timing: on the GPU the first runs eagerly (cuBLASLt plans), the
  // second captures the decoder's CUDA graph (models/sam/decoder_graph.h); the timed ones replay it.
  const bool gpu = model->device == Device::CUDA;
  const int warmup = gpu ? 2 : 1, timed = gpu ? 9 : 2;  // GPU calls take milliseconds: enough repetitions to beat host noise
  for (int n : {1, 16, 64}) {
    const std::vector<Prompt> prompts = bench_prompts(cfg, n);
    std::vector<double> t;
    for (int r = 0; r < warmup + timed; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      predictor.predict_batch(prompts, true, false);
      if (r >= warmup) t.push_back(ms_since(t0));
    }
    dec[std::to_string(n)] = median(t) / n;
    // The same with the answers left on the model's device (what the reference's predict_torch
    // returns): no mask download. Fetching the scores waits for the device's work.
    t.clear();
    for (int r = 0; r < warmup + timed; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      predictor.predict_batch_on_device(prompts, true, false).scores.to(Device::CPU);
      if (r >= warmup) t.push_back(ms_since(t0));
    }
    dec[std::to_string(n) + "_on_device"] = median(t) / n;
  }
  // The ragged multi-image batch: 64 prompts over 4 images (16 + 8 + 24 + 16), one decoder batch.
  {
    const std::vector<ImageEmbedding> embs(4, e);
    std::vector<std::vector<Prompt>> prompts(4);
    const int counts[4] = {16, 8, 24, 16};
    for (int i = 0, k = 0; i < 4; ++i)
      for (int j = 0; j < counts[i]; ++j, ++k) prompts[i].push_back(bench_prompt(cfg, k));
    std::vector<double> t;
    for (int r = 0; r < warmup + timed; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      predict_multi_image(*model, embs, prompts, true, false);
      if (r >= warmup) t.push_back(ms_since(t0));
    }
    dec["64_over_4_images"] = median(t) / 64;
  }
  return dec;
}

Tensor random_input(const SamConfig& cfg, int batch) {
  const int64_t S = cfg.img_size;
  Tensor input = Tensor::empty({batch, S, S, 3});
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = nd(rng);
  return input;
}

// A profile_device() result as a table, largest operators first.
void print_profile(const std::string& title, const nlohmann::json& p) {
  std::printf("%s: %.2f ms (%.2f ms inside operators)\n", title.c_str(), p["eager_forward_ms"].get<double>(),
              p["ops_ms"].get<double>());
  for (const auto& r : p["ops"])
    std::printf("  %6.2f%% %9.3f ms %4d x  %s\n", 100 * r["share"].get<double>(), r["ms"].get<double>(),
                r["calls"].get<int>(), r["op"].get<std::string>().c_str());
}

void print_result(const BenchArgs& a, const nlohmann::json& out) {
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s %s %s batch %d: encoder %.2f ms/image (%.2f img/s), %.1f GFLOP/s", a.model.c_str(), a.device.c_str(),
              a.dtype.c_str(), a.batch, out["encoder_ms_per_image"].get<double>(), out["images_per_s"].get<double>(),
              out["encoder_gflops"].get<double>());
  if (out.contains("sgemm_gflops"))
    std::printf(" = %.0f%% of oneDNN sgemm (%.1f GFLOP/s)", 100 * out["encoder_fraction_of_sgemm"].get<double>(),
                out["sgemm_gflops"].get<double>());
  if (out.contains("peak_device_gib")) std::printf(", peak %.2f GiB", out["peak_device_gib"].get<double>());
  std::printf("\n");
  if (out.contains("encoder_eager_ms_per_batch"))
    std::printf("encoder per batch: CUDA graph %.2f ms (median), eager forwards %.2f ms, the graph again %.2f ms\n",
                out["encoder_ms_per_batch"].get<double>(), out["encoder_eager_ms_per_batch"].get<double>(),
                out["encoder_replay_after_eager_ms_per_batch"].get<double>());
  for (auto& [n, ms] : out["decoder_ms_per_prompt"].items())
    std::printf("decoder, %s prompt(s) per image: %.3f ms per prompt\n", n.c_str(), ms.get<double>());
  for (const char* key : {"profile", "decoder_profile_64"})
    if (out.contains(key))
      print_profile(std::string(key) == "profile" ? "profile of one eager encoder forward"
                                                  : "profile of one decoder batch of 64 prompts",
                    out[key]);
}

void run_bench_cpu(const BenchArgs& a, const SamConfig& cfg) {
  VITRT_CHECK(a.dtype == "fp32", InvalidArgument, "the CPU backend computes in fp32 only (got --dtype ", a.dtype, ")");
  parse_decoder_dtype(a.decoder_dtype, Device::CPU);  // refuses bf16
  if (!a.json) note("building " + a.model + " with random weights");
  auto model = SamModel::from_state_dict(sam::random_state_dict(cfg, 1234), cfg);

  // Reference rate of this machine: a plain oneDNN sgemm of the encoder's MLP shape.
  const int64_t tokens = cfg.grid_size() * cfg.grid_size();
  const double sgemm = cpu::measure_sgemm_gflops(tokens, cfg.mlp_dim, cfg.embed_dim, 5);
  Tensor input = random_input(cfg, a.batch);

  std::vector<double> times;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor emb = model->image_encoder.forward(input);
    if (i >= a.warmup) times.push_back(ms_since(t0));
    if (!a.json) note(detail::concat("encoder iteration ", i, i < a.warmup ? " (warm-up)" : "", ": ", ms_since(t0), " ms"));
  }
  const double ms_batch = median(times), ms_img = ms_batch / a.batch;
  const double gflop = sam::encoder_flops(cfg) / 1e9;
  const double gflops = gflop / (ms_img / 1e3);
  nlohmann::json dec = a.decoder ? bench_decoder(model, model->image_encoder.forward(input.slice0(0, 1)))
                                 : nlohmann::json::object();
  print_result(a, {{"device", a.device}, {"model", a.model}, {"dtype", a.dtype}, {"batch", a.batch},
                   {"threads", static_cast<int>(std::thread::hardware_concurrency())},
                   {"encoder_ms_per_batch", ms_batch}, {"encoder_ms_per_image", ms_img},
                   {"images_per_s", 1e3 / ms_img}, {"encoder_gflop_per_image", gflop},
                   {"encoder_gflops", gflops}, {"sgemm_gflops", sgemm},
                   {"encoder_fraction_of_sgemm", gflops / sgemm}, {"decoder_ms_per_prompt", dec}});
}

#ifdef VITRT_HAVE_CUDA
// Device time per operator label over one eager encoder forward (the graphed timing above has no
// per-operator view). Per-operator events add a little overhead, so the total is a bit above the
// graphed time; shares are what matter.
template <class Work>
nlohmann::json profile_device(Work&& work) {
  ops::profiler::take();  // drop anything recorded before
  ops::profiler::set_enabled(true);
  cuda::EventTimer timer;
  timer.start();
  work();
  const double total_ms = timer.stop_ms();
  ops::profiler::set_enabled(false);
  nlohmann::json rows = nlohmann::json::array();
  double covered = 0;
  for (const auto& e : ops::profiler::take()) {
    covered += e.ms;
    rows.push_back({{"op", e.label}, {"calls", e.calls}, {"ms", e.ms}, {"share", total_ms > 0 ? e.ms / total_ms : 0}});
  }
  return {{"eager_forward_ms", total_ms}, {"ops_ms", covered}, {"ops", rows}};
}

// One forward captured as a CUDA graph that copies its result into `out` (the forward's own tensors
// are allocated and freed inside the graph), then launched once and waited for.
template <class Forward>
void capture_forward(cuda::Graph& graph, Tensor& out, Forward&& forward) {
  graph.capture([&] {
    Tensor y = forward();
    VITRT_CUDA_CHECK(
        cudaMemcpyAsync(out.raw(), y.raw(), out.nbytes(), cudaMemcpyDeviceToDevice, cuda::current_stream()));
  });
  graph.launch();
  cuda::synchronize();
}

// `iters` runs of `work`, each timed with events and waited for (as the reference's benchmark
// times its forwards), in order.
template <class Work>
std::vector<double> timed_runs_ms(int iters, Work&& work) {
  cuda::EventTimer timer;
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    timer.start();
    work();
    times.push_back(timer.stop_ms());
  }
  return times;
}

#endif

void run_bench_cuda(const BenchArgs& a, const SamConfig& cfg) {
#ifndef VITRT_HAVE_CUDA
  (void)cfg;
  throw InvalidArgument("device 'cuda' is not available: this vitrt build has no CUDA backend (built without nvcc)");
#else
  VITRT_CHECK(devmem::cuda_available(), InvalidArgument, "device 'cuda' is not available: no CUDA device found");
  VITRT_CHECK(a.dtype == "fp32" || a.dtype == "bf16", InvalidArgument, "--dtype must be fp32 or bf16");
  const DType dt = a.dtype == "bf16" ? DType::BF16 : DType::F32;
  if (!a.json) note("building " + a.model + " with random weights on " + cuda::device_description(0));
  auto model = SamModel::from_state_dict(sam::random_state_dict(cfg, 1234), cfg)
                   ->to(Device::CUDA, dt, bulk_decoder_dtype(a.decoder_dtype, Device::CUDA, dt));
  Tensor input = ops::cast(random_input(cfg, a.batch).to(Device::CUDA), dt);

  // Eager warm-up (GEMM plans, workspaces), then the whole encoder captured as one CUDA graph.
  for (int i = 0; i < std::max(1, a.warmup); ++i) model->image_encoder.forward(input);
  cuda::synchronize();
  const Shape out_shape{a.batch, cfg.out_chans, cfg.grid_size(), cfg.grid_size()};
  Tensor output = Tensor::empty(out_shape, dt, Device::CUDA);
  cuda::Graph graph;
  capture_forward(graph, output, [&] { return model->image_encoder.forward(input); });
  cuda::reset_peak_bytes();
  cuda::reset_graph_peak_bytes();
  const std::vector<double> replays = timed_runs_ms(a.iters, [&] { graph.launch(); });
  const double ms_batch = median(replays), ms_img = ms_batch / a.batch;
  const double peak_gib = static_cast<double>(cuda::peak_bytes_in_use() + cuda::graph_peak_bytes()) / (1ull << 30);
  // The same forward eagerly (host launches, the pool's own allocations), then the graph again: on
  // the H200 one eager forward has measured faster than the replays' median (BENCHMARKS.md,
  // 2026-12-04 call 4); timing both back to back, in this order, separates the graph from the
  // clock's drift over the run.
  const std::vector<double> eager = timed_runs_ms(a.iters, [&] { model->image_encoder.forward(input); });
  const std::vector<double> replays_after = timed_runs_ms(a.iters, [&] { graph.launch(); });
  const double gflop = sam::encoder_flops(cfg) / 1e9;
  const Tensor first_embedding =
      a.decoder ? ops::cast(output.slice0(0, 1), DType::F32).to(Device::CPU) : Tensor();  // the decoder's image
  nlohmann::json dec = a.decoder ? bench_decoder(model, first_embedding) : nlohmann::json::object();
  nlohmann::json result = {{"device", a.device}, {"gpu", cuda::device_description(0)}, {"model", a.model},
                           {"dtype", a.dtype}, {"decoder_dtype", dtype_name(model->decoder_dtype)},
                           {"batch", a.batch}, {"encoder_ms_per_batch", ms_batch},
                           {"encoder_ms_per_image", ms_img}, {"images_per_s", 1e3 / ms_img},
                           {"encoder_gflop_per_image", gflop}, {"encoder_gflops", gflop / (ms_img / 1e3)},
                           {"encoder_tflops", gflop / ms_img}, {"cuda_graph", true}, {"peak_device_gib", peak_gib},
                           {"encoder_replay_ms", replays}, {"encoder_eager_ms_per_batch", median(eager)},
                           {"encoder_eager_ms", eager}, {"encoder_replay_after_eager_ms_per_batch", median(replays_after)},
                           {"decoder_ms_per_prompt", dec},
                           {"decoder_cuda_graph", model->mask_decoder.graphs->enabled()}};
  if (a.profile) {
    result["profile"] = profile_device([&] { model->image_encoder.forward(input); });
    if (a.decoder) {  // 64 single-point prompts on one image, results left on the device
      SamPredictor predictor(model);
      predictor.set_embedding(bench_embedding(*model, first_embedding));
      const std::vector<Prompt> prompts = bench_prompts(cfg, 64);
      predictor.predict_batch_on_device(prompts);  // warm-up
      result["decoder_profile_64"] = profile_device([&] { predictor.predict_batch_on_device(prompts); });
    }
  }
  print_result(a, result);
#endif
}

// One ViT's timing: ms per batch as reported; on CUDA also the eager time, graph use and profile.
struct VitTiming {
  double ms = 0, eager_ms = 0;
  // CUDA: the median over alternating rounds of dense ms / sparse ms (graph replays; eager forwards)
  double round_ratio = 0, eager_round_ratio = 0;
  bool graph = false;
  std::string capture_error;  // why the CUDA graph capture failed (graph == false)
  nlohmann::json profile;
};

#ifdef VITRT_HAVE_CUDA
// `rounds` rounds of one run of `a` and one of `b`, each timed with events and waited for; the order
// swaps every round (a b, b a, ...) so that neither always runs first after the host's pause.
template <class WorkA, class WorkB>
std::pair<std::vector<double>, std::vector<double>> alternating_runs_ms(int rounds, WorkA&& a, WorkB&& b) {
  std::vector<double> ta, tb;
  for (int i = 0; i < rounds; ++i) {
    if (i % 2 == 0) {
      ta.push_back(timed_runs_ms(1, a)[0]);
      tb.push_back(timed_runs_ms(1, b)[0]);
    } else {
      tb.push_back(timed_runs_ms(1, b)[0]);
      ta.push_back(timed_runs_ms(1, a)[0]);
    }
  }
  return {std::move(ta), std::move(tb)};
}

// Median over rounds of the ratio a / b of the same round.
double median_round_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  return median(r);
}

// The dense and the sparse ViT on CUDA, logits left on the device, timed in alternation: at batch
// 256 both run near the H200's power limit, and timed one after the other the second model ran at
// whatever clock the first left (the sparse model's graph replays came out 2-6% slower than its own
// eager forwards, BENCHMARKS.md 2026-12-04 20:22 session). So: eager warm-ups of each (cuBLASLt plans
// and autotuning, kernel attributes), `iters` alternating rounds of eager forwards timed with events,
// the optional per-operator profiles, then each forward captured as a CUDA graph and `iters`
// alternating rounds of replays (no host launch cost).
std::pair<VitTiming, VitTiming> time_vits_cuda(const VitModel& dense, const VitModel& sparse, const Tensor& input,
                                               const BenchArgs& a) {
  VitTiming d, s;
  for (const VitModel* m : {&dense, &sparse})
    for (int i = 0; i < std::max(1, a.warmup); ++i) m->forward_device(input);
  cuda::synchronize();
  auto [eager_d, eager_s] =
      alternating_runs_ms(a.iters, [&] { dense.forward_device(input); }, [&] { sparse.forward_device(input); });
  d.eager_ms = median(eager_d), s.eager_ms = median(eager_s);
  d.eager_round_ratio = s.eager_round_ratio = median_round_ratio(eager_d, eager_s);
  if (a.profile) {
    d.profile = profile_device([&] { dense.forward_device(input); });
    s.profile = profile_device([&] { sparse.forward_device(input); });
  }
  auto capture = [&](const VitModel& m, VitTiming& t, cuda::Graph& graph, Tensor& logits) {
    logits = Tensor::empty({input.size(0), m.config.num_classes}, DType::F32, Device::CUDA);
    try {
      capture_forward(graph, logits, [&] { return m.forward_device(input); });
      t.graph = true;
    } catch (const std::exception& e) {
      t.capture_error = e.what();
      (void)cudaStreamSynchronize(cuda::current_stream());
      (void)cudaGetLastError();  // frees of the aborted capture's tensors may have left an error
    }
  };
  cuda::Graph graph_d, graph_s;
  Tensor logits_d, logits_s;
  capture(dense, d, graph_d, logits_d);
  capture(sparse, s, graph_s, logits_s);
  if (d.graph && s.graph) {
    auto [replay_d, replay_s] = alternating_runs_ms(a.iters, [&] { graph_d.launch(); }, [&] { graph_s.launch(); });
    d.ms = median(replay_d), s.ms = median(replay_s);
    d.round_ratio = s.round_ratio = median_round_ratio(replay_d, replay_s);
  } else {  // eager timings for both, so that the ratio compares like with like
    d.ms = d.eager_ms, s.ms = s.eager_ms;
    d.round_ratio = s.round_ratio = d.eager_round_ratio;
  }
  return {std::move(d), std::move(s)};
}
#endif

// The ViT classifier (torchvision layout): dense, and the same weights with every MLP linear
// block-magnitude pruned to BSR, timed in the same run (--checkpoint: a model file's own BSR
// weights, e.g. a Supermask model's, and the same weights dense). CPU fp32: eager forwards, wall clock, one
// model after the other. CUDA fp32 / bf16: logits left on the device, the two models in alternating
// rounds, one forward of each replayed as a CUDA graph and timed with events (eager forwards when a
// capture fails; "cuda_graph" says which).
void run_bench_vit(const BenchArgs& a) {
  VITRT_CHECK(a.device == "cpu" || a.device == "cuda", InvalidArgument, "unknown device '", a.device,
              "': expected cpu or cuda");
  const Device dev = a.device == "cuda" ? Device::CUDA : Device::CPU;
  VITRT_CHECK(a.dtype == "fp32" || (dev == Device::CUDA && a.dtype == "bf16"), InvalidArgument,
              dev == Device::CPU ? "the CPU backend computes in fp32 only" : "--dtype must be fp32 or bf16",
              " (got --dtype ", a.dtype, ")");
  VITRT_CHECK(dev == Device::CPU || devmem::cuda_available(), InvalidArgument,
              "device 'cuda' is not available: no CUDA device found (or built without nvcc)");
  const DType dt = a.dtype == "bf16" ? DType::BF16 : DType::F32;
  // The two models: random weights with every MLP linear block-magnitude pruned (what `vitrt
  // sparsify` does), or a model file's own BSR weights and their dense twin (io::fold_to_dense).
  std::shared_ptr<const VitModel> dense, sparse_model;
  int64_t kept = 0, total = 0;
  int block = a.block;
  double sparsity = a.sparsity;
  std::string label = a.model;
  if (!a.checkpoint.empty()) {
    if (!a.json) note("loading " + a.checkpoint);
    {
      std::ifstream probe(a.checkpoint, std::ios::binary);
      char head[2] = {};
      VITRT_CHECK(!(probe.read(head, 2) && head[0] == 'P' && head[1] == 'K'), InvalidArgument, "'", a.checkpoint,
                  "' is a torch checkpoint, not a vitrt model file: `vitrt sparsify` makes one from it");
    }
    const io::ModelFile f = io::load_model_file(a.checkpoint);
    VITRT_CHECK(!f.sparse.empty(), InvalidArgument, "'", a.checkpoint,
                "' holds no block-sparse weights: `vitrt sparsify` writes a model file that does");
    sparse_model = load_vit(a.checkpoint, dev, dt);
    dense = vit_from_state_dict(io::fold_to_dense(f), dev, dt, vit_config(*sparse_model).num_heads);
    block = f.sparse.begin()->second.block;
    for (const auto& [name, m] : f.sparse) {
      if (m.block != block) block = 0;  // mixed (not written by `vitrt sparsify`)
      kept += m.nnz_blocks();
      total += m.block_rows() * m.block_cols();
    }
    sparsity = total ? 1.0 - static_cast<double>(kept) / static_cast<double>(total) : 0.0;
    label = std::filesystem::path(a.checkpoint).filename().string();
  } else {
    VITRT_CHECK(is_supported_bsr_block(a.block), InvalidArgument, "--block ", a.block,
                " is not supported: expected 16, 32 or 64");
    VITRT_CHECK(a.sparsity >= 0.0 && a.sparsity < 1.0, InvalidArgument, "--sparsity ", a.sparsity,
                " must lie in [0, 1)");
    const VitConfig cfg = VitConfig::preset(a.model);
    if (!a.json) note("building " + a.model + " with random weights");
    const StateDict sd = vit_random_state_dict(cfg, 1234);
    dense = vit_from_state_dict(sd, dev, dt, cfg.num_heads);
    StateDict rest;
    std::map<std::string, BsrMatrix> sparse;
    for (const auto& [name, t] : sd) {
      const bool mlp = name.find(".mlp.") != std::string::npos && name.size() > 7 &&
                       name.compare(name.size() - 7, 7, ".weight") == 0;
      if (!mlp || t.size(0) % a.block || t.size(1) % a.block) {
        rest.emplace(name, t);
        continue;
      }
      BsrMatrix m = prune_blocks_by_magnitude(t, a.block, a.sparsity);
      kept += m.nnz_blocks();
      total += m.block_rows() * m.block_cols();
      sparse.emplace(name, std::move(m));
    }
    sparse_model = vit_from_sparse_state_dict(rest, sparse, dev, dt, cfg.num_heads);
  }
  const VitConfig& cfg = vit_config(*sparse_model);
  const double density = total ? static_cast<double>(kept) / static_cast<double>(total) : 1.0;
  Tensor input = Tensor::empty({a.batch, cfg.image_size, cfg.image_size, 3});
  {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = nd(rng);
  }
  if (dev == Device::CUDA) input = ops::cast(input.to(dev), dt);  // uploaded once, outside the timing
  // CPU: each model's forwards in turn, wall clock.
  auto time_model_cpu = [&](const VitModel& m, const char* what) {
    VitTiming t;
    std::vector<double> times;
    for (int i = 0; i < a.warmup + a.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      Tensor logits = m.forward(input);
      const double ms = ms_since(t0);
      if (i >= a.warmup) times.push_back(ms);
      if (!a.json) note(detail::concat(what, " iteration ", i, i < a.warmup ? " (warm-up)" : "", ": ", ms, " ms"));
    }
    t.ms = median(times);
    return t;
  };

  VitTiming dense_t, sparse_t;
  if (dev == Device::CUDA) {
#ifdef VITRT_HAVE_CUDA
    std::tie(dense_t, sparse_t) = time_vits_cuda(*dense, *sparse_model, input, a);
    for (const auto& [what, t] : {std::pair<const char*, const VitTiming*>{"dense", &dense_t}, {"sparse", &sparse_t}})
      if (!a.json)
        note(detail::concat(what, ": eager ", t->eager_ms, " ms/batch (events)",
                            t->graph ? detail::concat(", CUDA graph ", t->ms, " ms/batch")
                                     : ", CUDA graph capture failed: " + t->capture_error));
#endif
  } else {
    dense_t = time_model_cpu(*dense, "dense");
    sparse_t = time_model_cpu(*sparse_model, "sparse");
  }
  const double dense_ms = dense_t.ms, sparse_ms = sparse_t.ms;

  const bool graphed = dev == Device::CUDA && dense_t.graph && sparse_t.graph;
  nlohmann::json out = {{"device", a.device}, {"model", label}, {"dtype", a.dtype}, {"batch", a.batch},
                        {"threads", static_cast<int>(std::thread::hardware_concurrency())},
                        {"weights", a.checkpoint.empty() ? "random, MLPs block-magnitude pruned" : a.checkpoint},
                        {"block", block}, {"sparsity", sparsity}, {"mlp_density", density},
                        {"bsr_linears", vit_num_bsr_linears(*sparse_model)},
                        {"fused_mlps", vit_num_fused_mlps(*sparse_model, a.batch)},
                        // (blocks ops::simplify_bsr_mlp took out at load: work independent of the image)
                        {"mlp_fc1_blocks_dropped", sparse_model->mlp_fc1_blocks_dropped},
                        {"mlp_fc2_blocks_folded", sparse_model->mlp_fc2_blocks_folded},
                        {"mlp_density_computed", total ? static_cast<double>(kept - sparse_model->mlp_fc1_blocks_dropped -
                                                                            sparse_model->mlp_fc2_blocks_folded) /
                                                             static_cast<double>(total)
                                                       : 1.0},
                        {"dense_ms_per_batch", dense_ms}, {"dense_images_per_s", 1e3 * a.batch / dense_ms},
                        {"sparse_ms_per_batch", sparse_ms}, {"sparse_images_per_s", 1e3 * a.batch / sparse_ms},
                        {"speedup", dense_ms / sparse_ms}, {"cuda_graph", graphed},
                        {"timing", dev == Device::CPU ? "wall clock, eager"
                                   : graphed         ? "CUDA events, CUDA graph replays, logits on the device"
                                                     : "CUDA events, eager forwards, logits on the device"}};
  if (dev == Device::CUDA) {
    out["dense_eager_ms_per_batch"] = dense_t.eager_ms;
    out["sparse_eager_ms_per_batch"] = sparse_t.eager_ms;
    out["eager_speedup"] = dense_t.eager_ms / sparse_t.eager_ms;
    // Both models ran in alternation (time_vits_cuda); these are the medians of each round's ratio.
    out["timing_order"] = "alternating rounds of one dense and one sparse run";
    out["speedup_median_of_rounds"] = dense_t.round_ratio;
    out["eager_speedup_median_of_rounds"] = dense_t.eager_round_ratio;
    if (!graphed) {
      // The two models may differ: each timing says what it used.
      out["dense_cuda_graph"] = dense_t.graph;
      out["sparse_cuda_graph"] = sparse_t.graph;
      out["cuda_graph_note"] = detail::concat(
          "CUDA graph capture failed, eager forwards timed with events instead: ",
          dense_t.graph ? "" : "dense: " + dense_t.capture_error, !dense_t.graph && !sparse_t.graph ? "; " : "",
          sparse_t.graph ? "" : "sparse: " + sparse_t.capture_error);
    }
    if (a.profile) {
      out["profile_dense"] = dense_t.profile;
      out["profile_sparse"] = sparse_t.profile;
    }
  }
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s %s %s batch %d (%d host threads; %s): dense %.2f ms/batch (%.2f img/s)\n", label.c_str(),
              a.device.c_str(), a.dtype.c_str(), a.batch, out["threads"].get<int>(),
              out["timing"].get<std::string>().c_str(), dense_ms, 1e3 * a.batch / dense_ms);
  std::printf("MLPs block %d sparsity %.2f (%d BSR linears, %d MLPs fused, density %.4f, %.4f computed: %lld fc1 blocks "
              "unread, %lld fc2 blocks folded into the bias): %.2f ms/batch (%.2f img/s), speed-up %.2fx\n",
              block, sparsity, vit_num_bsr_linears(*sparse_model), vit_num_fused_mlps(*sparse_model, a.batch),
              density, out["mlp_density_computed"].get<double>(),
              static_cast<long long>(sparse_model->mlp_fc1_blocks_dropped),
              static_cast<long long>(sparse_model->mlp_fc2_blocks_folded), sparse_ms, 1e3 * a.batch / sparse_ms,
              dense_ms / sparse_ms);
  if (out.contains("cuda_graph_note")) std::printf("%s\n", out["cuda_graph_note"].get<std::string>().c_str());
  if (out.contains("profile_dense")) print_profile("profile of one eager dense forward", out["profile_dense"]);
  if (out.contains("profile_sparse")) print_profile("profile of one eager sparse forward", out["profile_sparse"]);
}

void run_bench(const BenchArgs& a) {
  VITRT_CHECK(a.batch >= 1 && a.iters >= 1 && a.warmup >= 0, InvalidArgument, "batch and iters must be >= 1");
  VITRT_CHECK(!a.profile || a.device == "cuda", InvalidArgument,
              "--profile times CUDA operators with events: it needs --device cuda (got --device ", a.device, ")");
  if (a.model == "vit_b_16" || a.model == "vit_l_16" || a.model == "vit_h_14" || !a.checkpoint.empty())
    return run_bench_vit(a);
  const SamConfig cfg = config_by_name(a.model);
  if (a.device == "cpu") return run_bench_cpu(a, cfg);
  if (a.device == "cuda") return run_bench_cuda(a, cfg);
  throw InvalidArgument("unknown device '" + a.device + "': expected cpu or cuda");
}

}  // namespace

void add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand("bench", "Measure the image encoder and mask decoder (random weights).");
  c->footer("Prints ms per image, achieved GFLOP/s and, as this machine's reference, the GFLOP/s of a plain\n"
            "oneDNN sgemm measured in the same run. FLOPs count the reference's padded windows.");
  c->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  c->add_option("--model", a->model,
                "SAM: vit_b, vit_l or vit_h; ViT classifier (dense vs block-sparse MLPs): vit_b_16, "
                "vit_l_16 or vit_h_14")
      ->capture_default_str();
  c->add_option("--batch", a->batch, "Images per encoder call")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kBulkDecoderDtypeHelp);
  c->add_option("--iters", a->iters, "Timed iterations (median reported)")->capture_default_str();
  c->add_option("--warmup", a->warmup, "Untimed warm-up iterations")->capture_default_str();
  c->add_flag("!--no-decoder", a->decoder, "Skip the mask decoder timing");
  c->add_option("--sparsity", a->sparsity, "ViT classifier: fraction of MLP blocks pruned, in [0, 1)")
      ->capture_default_str();
  c->add_option("--block", a->block, "ViT classifier: BSR block size, 16, 32 or 64")->capture_default_str();
  c->add_option("--checkpoint", a->checkpoint,
                "ViT classifier: time a vitrt model file's own block-sparse weights (from `vitrt sparsify`, "
                "e.g. --supermask) against their dense twin, instead of random weights pruned by magnitude "
                "(--model, --block and --sparsity are then read off the file)")
      ->check(CLI::ExistingFile);
  c->add_flag("--json", a->json, "Print the results as JSON");
  c->add_flag("--profile", a->profile,
             "cuda: also time every operator of one eager (not graphed) encoder forward (JSON \"profile\"; "
             "ViT classifier: of one dense and one sparse forward, \"profile_dense\" / \"profile_sparse\")");
  c->callback([a] { run_bench(*a); });
}

void add_fidelity_check(CLI::App& app) {
  struct Args {
    std::string checkpoint, config, reference, image, device = "cpu", dtype = "fp32", decoder_dtype;
    double tol = 1e-4;
    double min_mask_agreement = -1;  // < 0: exact masks for fp32, 0.995 for bf16
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("fidelity-check",
                                   "Compare with reference outputs of the official segment-anything code.");
  c->footer("The reference file is written by scripts/make_sam_fixtures.py or scripts/fidelity_full.py.\n"
            "Prints JSON; exits 1 when the check fails. fp32: the embedding, low-res logits and IoU predictions\n"
            "within --tol relative error and every thresholded mask pixel equal (pixels whose reference logit\n"
            "is within 1e-3 of 0 excepted). bf16: the embedding within --tol and the thresholded masks agreeing\n"
            "on at least --min-mask-agreement of the pixels (logit errors are reported, not checked).");
  add_sam_model_options(c, a->checkpoint, a->config);
  c->add_option("--reference", a->reference, "Reference outputs (.pth)")->required()->check(CLI::ExistingFile);
  c->add_option("--image", a->image, "The image the reference was computed on")->required()->check(CLI::ExistingFile);
  c->add_option("--tol", a->tol, "Relative error bound")->capture_default_str();
  c->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, or bf16 on cuda")->capture_default_str();
  c->add_option("--decoder-dtype", a->decoder_dtype, kDecoderDtypeHelp);
  c->add_option("--min-mask-agreement", a->min_mask_agreement,
                "Fraction of mask pixels that must agree (default: 1 for fp32, 0.995 for bf16)")
      ->check(CLI::Range(0.0, 1.0));
  c->callback([a] {
    const std::pair<Device, DType> device_dtype = parse_device(a->device, a->dtype);
    const Device device = device_dtype.first;
    const DType dtype = device_dtype.second;
    const bool exact = dtype == DType::F32 && a->decoder_dtype != "bf16";
    const double min_agree = a->min_mask_agreement >= 0 ? a->min_mask_agreement : exact ? 1.0 : 0.995;
    SamPredictor predictor(
        load_sam(a->checkpoint, a->config, device, dtype, parse_decoder_dtype(a->decoder_dtype, device)));
    sam::FidelityReport r = sam::compare_with_reference(predictor, read_image(a->image), load_state_dict(a->reference));
    bool ok = r.resized_identical && r.embedding_rel <= a->tol;
    nlohmann::json cases = nlohmann::json::array();
    double worst_agree = 1.0;
    for (const auto& fc : r.cases) {
      const double agree = fc.mask_pixels ? 1.0 - static_cast<double>(fc.mask_mismatch) / fc.mask_pixels : 1.0;
      worst_agree = std::min(worst_agree, agree);
      if (exact) ok &= fc.low_res_rel <= a->tol && fc.iou_rel <= a->tol;
      ok &= min_agree >= 1.0 ? fc.mask_mismatch == 0 : agree >= min_agree;
      cases.push_back({{"case", fc.name}, {"iou_rel", fc.iou_rel}, {"low_res_rel", fc.low_res_rel},
                       {"mask_mismatch", fc.mask_mismatch}, {"mask_agreement", agree}, {"near_zero", fc.near_zero},
                       {"pixels", fc.mask_pixels}});
    }
    nlohmann::json j = {{"device", a->device}, {"dtype", a->dtype},
                        {"decoder_dtype", a->decoder_dtype.empty() ? "fp32" : a->decoder_dtype},
                        {"resized_identical", r.resized_identical},
                        {"embedding_rel", r.embedding_rel}, {"min_mask_agreement", worst_agree},
                        {"required_mask_agreement", min_agree}, {"cases", cases}, {"pass", ok}};
    std::printf("%s\n", j.dump(2).c_str());
    if (!ok) throw Error("fidelity check failed (see JSON above)");
  });
}

}  // namespace vitrt::cli
