// CUDA attention (src/ops/cuda/attention.*) against the CPU operators on random inputs:
//  - attention_relpos (global grids 16x16, 12x20, 32x32, 64x64; 14x14 windows as a batch of
//    sequences), head dims 64 / 80 / 128 on the tensor-core kernel (both the short- and the
//    long-sequence configurations), 48 and odd grid widths on the BF16 CUDA-core fallback, with
//    and without rel-pos, F32 / BF16 / interpolated rel tables;
//  - attention_relpos_windowed against window_partition + qkv linear + attention + unpartition
//    (grids padded 64 -> 70, 20x30, 9x5 inside one window, bottom-edge windows of 3 rows, odd batch counts);
//  - attention (mask decoder shapes: 7 queries x 4096 keys, 4096 x 7, head dims 32 / 16 / 48);
//  - bad arguments.
// BF16 results are compared with the CPU result on the same bf16-rounded inputs (relative
// Frobenius error <= 2e-2), F32 results with the CPU result (<= 1e-5). A timing section prints
// achieved TFLOP/s at vit_b / vit_h shapes (no assertion). Everything skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ops/ops.h"
#include "vitrt/tensor.h"

#ifdef VITRT_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/attention.h"
#include "ops/cuda/runtime.h"
#endif

using vitrt::Device;
using vitrt::DType;
using vitrt::Shape;
using vitrt::Tensor;
namespace ops = vitrt::ops;

