// Throwaway micro-benchmark of the CPU operators against the machine's plain sgemm rate.
// Not part of the build; compile by hand against a built libvitrt, e.g.
//   g++ -std=c++20 -O3 -march=x86-64-v3 -fopenmp -Iinclude -Isrc bench/ops_cpu_bench.cpp \
//       build-ops/src/libvitrt.a -ldnnl -o /tmp/ops_cpu_bench
// It also runs a vit_b-shaped image encoder (random weights, real shapes and op sequence) to
// estimate whole-encoder efficiency. On a machine shared with other jobs, measure one core's
// CPU time instead of wall time:
//   OMP_NUM_THREADS=1 VITRT_BENCH_CPUTIME=1 VITRT_BENCH_MALLOPT=1 /tmp/ops_cpu_bench 3
#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <functional>
#include <vector>

#include "ops/cpu/attention.h"
#include "ops/cpu/gemm.h"
#include "ops/ops.h"

using namespace vitrt;

namespace {

Tensor rnd(Shape s, uint32_t seed, float scale = 0.05f) {
  std::vector<float> v(shape_numel(s));
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = (static_cast<float>(seed >> 8) / 16777216.f * 2.f - 1.f) * scale;
  }
  return Tensor::from_vector(v, s);
}

// With VITRT_BENCH_CPUTIME=1 the process CPU time is measured instead of wall time: on a
// machine shared with other jobs this is far steadier (run with OMP_NUM_THREADS=1 then, so no
// spinning threads are counted).
bool use_cpu_time() {
  const char* e = std::getenv("VITRT_BENCH_CPUTIME");
  return e && e[0] == '1';
}