#ifndef VITRT_HAVE_CUDA
TEST(CudaAttention, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else

namespace cimpl = vitrt::ops::cuda_impl;

namespace {

#define REQUIRE_GPU()                                                           \
  do {                                                                          \
    if (vitrt::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

Tensor randn(const Shape& shape, uint64_t seed, float stddev = 1.f, float mean = 0.f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(mean, stddev);
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

// Host F32 tensor with every value rounded through bf16.
Tensor round_bf16(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  const float* s = x.data<float>();
  float* d = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = vitrt::bf16_to_f32(vitrt::f32_to_bf16(s[i]));
  return y;
}

// Host F32 -> device tensor of dtype dt (BF16: rounded to nearest even).
Tensor to_dev(const Tensor& x, DType dt) {
  if (dt == DType::F32) return x.to(Device::CUDA);
  Tensor h = Tensor::empty(x.shape(), DType::BF16);
  const float* s = x.data<float>();
  uint16_t* d = h.data<uint16_t>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = vitrt::f32_to_bf16(s[i]);
  return h.to(Device::CUDA);
}

Tensor to_host(const Tensor& d) {
  vitrt::cuda::synchronize();  // surfaces asynchronous kernel errors here
  return d.to(Device::CPU).to_f32();
}

struct Cmp {
  double rel = 0, max_abs = 0;
  int64_t nonfinite = 0;
};

Cmp compare(const Tensor& got, const Tensor& ref) {
  Cmp c;
  EXPECT_EQ(got.shape(), ref.shape());
  if (got.shape() != ref.shape()) {
    c.rel = INFINITY;
    return c;
  }
  const float* g = got.data<float>();
  const float* r = ref.data<float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (!std::isfinite(g[i])) {
      ++c.nonfinite;
      continue;
    }
    const double d = static_cast<double>(g[i]) - r[i];
    num += d * d;
    den += static_cast<double>(r[i]) * r[i];
    c.max_abs = std::max(c.max_abs, std::abs(d));
  }
  c.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return c;
}

void expect_match(const Tensor& got_dev, const Tensor& ref, DType dt, const std::string& what) {
  const Tensor got = to_host(got_dev);
  const Cmp c = compare(got, ref);
  const double tol = dt == DType::BF16 ? 2e-2 : 1e-5;
  std::printf("  %-72s rel %.3e  max_abs %.3e\n", what.c_str(), c.rel, c.max_abs);
  EXPECT_EQ(c.nonfinite, 0) << what << ": non-finite outputs";
  EXPECT_LE(c.rel, tol) << what << ": relative Frobenius error " << c.rel << " (max abs " << c.max_abs << ")";
}

const char* dname(DType dt) { return dt == DType::BF16 ? "bf16" : "f32"; }

enum class Rel { None, F32, BF16, Interp };
const char* relname(Rel r) {
  switch (r) {
    case Rel::None: return "no-rel";
    case Rel::F32: return "rel-f32";
    case Rel::BF16: return "rel-bf16";
    case Rel::Interp: return "rel-interp";
  }
  return "?";
}

// Rel tables for an H x W grid: host values for the reference (already rounded where the device
// copy is BF16) and the device tensors.
struct RelTabs {
  Tensor h_ref, w_ref, h_dev, w_dev;
};
RelTabs make_rel(Rel mode, int64_t H, int64_t W, int64_t hd, uint64_t seed) {
  RelTabs t;
  if (mode == Rel::None) return t;
  // Interp: tables trained for a smaller grid (rows 2*(H-3)-1 etc.), interpolated by the op.
  const int64_t lh = mode == Rel::Interp ? std::max<int64_t>(2 * (H - 3) - 1, 1) : 2 * H - 1;
  const int64_t lw = mode == Rel::Interp ? std::max<int64_t>(2 * (W - 3) - 1, 1) + 2 : 2 * W - 1;
  Tensor h = randn({lh, hd}, seed, 0.5f), w = randn({lw, hd}, seed + 1, 0.5f);
  if (mode == Rel::BF16) {
    h = round_bf16(h);
    w = round_bf16(w);
  }
  t.h_ref = h;
  t.w_ref = w;
  const DType dt = mode == Rel::BF16 ? DType::BF16 : DType::F32;
  t.h_dev = to_dev(h, dt);
  t.w_dev = to_dev(w, dt);
  return t;
}

// ---------------------------------------------------------------------------------------------
// attention_relpos

struct RelposCase {
  DType dt;
  int64_t B, H, W;
  int heads, hd;
  Rel rel;
};

// Keys of grid rows [y0, y1) multiplied by `factor` (before the bf16 rounding): scores that jump far
// above those of the first key rows, as a softmax without per-tile maxima must survive.
struct KeyRowScale {
  int64_t y0 = 0, y1 = 0;
  float factor = 1.f;
};

void run_relpos(const RelposCase& c, uint64_t seed, const std::vector<KeyRowScale>& key_scales = {}) {
  const int64_t N = c.H * c.W, C = int64_t{c.heads} * c.hd;
  Tensor qkv = randn({c.B, N, 3 * C}, seed);
  for (const KeyRowScale& ks : key_scales)
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t t = ks.y0 * c.W; t < std::min(ks.y1, c.H) * c.W; ++t) {
        float* k = qkv.data<float>() + (b * N + t) * 3 * C + C;
        for (int64_t j = 0; j < C; ++j) k[j] *= ks.factor;
      }
  if (c.dt == DType::BF16) qkv = round_bf16(qkv);
  RelTabs rt = make_rel(c.rel, c.H, c.W, c.hd, seed + 100);
  const bool rel = c.rel != Rel::None;
  Tensor ref = ops::attention_relpos(qkv, c.heads, c.H, c.W, rel ? &rt.h_ref : nullptr, rel ? &rt.w_ref : nullptr);
  Tensor qd = to_dev(qkv, c.dt);
  Tensor got = cimpl::attention_relpos(qd, c.heads, c.H, c.W, rel ? &rt.h_dev : nullptr, rel ? &rt.w_dev : nullptr);
  EXPECT_EQ(got.dtype(), c.dt);
  EXPECT_EQ(got.device(), Device::CUDA);
  char what[200];
  std::snprintf(what, sizeof what, "attention_relpos %s B=%lld %lldx%lld heads=%d hd=%d %s", dname(c.dt),
                static_cast<long long>(c.B), static_cast<long long>(c.H), static_cast<long long>(c.W), c.heads, c.hd,
                relname(c.rel));
  expect_match(got, ref, c.dt, what);
}

// ---------------------------------------------------------------------------------------------
// windowed

// Reference with explicit window gather: padding tokens get the bias row (as ops_window.cpp).
Tensor windowed_gather_ref(const Tensor& qkv_grid, const Tensor& bias, int heads, int ws, const Tensor* rh,
                           const Tensor* rw) {
  const int64_t B = qkv_grid.size(0), H = qkv_grid.size(1), W = qkv_grid.size(2), C3 = qkv_grid.size(3), C = C3 / 3;
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws, ws2 = int64_t{ws} * ws;
  Tensor win = Tensor::empty({B * nh * nw, ws2, C3});
  const float* src = qkv_grid.data<float>();
  const float* bp = bias.data<float>();
  float* dst = win.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t wy = 0; wy < nh; ++wy)
      for (int64_t wx = 0; wx < nw; ++wx)
        for (int64_t t = 0; t < ws2; ++t) {
          const int64_t y = wy * ws + t / ws, x = wx * ws + t % ws;
          const float* s = (y < H && x < W) ? src + ((b * H + y) * W + x) * C3 : bp;
          std::copy(s, s + C3, dst + (((b * nh + wy) * nw + wx) * ws2 + t) * C3);
        }
  Tensor att = ops::attention_relpos(win, heads, ws, ws, rh, rw);
  Tensor out = Tensor::empty({B, H, W, C});
  const float* a = att.data<float>();
  float* o = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const float* s = a + (((b * nh + y / ws) * nw + x / ws) * ws2 + (y % ws) * ws + x % ws) * C;
        std::copy(s, s + C, o + ((b * H + y) * W + x) * C);
      }
  return out;
}

// The reference model's path: zero-pad the block input, partition, qkv linear, attention,
// unpartition (x [B, H, W, Cin], qkv weight w [3C, Cin], bias b [3C]).
Tensor windowed_partition_ref(const Tensor& x, const Tensor& w, const Tensor& b, int heads, int ws, const Tensor* rh,
                              const Tensor* rw) {
  const int64_t H = x.size(1), W = x.size(2), Cin = x.size(3), C = w.size(0) / 3;
  Tensor xw = ops::window_partition(x, ws);  // [nW, ws, ws, Cin]
  const int64_t nW = xw.size(0), ws2 = int64_t{ws} * ws;
  Tensor qkv = ops::linear(xw.reshape({nW, ws2, Cin}), w, &b);
  Tensor att = ops::attention_relpos(qkv, heads, ws, ws, rh, rw);
  return ops::window_unpartition(att.reshape({nW, ws, ws, C}), ws, H, W);
}

struct WinCase {
  DType dt;
  int64_t B, H, W;
  int ws, heads, hd;
  Rel rel;
};

void run_windowed(const WinCase& c, uint64_t seed) {
  const int64_t C = int64_t{c.heads} * c.hd, Cin = 24;
  Tensor x = randn({c.B, c.H, c.W, Cin}, seed);
  Tensor w = randn({3 * C, Cin}, seed + 1, 0.3f);
  Tensor b = randn({3 * C}, seed + 2, 0.7f);
  RelTabs rt = make_rel(c.rel, c.ws, c.ws, c.hd, seed + 3);
  const bool rel = c.rel != Rel::None;
  const Tensor* rh = rel ? &rt.h_ref : nullptr;
  const Tensor* rw = rel ? &rt.w_ref : nullptr;
  Tensor qkv_grid = ops::linear(x, w, &b);  // [B, H, W, 3C]: the qkv linear on the real tokens only
  char what[200];
  std::snprintf(what, sizeof what, "windowed %s B=%lld grid %lldx%lld ws=%d heads=%d hd=%d %s", dname(c.dt),
                static_cast<long long>(c.B), static_cast<long long>(c.H), static_cast<long long>(c.W), c.ws, c.heads,
                c.hd, relname(c.rel));
  Tensor ref;
  if (c.dt == DType::F32) {
    ref = windowed_partition_ref(x, w, b, c.heads, c.ws, rh, rw);
  } else {
    qkv_grid = round_bf16(qkv_grid);
    ref = windowed_gather_ref(qkv_grid, round_bf16(b), c.heads, c.ws, rh, rw);
  }
  // The bias goes in as F32 (BF16 case: converted on the device, as the model may hold it).
  Tensor got = cimpl::attention_relpos_windowed(to_dev(qkv_grid, c.dt), b.to(Device::CUDA), c.heads, c.ws,
                                                rel ? &rt.h_dev : nullptr, rel ? &rt.w_dev : nullptr);
  EXPECT_EQ(got.dtype(), c.dt);
  expect_match(got, ref, c.dt, what);
}

// ---------------------------------------------------------------------------------------------
// plain attention

struct AttnCase {
  DType dt;
  int64_t B, Nq, Nk, D;
  int heads;
};

// shared_q: q is [1, Nq, D], one query sequence against each of the B key sequences.
void run_attention(const AttnCase& c, uint64_t seed, bool shared_q = false) {
  Tensor q = randn({shared_q ? 1 : c.B, c.Nq, c.D}, seed), k = randn({c.B, c.Nk, c.D}, seed + 1), v = randn({c.B, c.Nk, c.D}, seed + 2);
  if (c.dt == DType::BF16) {
    q = round_bf16(q);
    k = round_bf16(k);
    v = round_bf16(v);
  }
  Tensor ref = ops::attention(q, k, v, c.heads);
  Tensor got = cimpl::attention(to_dev(q, c.dt), to_dev(k, c.dt), to_dev(v, c.dt), c.heads);
  char what[200];
  std::snprintf(what, sizeof what, "attention %s B=%lld%s Nq=%lld Nk=%lld D=%lld heads=%d", dname(c.dt),
                static_cast<long long>(c.B), shared_q ? " (one q)" : "", static_cast<long long>(c.Nq), static_cast<long long>(c.Nk),
                static_cast<long long>(c.D), c.heads);
  expect_match(got, ref, c.dt, what);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(CudaAttention, RelposGlobalSmall) {
  REQUIRE_GPU();
  std::printf("device: %s\n", vitrt::cuda::device_description(0).c_str());
  uint64_t seed = 1000;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_relpos({dt, 3, 16, 16, 2, 64, Rel::F32}, seed++);
    run_relpos({dt, 3, 16, 16, 2, 64, Rel::None}, seed++);
    run_relpos({dt, 3, 16, 16, 2, 64, Rel::BF16}, seed++);
    run_relpos({dt, 1, 16, 16, 2, 80, Rel::F32}, seed++);
    run_relpos({dt, 1, 16, 16, 2, 80, Rel::BF16}, seed++);
    run_relpos({dt, 2, 16, 16, 1, 80, Rel::None}, seed++);
    run_relpos({dt, 2, 12, 20, 2, 64, Rel::F32}, seed++);   // H != W
    run_relpos({dt, 1, 20, 12, 1, 80, Rel::BF16}, seed++);  // H != W, N = 240 (not a tile multiple)
    run_relpos({dt, 1, 14, 14, 2, 64, Rel::Interp}, seed++);
    run_relpos({dt, 1, 14, 14, 1, 80, Rel::Interp}, seed++);
    run_relpos({dt, 2, 7, 9, 2, 48, Rel::F32}, seed++);  // hd 48: CUDA-core kernel in both dtypes
    run_relpos({dt, 1, 5, 5, 1, 128, Rel::F32}, seed++);
    run_relpos({dt, 1, 1, 1, 1, 64, Rel::F32}, seed++);  // one token
    run_relpos({dt, 2, 6, 9, 2, 64, Rel::BF16}, seed++);  // odd W: CUDA-core kernel in both dtypes
    run_relpos({dt, 1, 32, 32, 2, 80, Rel::F32}, seed++);  // 1024 tokens: the long-sequence configuration
  }
}

TEST(CudaAttention, RelposWindowsAsBatch) {
  REQUIRE_GPU();
  uint64_t seed = 2000;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_relpos({dt, 7, 14, 14, 3, 64, Rel::F32}, seed++);   // 196 tokens: partial last tiles
    run_relpos({dt, 7, 14, 14, 3, 64, Rel::BF16}, seed++);
    run_relpos({dt, 5, 14, 14, 2, 80, Rel::F32}, seed++);
    run_relpos({dt, 5, 14, 14, 2, 80, Rel::None}, seed++);
    run_relpos({dt, 25, 14, 14, 1, 64, Rel::None}, seed++);
  }
}

// 14 x 14 sequences whose later key rows score far higher (~16 and ~30 nats: the Hopper windowed
// kernels' rescaling between key chunks, which the chunked form does three times per window), or
// whose first key row does.
TEST(CudaAttention, RelposWindowsScoreJumps) {
  REQUIRE_GPU();
  uint64_t seed = 2500;
  for (int hd : {64, 80}) {
    run_relpos({DType::BF16, 3, 14, 14, 2, hd, Rel::F32}, seed++, {{5, 8, 16.f}, {10, 14, 30.f}});
    run_relpos({DType::BF16, 3, 14, 14, 1, hd, Rel::BF16}, seed++, {{0, 1, 30.f}});
  }
}

TEST(CudaAttention, RelposGlobal64) {
  REQUIRE_GPU();
  uint64_t seed = 3000;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_relpos({dt, 1, 64, 64, 2, 64, Rel::F32}, seed++);
    run_relpos({dt, 1, 64, 64, 1, 80, Rel::BF16}, seed++);
  }
  // bf16, one case each (seeds in this order): 64 x 64 grids, then grids 64 wide of other heights
  // (the wgmma kernel's key tile is one grid row): 5, 6, 2, 4 and 8 key tiles, odd and even counts,
  // with the last query tile partly past the sequence.
  const RelposCase bf16_cases[] = {
      {DType::BF16, 2, 64, 64, 2, 64, Rel::BF16}, {DType::BF16, 1, 64, 64, 2, 80, Rel::F32},
      {DType::BF16, 1, 64, 64, 2, 64, Rel::None}, {DType::BF16, 2, 5, 64, 2, 64, Rel::F32},
      {DType::BF16, 1, 5, 64, 1, 80, Rel::BF16},  {DType::BF16, 1, 6, 64, 2, 64, Rel::BF16},
      {DType::BF16, 2, 6, 64, 1, 80, Rel::F32},   {DType::BF16, 3, 2, 64, 2, 64, Rel::None},
      {DType::BF16, 1, 2, 64, 2, 80, Rel::F32},   {DType::BF16, 2, 4, 64, 2, 64, Rel::BF16},
      {DType::BF16, 1, 8, 64, 1, 64, Rel::F32},   {DType::BF16, 1, 8, 64, 2, 80, Rel::BF16},
  };
  for (const RelposCase& c : bf16_cases) run_relpos(c, seed++);
}