double now() {
  if (use_cpu_time()) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best-of-n time of f in seconds (after one warm-up call).
double time_best(const std::function<void()>& f, int n) {
  f();
  double best = 1e30;
  for (int i = 0; i < n; ++i) {
    double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

double attn_flops(int64_t windows, int64_t n, int64_t heads, int64_t hd) { return 4.0 * windows * heads * n * n * hd; }

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  // VITRT_BENCH_MALLOPT=1: keep freed big blocks in the heap instead of returning them to the
  // OS, so that re-allocating a 40 MB activation does not page-fault it in again every call.
  if (const char* e = std::getenv("VITRT_BENCH_MALLOPT"); e && e[0] == '1') {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  // Reference: best of several timed sgemm runs (the same clock as the ops below).
  std::vector<float> ga(4096 * 768, 0.5f), gb(768 * 2304, 0.25f), gc(4096 * 2304);
  const double tref = time_best([&] {
    cpu::sgemm(false, false, 4096, 2304, 768, 1.f, ga.data(), 768, gb.data(), 2304, 0.f, gc.data(), 2304);
  }, 2 * reps);
  const double ref = 2.0 * 4096 * 2304 * 768 / tref / 1e9;
  std::printf("plain sgemm 4096x2304x768: %.1f GFLOP/s (reference)\n", ref);

  auto report = [&](const char* name, double flops, double secs) {
    std::printf("%-44s %8.2f ms %8.1f GFLOP/s  %5.1f%% of sgemm\n", name, secs * 1e3, flops / secs / 1e9,
                100.0 * flops / secs / 1e9 / ref);
  };

  Tensor x = rnd({1, 64, 64, 768}, 1, 1.f);
  Tensor wqkv = rnd({2304, 768}, 2), bqkv = rnd({2304}, 3);
  report("linear 4096x768 -> 2304 +bias", 2.0 * 4096 * 768 * 2304,
         time_best([&] { ops::linear(x, wqkv, &bqkv); }, reps));
  Tensor w1 = rnd({3072, 768}, 4), b1 = rnd({3072}, 5), w2 = rnd({768, 3072}, 6), b2 = rnd({768}, 7);
  report("linear 4096x768 -> 3072 +bias GELU", 2.0 * 4096 * 768 * 3072,
         time_best([&] { ops::linear(x, w1, &b1, ops::Activation::GELU); }, reps));
  Tensor h = rnd({1, 64, 64, 3072}, 8, 1.f);
  report("linear 4096x3072 -> 768 +bias +residual", 2.0 * 4096 * 768 * 3072,
         time_best([&] { ops::linear(h, w2, &b2, ops::Activation::None, &x); }, reps));

  const int64_t heads = 12, hd = 64;
  Tensor qkv_win = rnd({25, 196, 2304}, 9, 1.f);
  Tensor rph_w = rnd({27, hd}, 10), rpw_w = rnd({27, hd}, 11);
  report("attention_relpos 25 x 14x14, 12 heads", attn_flops(25, 196, heads, hd),
         time_best([&] { ops::attention_relpos(qkv_win, 12, 14, 14, &rph_w, &rpw_w); }, reps));
  Tensor qkv_g = rnd({1, 4096, 2304}, 12, 1.f);
  Tensor rph_g = rnd({127, hd}, 13), rpw_g = rnd({127, hd}, 14);
  for (int64_t rb : {0, 64, 128, 256}) {
    cpu::set_attention_row_block(rb);
    char name[80];
    std::snprintf(name, sizeof name, "attention_relpos 64x64 global rb=%lld", static_cast<long long>(rb));
    report(name, attn_flops(1, 4096, heads, hd),
           time_best([&] { ops::attention_relpos(qkv_g, 12, 64, 64, &rph_g, &rpw_g); }, std::max(1, reps / 2)));
  }
  cpu::set_attention_row_block(0);

  Tensor img = rnd({1, 1024, 1024, 3}, 15, 1.f);
  Tensor wpe = rnd({768, 3, 16, 16}, 16), bpe = rnd({768}, 17);
  report("conv2d patch embed 16x16/16, 3->768", 2.0 * 4096 * 768 * 768,
         time_best([&] { ops::conv2d_nhwc(img, wpe, &bpe, 16, 0); }, reps));
  Tensor f256 = rnd({1, 64, 64, 256}, 18, 1.f), wn = rnd({256, 256, 3, 3}, 19);
  report("conv2d neck 3x3 pad 1, 256->256", 2.0 * 4096 * 256 * 2304,
         time_best([&] { ops::conv2d_nhwc(f256, wn, nullptr, 1, 1); }, reps));

  // vit_b image encoder: patch embed, 12 blocks (windows of 14, global at 2, 5, 8, 11), neck.
  struct Block {
    Tensor ln1w, ln1b, wqkv, bqkv, rph, rpw, wproj, bproj, ln2w, ln2b, w1, b1, w2, b2;
    bool global;
  };
  std::vector<Block> blocks;
  for (int i = 0; i < 12; ++i) {
    bool g = i % 3 == 2;
    int64_t L = g ? 127 : 27;
    uint32_t s = 100 + 20 * i;
    blocks.push_back(Block{rnd({768}, s, 1.f), rnd({768}, s + 1), rnd({2304, 768}, s + 2), rnd({2304}, s + 3),
                           rnd({L, hd}, s + 4), rnd({L, hd}, s + 5), rnd({768, 768}, s + 6), rnd({768}, s + 7),
                           rnd({768}, s + 8, 1.f), rnd({768}, s + 9), rnd({3072, 768}, s + 10), rnd({3072}, s + 11),
                           rnd({768, 3072}, s + 12), rnd({768}, s + 13), g});
  }
  Tensor pos = rnd({1, 64, 64, 768}, 50);
  Tensor neck1 = rnd({256, 768, 1, 1}, 51), neck2 = rnd({256, 256, 3, 3}, 52);
  Tensor nw = rnd({256}, 53, 1.f), nb = rnd({256}, 54);
  auto encoder = [&] {
    Tensor t = ops::conv2d_nhwc(img, wpe, &bpe, 16, 0);
    ops::add_(t, pos);
    for (const Block& b : blocks) {
      Tensor y = ops::layer_norm(t, b.ln1w, b.ln1b, 1e-6f);
      int64_t n_win = 1, side = 64;
      if (!b.global) {
        y = ops::window_partition(y, 14);
        n_win = y.size(0);
        side = 14;
      }
      Tensor qkv = ops::linear(y.reshape({n_win, side * side, 768}), b.wqkv, &b.bqkv);
      Tensor a = ops::attention_relpos(qkv, 12, side, side, &b.rph, &b.rpw);
      if (!b.global) a = ops::window_unpartition(a.reshape({n_win, 14, 14, 768}), 14, 64, 64);
      t = ops::linear(a.reshape({1, 64, 64, 768}), b.wproj, &b.bproj, ops::Activation::None, &t);
      Tensor z = ops::layer_norm(t, b.ln2w, b.ln2b, 1e-6f);
      z = ops::linear(z, b.w1, &b.b1, ops::Activation::GELU);
      t = ops::linear(z, b.w2, &b.b2, ops::Activation::None, &t);
    }
    Tensor n = ops::conv2d_nhwc(t, neck1, nullptr, 1, 0);
    n = ops::layer_norm(n, nw, nb, 1e-6f);
    n = ops::conv2d_nhwc(n, neck2, nullptr, 1, 1);
    n = ops::layer_norm(n, nw, nb, 1e-6f);
  };
  const double block_linear = 2.0 * 4096 * 768 * (2304 + 768 + 3072 + 3072);
  const double flops = 2.0 * 4096 * 768 * 768 /* patch embed */ + 12 * block_linear +
                       8 * attn_flops(25, 196, heads, hd) + 4 * attn_flops(1, 4096, heads, hd) +
                       2.0 * 4096 * 768 * 256 + 2.0 * 4096 * 2304 * 256;
  report("vit_b image encoder (1024x1024)", flops, time_best(encoder, std::max(1, reps / 2)));
  return 0;
}