// Scores far above the first key tile's (with 64 x 64 grids a key tile is one grid row): rows 5..7
// reach ~50 nats more (2^70 and more over the first tile's maximum), rows 10..19 ~100 (the exps of a
// softmax that kept the earlier maximum would overflow); and the opposite, the largest
// scores in the first tile. (A softmax without per-tile maxima, measured 2026-12-04, needed its fall-back path here.)
TEST(CudaAttention, RelposGlobalScoreJumps) {
  REQUIRE_GPU();
  uint64_t seed = 3500;
  for (int hd : {64, 80}) {
    run_relpos({DType::BF16, 1, 64, 64, 2, hd, Rel::F32}, seed++, {{5, 8, 16.f}, {10, 20, 30.f}});
    run_relpos({DType::BF16, 1, 64, 64, 1, hd, Rel::BF16}, seed++, {{0, 1, 30.f}});
    run_relpos({DType::F32, 1, 64, 64, 1, hd, Rel::F32}, seed++, {{5, 8, 16.f}, {10, 20, 30.f}});
  }
}

TEST(CudaAttention, WindowedVariant) {
  REQUIRE_GPU();
  uint64_t seed = 4000;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_windowed({dt, 1, 64, 64, 14, 2, 64, Rel::F32}, seed++);  // 64 -> 70: 5x5 windows, padded last row/col
    run_windowed({dt, 3, 20, 30, 14, 1, 80, Rel::BF16}, seed++);
    run_windowed({dt, 3, 20, 30, 14, 2, 64, Rel::None}, seed++);
    run_windowed({dt, 2, 28, 28, 14, 1, 64, Rel::F32}, seed++);  // no padding
    run_windowed({dt, 1, 9, 5, 14, 2, 80, Rel::F32}, seed++);    // grid inside one window
    run_windowed({dt, 1, 64, 64, 14, 1, 80, Rel::Interp}, seed++);
    // Bottom-edge windows of 3 real rows (42 queries): one m-tile of 64 rows in the Hopper windowed kernel.
    run_windowed({dt, 1, 17, 30, 14, 2, 80, Rel::F32}, seed++);
    run_windowed({dt, 3, 31, 16, 14, 1, 64, Rel::BF16}, seed++);
    run_windowed({dt, 3, 17, 11, 8, 2, 48, Rel::F32}, seed++);  // hd 48: CUDA-core kernel
    run_windowed({dt, 2, 15, 16, 7, 2, 64, Rel::BF16}, seed++);  // odd window: CUDA-core kernel
  }
}

// The test's two CPU references for the windowed op agree (no device needed, but kept here).
TEST(CudaAttention, WindowedReferencesAgree) {
  const int heads = 2, hd = 16, ws = 7;
  const int64_t C = heads * hd;
  Tensor x = randn({3, 10, 9, 12}, 5);
  Tensor w = randn({3 * C, 12}, 6, 0.3f), b = randn({3 * C}, 7, 0.7f);
  Tensor rh = randn({2 * ws - 1, hd}, 8, 0.5f), rw = randn({2 * ws - 1, hd}, 9, 0.5f);
  Tensor a = windowed_partition_ref(x, w, b, heads, ws, &rh, &rw);
  Tensor g = windowed_gather_ref(ops::linear(x, w, &b), b, heads, ws, &rh, &rw);
  const Cmp c = compare(g, a);
  EXPECT_LE(c.rel, 1e-6);
}

TEST(CudaAttention, PlainAttention) {
  REQUIRE_GPU();
  uint64_t seed = 5000;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_attention({dt, 2, 7, 4096, 256, 8}, seed++);   // tokens -> image (hd 32)
    run_attention({dt, 2, 4096, 7, 256, 8}, seed++);   // image -> tokens
    run_attention({dt, 3, 7, 4096, 128, 8}, seed++);   // downsampled cross attention (hd 16)
    run_attention({dt, 3, 4096, 5, 128, 8}, seed++);
    // The decoder's layer 0 with keys per image: all prompts' tokens stacked as one long query
    // sequence against the image's 4096 keys (many query tiles, a partial last one).
    run_attention({dt, 1, 448, 4096, 128, 8}, seed++);
    run_attention({dt, 2, 113, 4096, 128, 8}, seed++);
    run_attention({dt, 1, 300, 4096, 256, 8}, seed++);
    run_attention({dt, 2, 7, 7, 256, 8}, seed++);      // token self-attention
    run_attention({dt, 2, 33, 70, 96, 2}, seed++);     // hd 48: CUDA-core kernel
    run_attention({dt, 1, 100, 300, 256, 4}, seed++);  // hd 64, no rel
    run_attention({dt, 1, 9, 130, 24, 3}, seed++);     // hd 8
    // The decoder's layer 0 image-to-token attention: one image's queries for every prompt.
    run_attention({dt, 3, 4096, 7, 128, 8}, seed++, true);
    run_attention({dt, 5, 333, 5, 256, 8}, seed++, true);
    run_attention({dt, 2, 50, 20, 96, 2}, seed++, true);  // CUDA-core kernel
  }
}

TEST(CudaAttention, ShortSequences) {
  // attention_wgmma_short.cu on Hopper (the mma.sync kernel elsewhere): dense self-attention of
  // ViT token counts without rel-pos, both head dims, every chunk layout (3 or 4 chunks of 64 keys,
  // with and without the 16-key chunk, 1 and 16 real keys in it), partial last m-tiles (warps with
  // no real row), many m-tiles, one query row; against the CPU on bf16-rounded inputs. Then the
  // ViT's own path (q, k, v read in place from one packed qkv tensor), and keys whose later chunks
  // score far above the first (the lazy rescaling of O between chunks).
  REQUIRE_GPU();
  uint64_t seed = 5800;
  const AttnCase cases[] = {
      {DType::BF16, 3, 197, 197, 768, 12},  // ViT-B/16: 3 x 64 + 5 keys
      {DType::BF16, 2, 257, 257, 1280, 16},  // ViT-H/14: 4 x 64 + 1
      {DType::BF16, 2, 192, 192, 256, 4},   // 3 x 64, no 16-key chunk
      {DType::BF16, 1, 256, 256, 320, 4},   // 4 x 64, head dim 80
      {DType::BF16, 3, 208, 208, 128, 2},   // the 16-key chunk full
      {DType::BF16, 2, 193, 193, 160, 2},   // one key in it, head dim 80
      {DType::BF16, 2, 100, 200, 256, 4},   // nq != nk
      {DType::BF16, 1, 1000, 272, 320, 4},  // 16 m-tiles
      {DType::BF16, 5, 1, 197, 128, 2},     // one query row
      // A last m-tile of 6 real rows against three chunks; a single m-tile of 16 rows.
      {DType::BF16, 2, 70, 192, 256, 4},
      {DType::BF16, 3, 16, 200, 320, 4},
  };
  for (const AttnCase& c : cases) {
    Tensor q = round_bf16(randn({c.B, c.Nq, c.D}, seed)), k = round_bf16(randn({c.B, c.Nk, c.D}, seed + 1));
    Tensor v = round_bf16(randn({c.B, c.Nk, c.D}, seed + 2));
    seed += 3;
    const Tensor ref = ops::attention(q, k, v, c.heads);
    const Tensor got = to_host(cimpl::attention(to_dev(q, c.dt), to_dev(k, c.dt), to_dev(v, c.dt), c.heads));
    const Cmp r = compare(got, ref);
    std::printf("  short B=%lld Nq=%lld Nk=%lld D=%lld heads=%d: rel %.3e max_abs %.3e\n", static_cast<long long>(c.B),
                static_cast<long long>(c.Nq), static_cast<long long>(c.Nk), static_cast<long long>(c.D), c.heads, r.rel,
                r.max_abs);
    EXPECT_EQ(r.nonfinite, 0);
    EXPECT_LE(r.rel, 8e-3) << "Nq=" << c.Nq << " Nk=" << c.Nk << " D=" << c.D;  // bf16 output rounding: ~3e-3
  }
  // Packed qkv [B, N, 3C] (the ViT's attention_packed_qkv), and later chunks scoring far higher:
  // k rows 64.. scaled by 3, 128.. by 6 (q ~ N(0, 1): each chunk's row maximum ~2^8 or more above
  // the previous one's, so O is rescaled between chunks).
  for (const auto& [N, C, heads, jump] : {std::tuple<int64_t, int64_t, int, bool>{197, 768, 12, false},
                                          {257, 1280, 16, false}, {197, 768, 12, true}, {257, 320, 4, true}}) {
    const int64_t B = 2;
    Tensor qkv = randn({B, N, 3 * C}, seed++);
    if (jump) {
      float* x = qkv.data<float>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 64; t < N; ++t)
          for (int64_t d = C; d < 2 * C; ++d) x[(b * N + t) * 3 * C + d] *= t >= 128 ? 6.f : 3.f;
    }
    qkv = round_bf16(qkv);
    const Tensor ref = ops::attention_packed_qkv(qkv, heads);
    const Tensor got = to_host(ops::attention_packed_qkv(to_dev(qkv, DType::BF16), heads));
    const Cmp r = compare(got, ref);
    std::printf("  short packed qkv B=2 N=%lld C=%lld heads=%d%s: rel %.3e max_abs %.3e\n", static_cast<long long>(N),
                static_cast<long long>(C), heads, jump ? " (score jumps)" : "", r.rel, r.max_abs);
    EXPECT_EQ(r.nonfinite, 0);
    EXPECT_LE(r.rel, 8e-3) << "packed N=" << N << " C=" << C << (jump ? " with score jumps" : "");
  }
}

TEST(CudaAttention, FewKeys) {
  // attention_few_keys.cu (at most 16 keys, head_dim 16 or 32, no rel-pos): one key, the largest
  // count, one past it (the tensor-core kernel again), partial 128-row query blocks, one q for all
  // sequences, and head dims it does not take (64: the tensor-core kernel).
  REQUIRE_GPU();
  uint64_t seed = 5600;
  for (DType dt : {DType::F32, DType::BF16}) {
    run_attention({dt, 3, 200, 1, 128, 8}, seed++);
    run_attention({dt, 2, 257, 16, 128, 8}, seed++);
    run_attention({dt, 2, 257, 17, 128, 8}, seed++);
    run_attention({dt, 4, 129, 9, 256, 8}, seed++);
    run_attention({dt, 4, 1000, 7, 128, 8}, seed++, true);
    run_attention({dt, 2, 100, 7, 256, 4}, seed++);
  }
}

TEST(CudaAttention, PackedKeysAndValues) {
  // ops::attention_packed_kv: k and v read in place from one [B, Nk, 2D] tensor (row stride 2D) on
  // the tensor-core kernel (4096 keys), the few-keys kernel (7) and with one q for all sequences;
  // against the CPU attention on the two halves.
  REQUIRE_GPU();
  struct Case {
    int64_t B, Nq, Nk, D;
    int heads;
    bool shared_q;
  };
  const Case cases[] = {{3, 7, 4096, 128, 8, false}, {2, 300, 7, 128, 8, false}, {3, 500, 7, 128, 8, true},
                        {2, 7, 300, 256, 8, false}};
  uint64_t seed = 5700;
  for (DType dt : {DType::F32, DType::BF16})
    for (const Case& c : cases) {
      Tensor q = randn({c.shared_q ? 1 : c.B, c.Nq, c.D}, seed++), kv = randn({c.B, c.Nk, 2 * c.D}, seed++);
      if (dt == DType::BF16) {
        q = round_bf16(q);
        kv = round_bf16(kv);
      }
      const Tensor ref = ops::attention(q, ops::narrow(kv, 2, 0, c.D), ops::narrow(kv, 2, c.D, c.D), c.heads);
      const Tensor got = cimpl::attention_packed_kv(to_dev(q, dt), to_dev(kv, dt), c.heads);
      char what[160];
      std::snprintf(what, sizeof what, "packed kv %s B=%lld Nq=%lld Nk=%lld D=%lld%s", dname(dt),
                    static_cast<long long>(c.B), static_cast<long long>(c.Nq), static_cast<long long>(c.Nk),
                    static_cast<long long>(c.D), c.shared_q ? " (one q)" : "");
      expect_match(got, ref, dt, what);
    }
  EXPECT_THROW(cimpl::attention_packed_kv(to_dev(randn({2, 5, 64}, 1), DType::F32),
                                          to_dev(randn({2, 9, 64}, 2), DType::F32), 4),
               vitrt::InvalidArgument);
}

TEST(CudaAttention, EmptyAndBadArguments) {
  REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16}) {
    // Nk = 0: zeros, like the CPU op.
    Tensor q = to_dev(randn({2, 3, 64}, 1), dt), k = to_dev(Tensor::zeros({2, 0, 64}), dt);
    Tensor z = to_host(cimpl::attention(q, k, k, 4));
    ASSERT_EQ(z.shape(), (Shape{2, 3, 64}));
    for (int64_t i = 0; i < z.numel(); ++i) ASSERT_EQ(z.data<float>()[i], 0.f);
    Tensor qkv = to_dev(randn({1, 16, 3 * 64}, 2), dt);
    Tensor rh = to_dev(randn({7, 32}, 3), dt), rw_bad = to_dev(randn({7, 16}, 4), dt);
    EXPECT_THROW(cimpl::attention_relpos(qkv, 2, 4, 5, nullptr, nullptr), vitrt::InvalidArgument);  // 4*5 != 16
    EXPECT_THROW(cimpl::attention_relpos(qkv, 3, 4, 4, nullptr, nullptr), vitrt::InvalidArgument);  // 64 % 3
    EXPECT_THROW(cimpl::attention_relpos(qkv, 2, 4, 4, &rh, nullptr), vitrt::InvalidArgument);
    EXPECT_THROW(cimpl::attention_relpos(qkv, 2, 4, 4, &rh, &rw_bad), vitrt::InvalidArgument);
    EXPECT_THROW(cimpl::attention_relpos(randn({1, 16, 192}, 5), 2, 4, 4, nullptr, nullptr),
                 vitrt::InvalidArgument);  // host tensor
    Tensor grid = to_dev(randn({1, 5, 5, 3 * 64}, 6), dt);
    EXPECT_THROW(cimpl::attention_relpos_windowed(grid, to_dev(randn({64}, 7), dt), 2, 4, nullptr, nullptr),
                 vitrt::InvalidArgument);  // bias size
    EXPECT_THROW(cimpl::attention_relpos_windowed(grid, to_dev(randn({192}, 7), dt), 2, 0, nullptr, nullptr),
                 vitrt::InvalidArgument);  // window 0
    EXPECT_THROW(cimpl::attention(q, to_dev(randn({2, 5, 32}, 8), dt), to_dev(randn({2, 5, 32}, 9), dt), 4),
                 vitrt::InvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------------
// Timing (printed, not asserted).

namespace {

// Device tensor of uniform [-2, 2) values (fast host LCG; normal values are not needed here).
Tensor dev_uniform(const Shape& shape, DType dt, uint32_t seed) {
  Tensor h = Tensor::empty(shape, dt);
  uint32_t s = seed;
  const int64_t n = h.numel();
  if (dt == DType::BF16) {
    uint16_t* p = h.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = vitrt::f32_to_bf16(static_cast<float>(s >> 8) * (4.f / 16777216.f) - 2.f);
    }
  } else {
    float* p = h.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = static_cast<float>(s >> 8) * (4.f / 16777216.f) - 2.f;
    }
  }
  return h.to(Device::CUDA);
}

template <class F>
double time_ms(F&& f, int iters) {
  cudaStream_t s = vitrt::cuda::current_stream();
  f();  // warm-up (also configures shared memory)
  f();
  cudaEvent_t a, b;
  vitrt::cuda::check(cudaEventCreate(&a), "cudaEventCreate");
  vitrt::cuda::check(cudaEventCreate(&b), "cudaEventCreate");
  vitrt::cuda::check(cudaEventRecord(a, s), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) f();
  vitrt::cuda::check(cudaEventRecord(b, s), "cudaEventRecord");
  vitrt::cuda::check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  vitrt::cuda::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

void report(const char* what, double flops, double ms) {
  std::printf("  %-70s %8.3f ms  %7.1f TFLOP/s\n", what, ms, flops / (ms * 1e-3) / 1e12);
  std::fflush(stdout);
}

}  // namespace

TEST(CudaAttentionBench, VitShapes) {
  REQUIRE_GPU();
  std::printf("attention timing (flops = 4 * N^2 * head_dim per head and window/image):\n");
  struct Model {
    const char* name;
    int heads, hd, images_global;
  };
  for (const Model m : {Model{"vit_b", 12, 64, 32}, Model{"vit_h", 16, 80, 16}}) {
    const int64_t C = int64_t{m.heads} * m.hd;
    const int64_t imgs = 32, nwin = imgs * 25;
    Tensor rh14 = dev_uniform({27, m.hd}, DType::BF16, 1), rw14 = dev_uniform({27, m.hd}, DType::BF16, 2);
    Tensor rh64 = dev_uniform({127, m.hd}, DType::BF16, 3), rw64 = dev_uniform({127, m.hd}, DType::BF16, 4);
    char what[160];
    {
      Tensor qkv = dev_uniform({nwin, 196, 3 * C}, DType::BF16, 5);
      const double flops = 4.0 * 196 * 196 * m.hd * m.heads * nwin;
      std::snprintf(what, sizeof what, "%s bf16 windows %lld x %d heads x 196, rel", m.name,
                    static_cast<long long>(nwin), m.heads);
      report(what, flops, time_ms([&] { cimpl::attention_relpos(qkv, m.heads, 14, 14, &rh14, &rw14); }, 10));
      std::snprintf(what, sizeof what, "%s bf16 windows %lld x %d heads x 196, no rel", m.name,
                    static_cast<long long>(nwin), m.heads);
      report(what, flops, time_ms([&] { cimpl::attention_relpos(qkv, m.heads, 14, 14, nullptr, nullptr); }, 10));
    }
    {
      Tensor grid = dev_uniform({imgs, 64, 64, 3 * C}, DType::BF16, 6);
      Tensor bias = dev_uniform({3 * C}, DType::BF16, 7);
      const double flops = 4.0 * 196 * 196 * m.hd * m.heads * nwin;
      std::snprintf(what, sizeof what, "%s bf16 windowed variant %lld x 64x64 grid (pad 70), rel", m.name,
                    static_cast<long long>(imgs));
      report(what, flops, time_ms([&] { cimpl::attention_relpos_windowed(grid, bias, m.heads, 14, &rh14, &rw14); }, 10));
    }
    {
      const int64_t B = m.images_global;
      Tensor qkv = dev_uniform({B, 4096, 3 * C}, DType::BF16, 8);
      const double flops = 4.0 * 4096.0 * 4096.0 * m.hd * m.heads * B;
      std::snprintf(what, sizeof what, "%s bf16 global %lld x %d heads x 4096, rel", m.name, static_cast<long long>(B),
                    m.heads);
      report(what, flops, time_ms([&] { cimpl::attention_relpos(qkv, m.heads, 64, 64, &rh64, &rw64); }, 5));
      std::snprintf(what, sizeof what, "%s bf16 global %lld x %d heads x 4096, no rel", m.name,
                    static_cast<long long>(B), m.heads);
      report(what, flops, time_ms([&] { cimpl::attention_relpos(qkv, m.heads, 64, 64, nullptr, nullptr); }, 5));
    }
  }
  {
    // The ViT classifier's self-attention (no rel-pos): ViT-B/16 at batch 256 (197 tokens, 12 heads of
    // 64) and ViT-H/14 at batch 64 (257 tokens, 16 heads of 80), one layer.
    struct Vit {
      const char* name;
      int64_t batch, tokens;
      int heads, hd;
    };
    for (const Vit v : {Vit{"ViT-B/16", 256, 197, 12, 64}, Vit{"ViT-H/14", 64, 257, 16, 80}}) {
      const int64_t C = int64_t{v.heads} * v.hd;
      Tensor qkv = dev_uniform({v.batch, v.tokens, 3 * C}, DType::BF16, 17);
      char what[160];
      std::snprintf(what, sizeof what, "%s bf16 self-attention %lld x %d heads x %lld, no rel", v.name,
                    static_cast<long long>(v.batch), v.heads, static_cast<long long>(v.tokens));
      report(what, 4.0 * v.tokens * v.tokens * v.hd * v.heads * v.batch,
             time_ms([&] { ops::attention_packed_qkv(qkv, v.heads); }, 20));
    }
    // What the last m-tile of 197 query rows (5 real of 64) costs the short kernel: 197 and 192 query
    // rows against the same 197 keys (separate q / k / v, so both read alike).
    const int64_t B = 256, C = 768;
    Tensor k = dev_uniform({B, 197, C}, DType::BF16, 18), v = dev_uniform({B, 197, C}, DType::BF16, 19);
    for (int64_t nq : {197, 192}) {
      Tensor q = dev_uniform({B, nq, C}, DType::BF16, 20);
      char what[160];
      std::snprintf(what, sizeof what, "ViT-B/16 bf16 self-attention 256 x 12 heads, %lld q x 197 k", static_cast<long long>(nq));
      report(what, 4.0 * nq * 197 * 64 * 12 * B, time_ms([&] { cimpl::attention(q, k, v, 12); }, 20));
    }
  }
  {
    // fp32 fidelity path, one vit_b image.
    Tensor qkv = dev_uniform({1, 4096, 3 * 768}, DType::F32, 9);
    Tensor rh = dev_uniform({127, 64}, DType::F32, 10), rw = dev_uniform({127, 64}, DType::F32, 11);
    report("vit_b f32 global 1 x 12 heads x 4096, rel", 4.0 * 4096.0 * 4096.0 * 64 * 12,
           time_ms([&] { cimpl::attention_relpos(qkv, 12, 64, 64, &rh, &rw); }, 3));
    Tensor qw = dev_uniform({32, 196, 3 * 768}, DType::F32, 12);
    Tensor rh14 = dev_uniform({27, 64}, DType::F32, 13), rw14 = dev_uniform({27, 64}, DType::F32, 14);
    report("vit_b f32 windows 32 x 12 heads x 196, rel", 4.0 * 196 * 196 * 64 * 12 * 32,
           time_ms([&] { cimpl::attention_relpos(qw, 12, 14, 14, &rh14, &rw14); }, 3));
  }
  {
    // mask decoder shapes (64 prompts).
    for (DType dt : {DType::BF16, DType::F32}) {
      Tensor q = dev_uniform({64, 7, 128}, dt, 15), k = dev_uniform({64, 4096, 128}, dt, 16);
      char what[160];
      std::snprintf(what, sizeof what, "%s decoder attention 64 x 8 heads: 7 q x 4096 k, D 128", dname(dt));
      report(what, 4.0 * 7 * 4096 * 16 * 8 * 64, time_ms([&] { cimpl::attention(q, k, k, 8); }, 5));
      std::snprintf(what, sizeof what, "%s decoder attention 64 x 8 heads: 4096 q x 7 k, D 128", dname(dt));
      report(what, 4.0 * 7 * 4096 * 16 * 8 * 64, time_ms([&] { cimpl::attention(k, q, q, 8); }, 5));
    }
  }
}

#endif  // VITRT_HAVE_CUDA
