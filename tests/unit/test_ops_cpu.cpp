// CPU operators against naive references written here (double accumulation, textbook loops),
// on deterministic random inputs in [-1, 1), odd sizes, and every code path. A few results are
// also pinned to constants computed with PyTorch / segment_anything (see kTorch* below).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include "ops/cpu/attention.h"
#include "ops/cuda/fast_erf.h"
#include "ops/cuda/bsr_mlp_units.h"
#include "ops/cuda/bsr_stream_schedule.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/interpolate.h"
#include "ops/cpu/softmax_row.h"
#include "ops/ops.h"
#include "vitrt/tensor.h"

using vitrt::InvalidArgument;
using vitrt::Shape;
using vitrt::Tensor;
namespace ops = vitrt::ops;

namespace {

// The same LCG as the Python generator of the torch constants: ((s >> 8) / 2^24) * 2 - 1.
std::vector<float> lcg(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<double>(s >> 8) / 16777216.0 * 2.0 - 1.0);
  }
  return v;
}

Tensor rand_tensor(Shape shape, uint32_t seed, float scale = 1.f, float offset = 0.f) {
  auto v = lcg(vitrt::shape_numel(shape), seed);
  for (auto& x : v) x = x * scale + offset;
  return Tensor::from_vector(v, shape);
}

const float* cf(const Tensor& t) { return t.data<float>(); }

// |got - ref| <= atol + rtol * |ref| elementwise; reports the first few failures.
void expect_close(const Tensor& got, const std::vector<double>& ref, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(ref.size())) << what;
  const float* g = cf(got);
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::abs(g[i] - ref[i]);
    worst = std::max(worst, err / (atol + rtol * std::abs(ref[i])));
    if (!(err <= atol + rtol * std::abs(ref[i]))) {
      if (++failures <= 5)
        ADD_FAILURE() << what << ": element " << i << " got " << g[i] << " want " << ref[i] << " (err " << err << ")";
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << ref.size() << " elements out of tolerance";
  EXPECT_LE(worst, 1.0) << what;
}

void expect_close(const Tensor& got, const std::vector<float>& ref, double rtol, double atol, const std::string& what) {
  expect_close(got, std::vector<double>(ref.begin(), ref.end()), rtol, atol, what);
}

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// ---------------------------------------------------------------------------------- linear

std::vector<double> linear_ref(const Tensor& x, const Tensor& w, const Tensor* bias, ops::Activation act,
                               const Tensor* res) {
  const int64_t K = x.size(-1), N = w.size(0), M = x.numel() / K;
  std::vector<double> y(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = bias ? cf(*bias)[j] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(cf(x)[i * K + k]) * cf(w)[j * K + k];
      if (act == ops::Activation::GELU) s = gelu_ref(s);
      if (act == ops::Activation::ReLU) s = std::max(s, 0.0);
      if (res) s += cf(*res)[i * N + j];
      y[i * N + j] = s;
    }
  return y;
}

TEST(OpsCpu, LinearAllEpilogues) {
  for (Shape xs : {Shape{37, 53}, Shape{2, 5, 33}, Shape{1, 768}}) {
    const int64_t K = xs.back();
    const int64_t N = K == 768 ? 2304 : 29;
    Tensor x = rand_tensor(xs, 11);
    Tensor w = rand_tensor({N, K}, 12, 0.2f);
    Tensor b = rand_tensor({N}, 13);
    Shape ys = xs;
    ys.back() = N;
    Tensor r = rand_tensor(ys, 14);
    for (bool use_bias : {false, true})
      for (auto act : {ops::Activation::None, ops::Activation::GELU, ops::Activation::ReLU})
        for (bool use_res : {false, true}) {
          const Tensor* bp = use_bias ? &b : nullptr;
          const Tensor* rp = use_res ? &r : nullptr;
          Tensor y = ops::linear(x, w, bp, act, rp);
          EXPECT_EQ(y.shape(), ys);
          expect_close(y, linear_ref(x, w, bp, act, rp), 1e-5, 1e-5,
                       "linear " + vitrt::shape_str(xs) + " bias=" + std::to_string(use_bias) +
                           " act=" + std::to_string(static_cast<int>(act)) + " res=" + std::to_string(use_res));
        }
  }
}

TEST(OpsCpu, LinearAddInPlaceEqualsLinearWithResidual) {
  Tensor x = rand_tensor({30, 16}, 71), w = rand_tensor({12, 16}, 72), b = rand_tensor({12}, 73);
  Tensor y = rand_tensor({30, 12}, 74);
  Tensor want = ops::linear(x, w, &b, ops::Activation::None, &y);
  Tensor rows = y.slice0(5, 30);  // a view: only these rows change
  const Tensor before = y.clone();
  ops::linear_add_(rows, x.slice0(5, 30), w, &b);
  for (int64_t i = 0; i < 5 * 12; ++i) ASSERT_EQ(cf(y)[i], cf(before)[i]);
  for (int64_t i = 5 * 12; i < 30 * 12; ++i) ASSERT_EQ(cf(y)[i], cf(want)[i]) << i;
  EXPECT_THROW(ops::linear_add_(rows, x, w, &b), InvalidArgument);  // 30 rows into 25
}

TEST(OpsCpu, LinearBroadcastAddEqualsLinearOfTheSum) {
  // linear_broadcast_add(x, w, linear(e, w, b)) = linear(x + e, w, b) up to the reassociation.
  const int64_t B = 3, T = 20, K = 16, N = 12;
  Tensor x = rand_tensor({B, T, K}, 81), e = rand_tensor({T, K}, 82), w = rand_tensor({N, K}, 83);
  Tensor b = rand_tensor({N}, 84);
  Tensor c = ops::linear(e, w, &b);
  Tensor got = ops::linear_broadcast_add(x, w, c);
  ASSERT_EQ(got.shape(), (vitrt::Shape{B, T, N}));
  Tensor sum = x.clone();
  for (int64_t i = 0; i < B * T * K; ++i) const_cast<float*>(cf(sum))[i] += cf(e)[i % (T * K)];
  const Tensor want = ops::linear(sum, w, &b);
  expect_close(got, std::vector<float>(cf(want), cf(want) + want.numel()), 1e-5, 1e-5, "linear_broadcast_add");
  // Each product is exactly linear(x[b]) + c (the same epilogue), not only close.
  for (int64_t bi = 0; bi < B; ++bi) {
    Tensor one = ops::linear(x.slice0(bi, bi + 1).reshape({T, K}), w, nullptr, ops::Activation::None, &c);
    for (int64_t i = 0; i < T * N; ++i) ASSERT_EQ(cf(got)[bi * T * N + i], cf(one)[i]) << bi << " " << i;
  }
  EXPECT_THROW(ops::linear_broadcast_add(x, w, rand_tensor({T + 1, N}, 85)), InvalidArgument);
  EXPECT_THROW(ops::linear_broadcast_add(x.reshape({B * T, K}), w, c), InvalidArgument);
  EXPECT_THROW(ops::linear_broadcast_add(x, rand_tensor({N, K + 1}, 86), c), InvalidArgument);
}

TEST(OpsCpu, LinearRejectsBadShapes) {
  Tensor x = rand_tensor({4, 5}, 1), w = rand_tensor({3, 6}, 2), b = rand_tensor({4}, 3);
  EXPECT_THROW(ops::linear(x, w), InvalidArgument);
  Tensor w2 = rand_tensor({3, 5}, 2);
  EXPECT_THROW(ops::linear(x, w2, &b), InvalidArgument);
  Tensor r = rand_tensor({4, 4}, 4);
  EXPECT_THROW(ops::linear(x, w2, nullptr, ops::Activation::None, &r), InvalidArgument);
}

TEST(OpsCpu, MixedDevicesAreRejectedClearly) {
  // A CUDA operand next to a host first operand: caught on the CPU path before any kernel runs.
  auto owner = std::make_shared<float>(0.f);
  Tensor fake = Tensor::wrap(owner, owner.get(), {1, 1}, vitrt::DType::F32, vitrt::Device::CUDA);
  Tensor x = rand_tensor({2, 1}, 1);
  try {
    ops::linear(x, fake);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("same device"), std::string::npos) << e.what();
  }
#ifndef VITRT_HAVE_CUDA
  // Without a CUDA backend, CUDA tensors get an error that says so.
  try {
    ops::relu_(fake);
    FAIL() << "no exception";
  } catch (const vitrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
#endif
}

// ---------------------------------------------------------------------------------- matmul

TEST(OpsCpu, MatmulBatchedAndTransposed) {
  const int64_t B = 3, M = 7, K = 19, N = 11;
  Tensor a = rand_tensor({B, M, K}, 21);
  Tensor b = rand_tensor({B, K, N}, 22);
  Tensor bt = rand_tensor({B, N, K}, 23);
  Tensor b2 = rand_tensor({K, N}, 24);
  auto ref = [&](const Tensor& bb, bool trans, bool shared) {
    std::vector<double> c(B * M * N);
    for (int64_t p = 0; p < B; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          const int64_t boff = shared ? 0 : p * K * N;
          for (int64_t k = 0; k < K; ++k)
            s += static_cast<double>(cf(a)[(p * M + i) * K + k]) *
                 cf(bb)[boff + (trans ? j * K + k : k * N + j)];
          c[(p * M + i) * N + j] = s;
        }
    return c;
  };
  expect_close(ops::matmul(a, b), ref(b, false, false), 1e-5, 1e-5, "matmul");
  expect_close(ops::matmul(a, bt, true), ref(bt, true, false), 1e-5, 1e-5, "matmul^T");
  expect_close(ops::matmul(a, b2), ref(b2, false, true), 1e-5, 1e-5, "matmul shared b");
  Tensor a2 = a.slice0(0, 1).reshape({M, K});
  Tensor c2 = ops::matmul(a2, b2);
  EXPECT_EQ(c2.shape(), (Shape{M, N}));
  auto full = ref(b2, false, true);
  expect_close(c2, std::vector<double>(full.begin(), full.begin() + M * N), 1e-5, 1e-5, "matmul 2-D");
  EXPECT_THROW(ops::matmul(a, bt), InvalidArgument);
}

// ---------------------------------------------------------------------------------- norms

TEST(OpsCpu, LayerNorm) {
  for (int64_t C : {77, 768, 5}) {
    // An offset mean makes a one-pass E[x^2] - E[x]^2 variance visibly wrong; two passes are not.
    Tensor x = rand_tensor({9, C}, 31, 2.f, 30.f);
    Tensor w = rand_tensor({C}, 32), b = rand_tensor({C}, 33);
    const float eps = 1e-6f;
    std::vector<double> ref(9 * C);
    for (int64_t r = 0; r < 9; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mean += cf(x)[r * C + c];
      mean /= C;
      for (int64_t c = 0; c < C; ++c) var += (cf(x)[r * C + c] - mean) * (cf(x)[r * C + c] - mean);
      var /= C;
      for (int64_t c = 0; c < C; ++c)
        ref[r * C + c] = (cf(x)[r * C + c] - mean) / std::sqrt(var + eps) * cf(w)[c] + cf(b)[c];
    }
    expect_close(ops::layer_norm(x, w, b, eps), ref, 1e-5, 1e-5, "layer_norm C=" + std::to_string(C));
    // With the GELU after it (SAM's LayerNorm2d + GELU): 0.5 y (1 + erf(y / sqrt 2)).
    for (double& v : ref) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    expect_close(ops::layer_norm(x, w, b, eps, std::nullopt, ops::Activation::GELU), ref, 1e-5, 1e-5,
                 "layer_norm + gelu C=" + std::to_string(C));
  }
  Tensor x = rand_tensor({2, 8}, 34), w = rand_tensor({8}, 35), b = rand_tensor({8}, 36);
  EXPECT_THROW(ops::layer_norm(x, w, b, 1e-6f, std::nullopt, ops::Activation::ReLU), InvalidArgument);
}

TEST(OpsCpu, SoftmaxLastDim) {
  for (int64_t n : {1, 7, 1000, 4096}) {
    Tensor x = rand_tensor({5, n}, 41, 30.f);  // large logits: the max subtraction matters
    Tensor y = x.clone();
    ops::softmax_lastdim_(y);
    std::vector<double> ref(5 * n);
    for (int64_t r = 0; r < 5; ++r) {
      double mx = -1e300, s = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, cf(x)[r * n + i]);
      for (int64_t i = 0; i < n; ++i) s += std::exp(cf(x)[r * n + i] - mx);
      for (int64_t i = 0; i < n; ++i) ref[r * n + i] = std::exp(cf(x)[r * n + i] - mx) / s;
    }
    expect_close(y, ref, 1e-5, 1e-9, "softmax n=" + std::to_string(n));
  }
}

TEST(OpsCpu, SoftmaxHandlesInfinities) {
  // torch.softmax: -inf logits get probability 0; the rest is normalised among themselves.
  std::vector<float> v = lcg(37, 42);
  v[3] = v[20] = -INFINITY;
  Tensor x = Tensor::from_vector(v, {1, 37});
  ops::softmax_lastdim_(x);
  double s = 0;
  for (int i = 0; i < 37; ++i) s += i == 3 || i == 20 ? 0.0 : std::exp(static_cast<double>(v[i]));
  for (int i = 0; i < 37; ++i) {
    const double want = i == 3 || i == 20 ? 0.0 : std::exp(static_cast<double>(v[i])) / s;
    EXPECT_NEAR(cf(x)[i], want, 1e-6) << i;
  }
}

// The attention inner loop, in both instruction-set variants (AVX-512 only where the CPU has it),
// with and without the decomposed bias, for segment widths on and off the vector width.
TEST(OpsCpu, ExpRowBothInstructionSets) {
  using Fn = float (*)(float*, int64_t, const float*, const float*, int64_t, int64_t, float*);
  std::vector<std::pair<const char*, Fn>> impls = {{"avx2", vitrt::cpu::isa::exp_row_avx2}};
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
    impls.push_back({"avx512", vitrt::cpu::isa::exp_row_avx512});
  struct Case { int64_t H, W; bool bias; };
  for (Case k : {Case{1, 1, false}, Case{1, 7, false}, Case{1, 16, false}, Case{14, 14, false}, Case{1, 4099, false},
                 Case{14, 14, true}, Case{64, 64, true}, Case{3, 8, true}, Case{2, 16, true}, Case{7, 5, true},
                 Case{5, 33, true}, Case{1, 1, true}}) {
    const int64_t n = k.H * k.W;
    std::vector<float> x = lcg(n, 7), bh = lcg(k.H + 16, 8), bw = lcg(k.W + 16, 9);
    for (auto& v : x) v *= 20.f;
    std::vector<double> ref(n);
    double mx = -1e300, sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref[i] = x[i] + (k.bias ? static_cast<double>(bh[i / k.W]) + bw[i % k.W] : 0.0);
      mx = std::max(mx, ref[i]);
    }
    for (auto& r : ref) sum += (r = std::exp(r - mx));
    for (auto& [name, fn] : impls) {
      std::vector<float> y = x, scratch(n + 16);
      const float got_sum = fn(y.data(), n, k.bias ? bh.data() : nullptr, k.bias ? bw.data() : nullptr, k.H, k.W,
                               scratch.data());
      EXPECT_NEAR(got_sum, sum, 1e-5 * sum) << name;
      expect_close(Tensor::from_vector(y, {n}), ref, 1e-5, 1e-30,
                   std::string(name) + " exp_row " + std::to_string(k.H) + "x" + std::to_string(k.W) +
                       (k.bias ? " bias" : ""));
    }
  }
}

// ---------------------------------------------------------------------------------- elementwise

TEST(OpsCpu, ElementwiseAndBroadcastAdd) {
  Tensor x = rand_tensor({3, 4, 37}, 51);
  for (Shape ys : {Shape{37}, Shape{4, 37}, Shape{3, 4, 37}, Shape{3 * 4 * 37}}) {
    Tensor y = rand_tensor(ys, 52);
    const int64_t ny = y.numel();
    std::vector<double> ref(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) ref[i] = static_cast<double>(cf(x)[i]) + cf(y)[i % ny];
    expect_close(ops::add(x, y), ref, 1e-7, 0, "add " + vitrt::shape_str(ys));
    Tensor xi = x.clone();
    ops::add_(xi, y);
    expect_close(xi, ref, 1e-7, 0, "add_ " + vitrt::shape_str(ys));
  }
  EXPECT_THROW(ops::add(x, rand_tensor({3}, 1)), InvalidArgument);
  EXPECT_THROW(ops::add(x, rand_tensor({4, 36}, 1)), InvalidArgument);

  Tensor big = rand_tensor({100003}, 53, 4.f);  // large enough to take the threaded paths
  std::vector<double> rs(big.numel()), rr(big.numel()), rg(big.numel());
  for (int64_t i = 0; i < big.numel(); ++i) {
    rs[i] = cf(big)[i] * 0.37f;
    rr[i] = std::max(0.0, static_cast<double>(cf(big)[i]));
    rg[i] = gelu_ref(cf(big)[i]);
  }
  Tensor s = big.clone(), r = big.clone(), g = big.clone();
  ops::scale_(s, 0.37f);
  ops::relu_(r);
  ops::gelu_(g);
  expect_close(s, rs, 1e-7, 0, "scale_");
  expect_close(r, rr, 0, 0, "relu_");
  expect_close(g, rg, 1e-5, 1e-6, "gelu_");
  Tensor g2 = rand_tensor({13}, 54, 6.f);
  std::vector<double> rg2(13);
  for (int i = 0; i < 13; ++i) rg2[i] = gelu_ref(cf(g2)[i]);
  ops::gelu_(g2);
  expect_close(g2, rg2, 1e-5, 1e-6, "gelu_ small");
}

// ---------------------------------------------------------------------------------- layout

TEST(OpsCpu, NarrowEveryDim) {
  const Shape s{3, 4, 5};
  Tensor x = rand_tensor(s, 67);
  for (int dim = 0; dim < 3; ++dim)
    for (int64_t start : {int64_t{0}, int64_t{1}})
      for (int64_t len : {int64_t{0}, int64_t{1}, s[dim] - start}) {
        Tensor y = ops::narrow(x, dim, start, len);
        Shape os = s;
        os[dim] = len;
        ASSERT_EQ(y.shape(), os);
        std::vector<double> ref;
        for (int64_t i = 0; i < s[0]; ++i)
          for (int64_t j = 0; j < s[1]; ++j)
            for (int64_t k = 0; k < s[2]; ++k) {
              const int64_t at[3] = {i, j, k};
              if (at[dim] >= start && at[dim] < start + len) ref.push_back(cf(x)[(i * s[1] + j) * s[2] + k]);
            }
        expect_close(y, ref, 0, 0, "narrow");
      }
  EXPECT_EQ(ops::narrow(x, -1, 2, 3).shape(), (Shape{3, 4, 3}));
  EXPECT_THROW(ops::narrow(x, 3, 0, 1), InvalidArgument);
  EXPECT_THROW(ops::narrow(x, 1, 2, 3), InvalidArgument);
  EXPECT_THROW(ops::narrow(x, 0, -1, 1), InvalidArgument);
}

TEST(OpsCpu, CopyIsADeepCopy) {
  Tensor x = rand_tensor({3, 4, 5}, 71);
  Tensor y = ops::copy(x);
  ASSERT_EQ(y.shape(), x.shape());
  EXPECT_NE(y.raw(), x.raw());
  EXPECT_EQ(std::memcmp(y.raw(), x.raw(), x.nbytes()), 0);
  const float before = cf(x)[7];
  y.data<float>()[7] = before + 1.f;
  EXPECT_EQ(cf(x)[7], before);  // the source is untouched
  EXPECT_EQ(ops::copy(Tensor::empty({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_THROW(ops::copy(Tensor()), InvalidArgument);
}

TEST(OpsCpu, PermuteGeneral) {
  const Shape s{3, 4, 5, 6};
  Tensor x = rand_tensor(s, 61);
  for (std::vector<int> perm : {std::vector<int>{0, 2, 1, 3}, {0, 3, 1, 2}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 1, 2, 3}}) {
    Tensor y = ops::permute(x, perm);
    Shape os(4);
    for (int d = 0; d < 4; ++d) os[d] = s[perm[d]];
    ASSERT_EQ(y.shape(), os);
    std::vector<double> ref(x.numel());
    int64_t idx[4], o = 0;
    for (idx[0] = 0; idx[0] < os[0]; ++idx[0])
      for (idx[1] = 0; idx[1] < os[1]; ++idx[1])
        for (idx[2] = 0; idx[2] < os[2]; ++idx[2])
          for (idx[3] = 0; idx[3] < os[3]; ++idx[3]) {
            int64_t in[4];
            for (int d = 0; d < 4; ++d) in[perm[d]] = idx[d];
            ref[o++] = cf(x)[((in[0] * s[1] + in[1]) * s[2] + in[2]) * s[3] + in[3]];
          }
    expect_close(y, ref, 0, 0, "permute");
  }
  EXPECT_THROW(ops::permute(x, {0, 1, 1, 2}), InvalidArgument);
  EXPECT_THROW(ops::permute(x, {0, 1, 2}), InvalidArgument);
  // A big permutation takes the threaded path (NCHW -> NHWC of an image).
  Tensor img = rand_tensor({1, 3, 64, 80}, 62);
  Tensor nhwc = ops::permute(img, {0, 2, 3, 1});
  for (int64_t y = 0; y < 64; y += 7)
    for (int64_t xx = 0; xx < 80; xx += 3)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(cf(nhwc)[(y * 80 + xx) * 3 + c], cf(img)[(c * 64 + y) * 80 + xx]);
}

TEST(OpsCpu, Cat) {
  Tensor a = rand_tensor({2, 3, 4}, 71), b = rand_tensor({2, 5, 4}, 72), c = rand_tensor({2, 1, 4}, 73);
  Tensor y = ops::cat({a, b, c}, 1);
  ASSERT_EQ(y.shape(), (Shape{2, 9, 4}));
  std::vector<double> ref;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 12; ++j) ref.push_back(cf(a)[i * 12 + j]);
    for (int64_t j = 0; j < 20; ++j) ref.push_back(cf(b)[i * 20 + j]);
    for (int64_t j = 0; j < 4; ++j) ref.push_back(cf(c)[i * 4 + j]);
  }
  expect_close(y, ref, 0, 0, "cat dim 1");
  Tensor d = rand_tensor({2, 3, 7}, 74);
  Tensor z = ops::cat({a, d}, -1);
  ASSERT_EQ(z.shape(), (Shape{2, 3, 11}));
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(cf(z)[r * 11 + j], cf(a)[r * 4 + j]);
    for (int64_t j = 0; j < 7; ++j) EXPECT_EQ(cf(z)[r * 11 + 4 + j], cf(d)[r * 7 + j]);
  }
  Tensor e = ops::cat({a, a}, 0);
  ASSERT_EQ(e.shape(), (Shape{4, 3, 4}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(cf(e)[24 + i], cf(a)[i]);
  EXPECT_THROW(ops::cat({a, b}, 2), InvalidArgument);
  EXPECT_THROW(ops::cat({a}, 3), InvalidArgument);
}

TEST(OpsCpu, WindowPartitionPadsAndRoundTrips) {
  struct Case { int64_t B, H, W, C; int ws; };
  for (Case k : {Case{1, 16, 16, 5, 14}, Case{1, 64, 64, 8, 14}, Case{2, 17, 30, 3, 7}, Case{1, 14, 28, 4, 14}}) {
    Tensor x = rand_tensor({k.B, k.H, k.W, k.C}, 81);
    Tensor w = ops::window_partition(x, k.ws);
    const int64_t nh = (k.H + k.ws - 1) / k.ws, nw = (k.W + k.ws - 1) / k.ws;
    ASSERT_EQ(w.shape(), (Shape{k.B * nh * nw, k.ws, k.ws, k.C}));
    // Reference: pad to (nh*ws, nw*ws), then the (b, wy, wx, r, s, c) ordering of SAM.
    std::vector<double> ref;
    for (int64_t b = 0; b < k.B; ++b)
      for (int64_t wy = 0; wy < nh; ++wy)
        for (int64_t wx = 0; wx < nw; ++wx)
          for (int64_t r = 0; r < k.ws; ++r)
            for (int64_t s = 0; s < k.ws; ++s)
              for (int64_t c = 0; c < k.C; ++c) {
                const int64_t y = wy * k.ws + r, xx = wx * k.ws + s;
                ref.push_back(y < k.H && xx < k.W ? cf(x)[((b * k.H + y) * k.W + xx) * k.C + c] : 0.0);
              }
    expect_close(w, ref, 0, 0, "window_partition " + std::to_string(k.H) + "x" + std::to_string(k.W));
    Tensor back = ops::window_unpartition(w, k.ws, k.H, k.W);
    ASSERT_EQ(back.shape(), x.shape());
    expect_close(back, std::vector<double>(cf(x), cf(x) + x.numel()), 0, 0, "window_unpartition");
  }
  EXPECT_THROW(ops::window_unpartition(rand_tensor({3, 14, 14, 2}, 1), 14, 16, 16), InvalidArgument);
}

// ---------------------------------------------------------------------------------- attention

// Textbook attention for one head: rows of q/k/v given by strided pointers.
void attend_ref(const std::function<double(int64_t, int64_t)>& q, const std::function<double(int64_t, int64_t)>& k,
                const std::function<double(int64_t, int64_t)>& v,
                const std::function<double(int64_t, int64_t)>& bias, int64_t nq, int64_t nk, int64_t hd,
                double scale, const std::function<void(int64_t, int64_t, double)>& out) {
  std::vector<double> s(nk);
  for (int64_t i = 0; i < nq; ++i) {
    double mx = -1e300;
    for (int64_t j = 0; j < nk; ++j) {
      double d = 0;
      for (int64_t c = 0; c < hd; ++c) d += q(i, c) * k(j, c);
      s[j] = d * scale + bias(i, j);
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < nk; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t c = 0; c < hd; ++c) {
      double o = 0;
      for (int64_t j = 0; j < nk; ++j) o += s[j] * v(j, c);
      out(i, c, o / sum);
    }
  }
}

// Float product rounded on its own (no FMA contraction), as in PyTorch's index computation.
float rounded(float v) {
  volatile float t = v;
  return t;
}

// PyTorch F.interpolate(linear, align_corners=False) on float: index and weights in float,
// result fma(l0, x0, l1 * x1) (the form torch's compiled kernel evaluates; verified bit-exact
// against torch 2.x on 27->127, 300->171, 256->1024 and 1024->683).
std::vector<float> interp_rows_ref(const std::vector<float>& x, int64_t L, int64_t C, int64_t n) {
  std::vector<float> y(n * C);
  const float scale = static_cast<float>(L) / static_cast<float>(n);
  for (int64_t j = 0; j < n; ++j) {
    float src = std::max(0.f, rounded(scale * (j + 0.5f)) - 0.5f);
    int64_t i0 = static_cast<int64_t>(src), i1 = std::min(i0 + 1, L - 1);
    float l1 = src - i0, l0 = 1.f - l1;
    for (int64_t c = 0; c < C; ++c) y[j * C + c] = std::fma(l0, x[i0 * C + c], rounded(l1 * x[i1 * C + c]));
  }
  return y;
}

std::vector<double> attention_relpos_ref(const Tensor& qkv, int heads, int64_t H, int64_t W, const Tensor* rph,
                                         const Tensor* rpw) {
  const int64_t B = qkv.size(0), N = H * W, C = qkv.size(2) / 3, hd = C / heads;
  const float* p = cf(qkv);
  std::vector<float> th, tw;
  if (rph) {
    th.assign(cf(*rph), cf(*rph) + rph->numel());
    tw.assign(cf(*rpw), cf(*rpw) + rpw->numel());
    if (rph->size(0) != 2 * H - 1) th = interp_rows_ref(th, rph->size(0), hd, 2 * H - 1);
    if (rpw->size(0) != 2 * W - 1) tw = interp_rows_ref(tw, rpw->size(0), hd, 2 * W - 1);
  }
  std::vector<double> out(B * N * C);
  const double scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < heads; ++h) {
      auto at = [&](int which) {
        return [=](int64_t i, int64_t c) { return static_cast<double>(p[(b * N + i) * 3 * C + which * C + h * hd + c]); };
      };
      auto q = at(0);
      auto bias = [&](int64_t i, int64_t j) {
        if (!rph) return 0.0;
        const int64_t ih = i / W, iw = i % W, jh = j / W, jw = j % W;
        double rh = 0, rw = 0;
        for (int64_t c = 0; c < hd; ++c) {
          rh += q(i, c) * th[(ih - jh + H - 1) * hd + c];
          rw += q(i, c) * tw[(iw - jw + W - 1) * hd + c];
        }
        return rh + rw;
      };
      attend_ref(q, at(1), at(2), bias, N, N, hd, scale,
                 [&](int64_t i, int64_t c, double o) { out[(b * N + i) * C + h * hd + c] = o; });
    }
  return out;
}

TEST(OpsCpu, AttentionRelPosMatchesSegmentAnything) {
  // segment_anything Attention.forward after the qkv linear (B=1, 2x3 grid, 2 heads of 4).
  const std::vector<float> kTorchAttnRelPos = {-0.0703661069f, -0.156813264f, 0.155897886f, -0.503836691f, -0.176555663f, 0.210273132f, -0.394211948f, 0.355035871f, -0.096122779f, 0.0523855872f, 0.0806915537f, -0.362296224f, -0.0677062869f, 0.271837294f, -0.129595101f, 0.133038014f, -0.0431670919f, 0.0409328341f, 0.0361422226f, -0.345789969f, -0.0995066762f, 0.114041463f, -0.122520097f, 0.168374807f, -0.0946634263f, 0.0162231084f, 0.0809670538f, -0.447199136f, -0.0464173257f, 0.332415104f, -0.181899279f, 0.163119555f, -0.021612972f, 0.244917005f, -0.0203406438f, -0.226451963f, -0.0466972552f, 0.427060127f, -0.353922576f, 0.260274857f, 0.0236320905f, 0.214674056f, -0.0858126208f, -0.224803254f, -0.0631175712f, 0.433183074f, -0.400826514f, 0.361264884f};
  Tensor qkv = Tensor::from_vector(lcg(1 * 6 * 24, 4), {1, 6, 24});
  Tensor rph = Tensor::from_vector(lcg(3 * 4, 5), {3, 4});
  Tensor rpw = Tensor::from_vector(lcg(5 * 4, 6), {5, 4});
  Tensor out = ops::attention_relpos(qkv, 2, 2, 3, &rph, &rpw);
  expect_close(out, kTorchAttnRelPos, 1e-5, 1e-6, "attention_relpos vs torch");
}

TEST(OpsCpu, AttentionRelPos) {
  struct Case { int64_t B, H, W; int heads; int64_t hd; bool rel; int64_t row_block; };
  const Case cases[] = {
      {2, 5, 7, 3, 16, true, 0},   {2, 5, 7, 3, 16, false, 0},  {1, 4, 6, 2, 80, true, 0},
      {1, 14, 14, 2, 64, true, 0}, {3, 9, 4, 1, 8, true, 8},    {1, 13, 11, 2, 24, true, 16},
      {1, 13, 11, 2, 24, false, 24}, {1, 23, 29, 1, 64, true, 0},  // N = 667: several default blocks
      // Head sizes that are multiples of 16 and >= 32 query rows take the packed AVX-512 kernels
      // (where the CPU has AVX-512): one case per P V register-tile shape, and blocked heads.
      {1, 8, 9, 2, 80, true, 0},   {1, 6, 7, 1, 32, true, 0},   {1, 6, 7, 1, 48, false, 0},
      {1, 6, 7, 1, 96, true, 0},   {1, 6, 6, 1, 112, true, 0},  {1, 6, 6, 1, 128, false, 16},
      {2, 13, 11, 3, 64, true, 24}, {1, 40, 3, 1, 16, true, 0},
  };
  for (const Case& k : cases) {
    vitrt::cpu::set_attention_row_block(k.row_block);
    const int64_t C = k.heads * k.hd, N = k.H * k.W;
    Tensor qkv = rand_tensor({k.B, N, 3 * C}, 91, 1.5f);
    Tensor rph = rand_tensor({2 * k.H - 1, k.hd}, 92, 0.5f);
    Tensor rpw = rand_tensor({2 * k.W - 1, k.hd}, 93, 0.5f);
    Tensor out = ops::attention_relpos(qkv, k.heads, k.H, k.W, k.rel ? &rph : nullptr, k.rel ? &rpw : nullptr);
    ASSERT_EQ(out.shape(), (Shape{k.B, N, C}));
    expect_close(out, attention_relpos_ref(qkv, k.heads, k.H, k.W, k.rel ? &rph : nullptr, k.rel ? &rpw : nullptr),
                  1e-4, 2e-6,
                  "attention_relpos " + std::to_string(k.H) + "x" + std::to_string(k.W) + " hd " + std::to_string(k.hd) +
                      " rel " + std::to_string(k.rel) + " rb " + std::to_string(k.row_block));
  }
  vitrt::cpu::set_attention_row_block(0);
}

TEST(OpsCpu, AttentionRelPosInterpolatesTables) {
  // Tables trained for another size are resized like get_rel_pos (F.interpolate, linear).
  const int64_t H = 6, W = 5, hd = 8;
  Tensor qkv = rand_tensor({1, H * W, 3 * hd}, 95);
  Tensor rph = rand_tensor({7, hd}, 96), rpw = rand_tensor({13, hd}, 97);
  Tensor out = ops::attention_relpos(qkv, 1, H, W, &rph, &rpw);
  expect_close(out, attention_relpos_ref(qkv, 1, H, W, &rph, &rpw), 1e-4, 2e-6, "attention_relpos interpolated");
  EXPECT_THROW(ops::attention_relpos(qkv, 1, H, W, &rph, nullptr), InvalidArgument);
  EXPECT_THROW(ops::attention_relpos(qkv, 3, H, W, nullptr, nullptr), InvalidArgument);
  EXPECT_THROW(ops::attention_relpos(qkv, 1, H, W + 1, nullptr, nullptr), InvalidArgument);
}

TEST(OpsCpu, AttentionPlain) {
  struct Case { int64_t B, Nq, Nk, D; int heads; };
  for (Case k : {Case{2, 7, 300, 64, 4}, Case{1, 300, 7, 128, 8}, Case{1, 5, 4096, 256, 8}, Case{2, 1, 1, 16, 2},
                 Case{1, 600, 33, 48, 3}}) {
    Tensor q = rand_tensor({k.B, k.Nq, k.D}, 101, 2.f), kk = rand_tensor({k.B, k.Nk, k.D}, 102, 2.f),
           v = rand_tensor({k.B, k.Nk, k.D}, 103);
    Tensor out = ops::attention(q, kk, v, k.heads);
    ASSERT_EQ(out.shape(), (Shape{k.B, k.Nq, k.D}));
    const int64_t hd = k.D / k.heads;
    std::vector<double> ref(k.B * k.Nq * k.D);
    for (int64_t b = 0; b < k.B; ++b)
      for (int h = 0; h < k.heads; ++h) {
        auto acc = [&](const Tensor& t, int64_t n) {
          return [&t, b, h, hd, n, D = k.D](int64_t i, int64_t c) { return static_cast<double>(cf(t)[(b * n + i) * D + h * hd + c]); };
        };
        attend_ref(acc(q, k.Nq), acc(kk, k.Nk), acc(v, k.Nk), [](int64_t, int64_t) { return 0.0; }, k.Nq, k.Nk, hd,
                   1.0 / std::sqrt(static_cast<double>(hd)),
                   [&](int64_t i, int64_t c, double o) { ref[(b * k.Nq + i) * k.D + h * hd + c] = o; });
      }
    expect_close(out, ref, 1e-4, 2e-6, "attention Nq " + std::to_string(k.Nq) + " Nk " + std::to_string(k.Nk));
  }
  EXPECT_THROW(ops::attention(rand_tensor({1, 2, 8}, 1), rand_tensor({1, 3, 8}, 2), rand_tensor({1, 3, 8}, 3), 3),
               InvalidArgument);
  // One q [1, Nq, D] against B key sequences = that q repeated B times; other batch mismatches throw.
  Tensor q1 = rand_tensor({1, 40, 32}, 104, 2.f), k3 = rand_tensor({3, 6, 32}, 105, 2.f), v3 = rand_tensor({3, 6, 32}, 106);
  Tensor shared = ops::attention(q1, k3, v3, 4);
  ASSERT_EQ(shared.shape(), (Shape{3, 40, 32}));
  const Tensor repeated = ops::attention(ops::cat({q1, q1, q1}, 0), k3, v3, 4);
  EXPECT_EQ(std::memcmp(shared.data<float>(), repeated.data<float>(), sizeof(float) * shared.numel()), 0);
  EXPECT_THROW(ops::attention(rand_tensor({2, 40, 32}, 1), k3, v3, 4), InvalidArgument);
}

// Packed [q | k | v] read in place = attention of the three column ranges (ViT's in_proj output).
TEST(OpsCpu, AttentionPackedQkv) {
  struct Case { int64_t B, N, D; int heads; };
  for (Case k : {Case{2, 197, 64, 1}, Case{3, 17, 128, 2}, Case{1, 50, 96, 4}, Case{2, 1, 16, 2}}) {
    Tensor qkv = rand_tensor({k.B, k.N, 3 * k.D}, 111, 2.f);
    Tensor got = ops::attention_packed_qkv(qkv, k.heads);
    Tensor want = ops::attention(ops::narrow(qkv, 2, 0, k.D), ops::narrow(qkv, 2, k.D, k.D),
                                 ops::narrow(qkv, 2, 2 * k.D, k.D), k.heads);
    ASSERT_EQ(got.shape(), want.shape());
    std::vector<double> ref(want.data<float>(), want.data<float>() + want.numel());
    expect_close(got, ref, 1e-5, 1e-6, "attention_packed_qkv N " + std::to_string(k.N));
  }
  EXPECT_THROW(ops::attention_packed_qkv(rand_tensor({1, 4, 10}, 1), 1), InvalidArgument);  // not 3D
  EXPECT_THROW(ops::attention_packed_qkv(rand_tensor({1, 4, 24}, 1), 3), InvalidArgument);  // 8 % 3
  EXPECT_THROW(ops::attention_packed_qkv(rand_tensor({4, 24}, 1), 1), InvalidArgument);
}

// ---------------------------------------------------------------------------------- convolutions

std::vector<double> conv_ref(const Tensor& x, const Tensor& w, const Tensor* bias, int stride, int pad) {
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3);
  const int64_t Cout = w.size(0), kh = w.size(2), kw = w.size(3);
  const int64_t Ho = (H + 2 * pad - kh) / stride + 1, Wo = (W + 2 * pad - kw) / stride + 1;
  std::vector<double> y(B * Ho * Wo * Cout);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t oy = 0; oy < Ho; ++oy)
      for (int64_t ox = 0; ox < Wo; ++ox)
        for (int64_t co = 0; co < Cout; ++co) {
          double s = bias ? cf(*bias)[co] : 0.0;
          for (int64_t ci = 0; ci < Cin; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += static_cast<double>(cf(x)[((b * H + iy) * W + ix) * Cin + ci]) *
                     cf(w)[((co * Cin + ci) * kh + ky) * kw + kx];
              }
          y[((b * Ho + oy) * Wo + ox) * Cout + co] = s;
        }
  return y;
}

TEST(OpsCpu, Conv2dNhwc) {
  struct Case { int64_t B, H, W, Cin, Cout, k; int stride, pad; };
  const Case cases[] = {
      {1, 64, 48, 3, 24, 16, 16, 0},  // patch embed (stride == kernel)
      {1, 35, 21, 3, 10, 4, 4, 0},    // stride == kernel, sizes not multiples: floor like torch
      {2, 9, 11, 5, 7, 3, 1, 1},      // neck 3x3, padding 1
      {1, 8, 10, 4, 6, 2, 2, 0},      // mask-input downscaling 2x2 stride 2
      {2, 7, 5, 13, 9, 1, 1, 0},      // 1x1 (direct GEMM)
      {1, 9, 8, 3, 5, 3, 2, 1},       // strided with padding
      {1, 6, 6, 2, 3, 5, 1, 2},
  };
  for (const Case& k : cases) {
    Tensor x = rand_tensor({k.B, k.H, k.W, k.Cin}, 111);
    Tensor w = rand_tensor({k.Cout, k.Cin, k.k, k.k}, 112, 0.3f);
    Tensor b = rand_tensor({k.Cout}, 113);
    for (bool use_bias : {false, true}) {
      Tensor y = ops::conv2d_nhwc(x, w, use_bias ? &b : nullptr, k.stride, k.pad);
      const int64_t Ho = (k.H + 2 * k.pad - k.k) / k.stride + 1, Wo = (k.W + 2 * k.pad - k.k) / k.stride + 1;
      ASSERT_EQ(y.shape(), (Shape{k.B, Ho, Wo, k.Cout}));
      expect_close(y, conv_ref(x, w, use_bias ? &b : nullptr, k.stride, k.pad), 1e-5, 1e-5,
                   "conv k" + std::to_string(k.k) + " s" + std::to_string(k.stride) + " p" + std::to_string(k.pad) +
                       " bias " + std::to_string(use_bias));
    }
  }
  EXPECT_THROW(ops::conv2d_nhwc(rand_tensor({1, 4, 4, 3}, 1), rand_tensor({2, 4, 3, 3}, 2), nullptr, 1, 1),
               InvalidArgument);
  EXPECT_THROW(ops::conv2d_nhwc(rand_tensor({1, 2, 2, 3}, 1), rand_tensor({2, 3, 3, 3}, 2), nullptr, 1, 0),
               InvalidArgument);
}

TEST(OpsCpu, ConvTranspose2x2Nhwc) {
  const int64_t B = 2, H = 5, W = 3, Cin = 6, Cout = 4;
  Tensor x = rand_tensor({B, H, W, Cin}, 121);
  Tensor w = rand_tensor({Cin, Cout, 2, 2}, 122);
  Tensor b = rand_tensor({Cout}, 123);
  for (bool use_bias : {false, true}) {
    Tensor y = ops::conv_transpose2x2_nhwc(x, w, use_bias ? &b : nullptr);
    ASSERT_EQ(y.shape(), (Shape{B, 2 * H, 2 * W, Cout}));
    // Definition: out[b, 2i+ky, 2j+kx, co] = bias[co] + sum_ci x[b, i, j, ci] w[ci, co, ky, kx].
    std::vector<double> ref(y.numel());
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t oy = 0; oy < 2 * H; ++oy)
        for (int64_t ox = 0; ox < 2 * W; ++ox)
          for (int64_t co = 0; co < Cout; ++co) {
            double s = use_bias ? cf(b)[co] : 0.0;
            const int64_t i = oy / 2, j = ox / 2, ky = oy % 2, kx = ox % 2;
            for (int64_t ci = 0; ci < Cin; ++ci)
              s += static_cast<double>(cf(x)[((bb * H + i) * W + j) * Cin + ci]) * cf(w)[((ci * Cout + co) * 2 + ky) * 2 + kx];
            ref[((bb * 2 * H + oy) * 2 * W + ox) * Cout + co] = s;
          }
    expect_close(y, ref, 1e-5, 1e-5, "conv_transpose2x2 bias " + std::to_string(use_bias));
  }
}

// ---------------------------------------------------------------------------------- interpolation

// Constants from torch 2.x F.interpolate on the same LCG inputs, printed with %.9g (exact for
// float), so the comparison is bit-exact: thresholded masks must agree with the reference.
TEST(OpsCpu, InterpolateLinearRowsMatchesTorch) {
  const std::vector<float> kTorchInterp5to9 = {-0.527089f, -0.261458755f, -0.348564655f, -0.0377169997f, -0.0510240719f, 0.335185915f, -0.394803554f, 0.111664258f, -0.898912787f, -0.260963321f, -0.0942242742f, -0.0535519049f, 0.38102138f, 0.130834267f, -0.461500913f, 0.223120391f, -0.967013597f, 0.278491974f};
  const std::vector<float> kTorchInterp5to3 = {-0.348564684f, -0.0377170444f, -0.898912787f, -0.260963321f, -0.461500168f, 0.223120302f};
  const std::vector<float> kTorchInterp5to13 = {-0.527089f, -0.261458755f, -0.485891074f, -0.209826052f, -0.279901445f, 0.0483375154f, -0.0739118382f, 0.306501031f, -0.200915292f, 0.25498262f, -0.549914002f, -0.00299031916f, -0.898912787f, -0.260963321f, -0.341820955f, -0.117370859f, 0.215270892f, 0.0262216087f, 0.316211909f, 0.13793321f, -0.267072558f, 0.201823562f, -0.850356996f, 0.26571393f, -0.967013597f, 0.278491974f};
  Tensor x = Tensor::from_vector(lcg(10, 1), {5, 2});
  expect_close(ops::interpolate_linear_rows(x, 9), kTorchInterp5to9, 0, 0, "interp 5->9");
  expect_close(ops::interpolate_linear_rows(x, 3), kTorchInterp5to3, 0, 0, "interp 5->3");
  expect_close(ops::interpolate_linear_rows(x, 13), kTorchInterp5to13, 0, 0, "interp 5->13");
  expect_close(ops::interpolate_linear_rows(x, 5), lcg(10, 1), 0, 0, "interp identity");
  // Larger tables against the float formula (27 -> 127 is a SAM window table stretched to global).
  for (auto [L, n] : {std::pair<int64_t, int64_t>{27, 127}, {127, 27}, {1, 4}}) {
    auto v = lcg(L * 3, 7);
    auto ref = interp_rows_ref(v, L, 3, n);
    expect_close(ops::interpolate_linear_rows(Tensor::from_vector(v, {L, 3}), n), ref, 0, 0,
                 "interp " + std::to_string(L) + "->" + std::to_string(n));
  }
}

// F.interpolate(bilinear, align_corners=False) as torch's CPU kernel evaluates it on float:
// fma(h0, fma(w0, a, w1 b), h1 fma(w0, c, w1 d)) with float taps (bit-exact against torch 2.x).
std::vector<double> bilinear_ref(const std::vector<float>& x, int64_t N, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  auto taps = [](int64_t in, int64_t out) {
    std::vector<std::tuple<int64_t, int64_t, float>> t;
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    for (int64_t d = 0; d < out; ++d) {
      float src = std::max(0.f, rounded(scale * (d + 0.5f)) - 0.5f);
      int64_t i0 = static_cast<int64_t>(src);
      t.emplace_back(i0, std::min(i0 + 1, in - 1), src - i0);
    }
    return t;
  };
  auto ty = taps(H, oh), tx = taps(W, ow);
  std::vector<double> y(N * oh * ow);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t c = 0; c < ow; ++c) {
        auto [y0, y1, ly] = ty[r];
        auto [x0, x1, lx] = tx[c];
        auto at = [&](int64_t yy, int64_t xx) { return x[(n * H + yy) * W + xx]; };
        const float h0 = 1.f - ly, w0 = 1.f - lx;
        const float top = std::fma(w0, at(y0, x0), rounded(lx * at(y0, x1)));
        const float bot = std::fma(w0, at(y1, x0), rounded(lx * at(y1, x1)));
        y[(n * oh + r) * ow + c] = std::fma(h0, top, rounded(ly * bot));
      }
  return y;
}

TEST(OpsCpu, ResizeBilinearMatchesTorch) {
  const std::vector<float> kTorchBilin3x4to5x7 = {-0.526313901f, -0.366934329f, -0.111927077f, -0.351075351f, -0.543106437f, 0.0888356268f, 0.483799219f, -0.142180443f, -0.217918649f, -0.339099765f, -0.4814336f, -0.545992851f, -0.0449801609f, 0.268152684f, 0.434019685f, 0.00560486782f, -0.679858744f, -0.67697084f, -0.550322652f, -0.245703772f, -0.0553170443f, 0.203857839f, 0.105986066f, -0.0506087579f, -0.0302654244f, -0.0262872521f, -0.313802242f, -0.49349907f, 0.050416708f, 0.172906831f, 0.368890971f, 0.400871277f, 0.323069513f, -0.359201223f, -0.785620213f, 0.135102868f, 0.293102741f, 0.545902491f, 0.252153724f, -0.0755465031f, -0.0943595693f, -0.106117725f, -0.307705283f, -0.119181171f, 0.182457283f, 0.280597389f, 0.307453185f, 0.0388180912f, -0.129078761f, -0.971917391f, -0.737607002f, -0.362710506f, 0.323262841f, 0.881952584f, 0.238584548f, -0.163520336f, 0.0996680558f, 0.0906781331f, 0.0762943476f, 0.374189645f, 0.611698151f, 0.114222251f, -0.196700051f, 0.814057946f, 0.642867982f, 0.368964076f, 0.408140838f, 0.431528628f, 0.0313141048f, -0.218819857f};
  const std::vector<float> kTorchBilin3x4to2x3 = {-0.280429393f, -0.432549208f, 0.1885712f, 0.139207259f, 0.131410733f, -0.476009607f, -0.0590160228f, 0.269931018f, -0.0694408119f, 0.334983855f, 0.386921287f, -0.0705359206f};
  const std::vector<float> kTorchBilin6x5to4x9 = {-0.211684078f, -0.0929774493f, 0.104866944f, 0.304568797f, 0.504735053f, 0.327290863f, 0.159441173f, 0.0299689453f, -0.047714293f, -0.330676347f, -0.0516436659f, 0.413410813f, 0.286174744f, 0.0108662546f, 0.0758378208f, 0.159687296f, 0.319048703f, 0.414665371f, 0.668612599f, 0.234371379f, -0.489363879f, -0.467208475f, -0.258580655f, -0.308921218f, -0.350412518f, -0.356507182f, -0.360163987f, 0.185360849f, 0.219376415f, 0.276069015f, 0.415537268f, 0.575699329f, 0.564272344f, 0.56684947f, 0.625442922f, 0.660598934f};
  // These outputs are tiny (out_h + out_w <= 128), for which torch switches to its channels-last
  // kernel with another rounding order: agreement to an ulp or so, not bit for bit.
  Tensor p = Tensor::from_vector(lcg(24, 2), {2, 3, 4});
  expect_close(ops::resize_bilinear(p, 5, 7), kTorchBilin3x4to5x7, 1e-6, 1e-7, "bilinear 3x4->5x7");
  expect_close(ops::resize_bilinear(p, 2, 3), kTorchBilin3x4to2x3, 1e-6, 1e-7, "bilinear 3x4->2x3");
  Tensor p2 = Tensor::from_vector(lcg(30, 3), {1, 6, 5});
  expect_close(ops::resize_bilinear(p2, 4, 9), kTorchBilin6x5to4x9, 1e-6, 1e-7, "bilinear 6x5->4x9");
  // Larger outputs take torch's generic kernel, which bilinear_ref reproduces bit for bit (checked
  // against torch on random data at these sizes and at SAM's 256 -> 1024 and 1024 -> 683x1024).
  auto v = lcg(2 * 64 * 64, 8);
  expect_close(ops::resize_bilinear(Tensor::from_vector(v, {1, 2, 64, 64}), 256, 256), bilinear_ref(v, 2, 64, 64, 256, 256),
               0, 0, "bilinear 64->256");
  auto u = lcg(300 * 200, 9);
  expect_close(ops::resize_bilinear(Tensor::from_vector(u, {1, 300, 200}), 171, 77), bilinear_ref(u, 1, 300, 200, 171, 77),
               0, 0, "bilinear 300x200->171x77");
}

TEST(OpsCpu, MeasureSgemmIsPositive) {
  EXPECT_GT(vitrt::cpu::measure_sgemm_gflops(64, 64, 64, 2), 0.0);
}

}  // namespace

// The predictor upsamples low-res logits to S x S and keeps only the resized image's corner;
// computing just that corner must give exactly the values of the full resize.
TEST(OpsCpu, ResizeBilinearCroppedEqualsResizeThenCrop) {
  const int64_t N = 3, H = 64, W = 64, S = 256, keep_h = 171, keep_w = 256;
  std::vector<float> x(N * H * W), full(N * S * S), crop(N * keep_h * keep_w);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 5.f + 0.1f;
  vitrt::cpu::resize_bilinear(x.data(), full.data(), N, H, W, S, S);
  vitrt::cpu::resize_bilinear_cropped(x.data(), crop.data(), N, H, W, S, S, keep_h, keep_w);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < keep_h; ++y)
      for (int64_t c = 0; c < keep_w; ++c)
        ASSERT_EQ(crop[(n * keep_h + y) * keep_w + c], full[(n * S + y) * S + c]) << n << "," << y << "," << c;
}

// The erf of the GPU's bf16 GELU epilogues (ops/cuda/fast_erf.h): within 5e-7 of std::erf everywhere
// (fp32 arithmetic on top of the formula's 1.5e-7), so the GELU is within 2e-6 absolute -- 250 times
// closer than the tanh form of cuBLASLt's GELU epilogue (5e-4), and below a bf16 step for every
// |GELU| > 1e-3.
TEST(OpsCpu, FastErfMatchesErf) {
  double worst = 0, worst_gelu = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i) * 5e-5f;  // [-10, 10]
    worst = std::max(worst, std::fabs(static_cast<double>(vitrt::fast_erf::erf_as7126(x)) - std::erf(static_cast<double>(x))));
    const double g = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    worst_gelu = std::max(worst_gelu, std::fabs(vitrt::fast_erf::gelu(x) - g));
  }
  EXPECT_LE(worst, 5e-7);
  EXPECT_LE(worst_gelu, 2e-6);
  for (float x : {30.f, -30.f, 1e30f, -1e30f}) EXPECT_EQ(vitrt::fast_erf::erf_as7126(x), x > 0 ? 1.f : -1.f);
  EXPECT_EQ(vitrt::fast_erf::erf_as7126(0.f), 0.f);
  EXPECT_TRUE(std::isnan(vitrt::fast_erf::erf_as7126(NAN)));
}

// The shape rules both backends share (ops::*_shape; the CUDA front-end has no other copy of them,
// so they are checked here where CI runs): output shapes on ordinary and edge inputs, and the
// errors for inputs that do not fit.
TEST(OpsCpu, SharedShapeRules) {
  const Tensor x4 = Tensor::zeros({2, 5, 7, 3});
  EXPECT_EQ(ops::permute_shape(x4, {0, 3, 1, 2}), (Shape{2, 3, 5, 7}));
  EXPECT_THROW(ops::permute_shape(x4, {0, 1, 2}), InvalidArgument);     // too few axes
  EXPECT_THROW(ops::permute_shape(x4, {0, 1, 1, 2}), InvalidArgument);  // not a permutation

  const std::vector<Tensor> parts = {Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 5, 4})};
  const ops::CatShape c = ops::cat_shape(parts, -2);
  EXPECT_EQ(c.dim, 1);
  EXPECT_EQ(c.out, (Shape{2, 8, 4}));
  EXPECT_EQ(c.outer, 2);
  EXPECT_EQ(c.inner, 4);
  EXPECT_THROW(ops::cat_shape({}, 0), InvalidArgument);
  EXPECT_THROW(ops::cat_shape(parts, 3), InvalidArgument);  // dim out of range
  EXPECT_THROW(ops::cat_shape(parts, 0), InvalidArgument);  // sizes differ outside dim 0

  // Windows of 4 over 5 x 7: 2 x 2 windows per image, padded.
  EXPECT_EQ(ops::window_partition_shape(x4, 4), (Shape{8, 4, 4, 3}));
  EXPECT_THROW(ops::window_partition_shape(x4, 0), InvalidArgument);
  EXPECT_EQ(ops::window_unpartition_shape(Tensor::zeros({8, 4, 4, 3}), 4, 5, 7), (Shape{2, 5, 7, 3}));
  EXPECT_THROW(ops::window_unpartition_shape(Tensor::zeros({7, 4, 4, 3}), 4, 5, 7), InvalidArgument);  // 7 % 4
  EXPECT_THROW(ops::window_unpartition_shape(Tensor::zeros({8, 4, 4, 3}), 3, 5, 7), InvalidArgument);  // ws

  EXPECT_EQ(ops::interpolate_linear_rows_shape(Tensor::zeros({14, 6}), 27), (Shape{27, 6}));
  EXPECT_THROW(ops::interpolate_linear_rows_shape(Tensor::zeros({14, 6}), 0), InvalidArgument);
  EXPECT_EQ(ops::resize_bilinear_shape(x4, 9, 11), (Shape{2, 5, 9, 11}));  // the last two dimensions
  EXPECT_THROW(ops::resize_bilinear_shape(x4, 0, 11), InvalidArgument);

  // SAM's patch embedding: 16 x 16 kernel, stride 16; and a padded 3 x 3.
  const ops::Conv2dShape p = ops::conv2d_shape(Tensor::zeros({1, 64, 48, 3}), Tensor::zeros({8, 3, 16, 16}), 16, 0);
  EXPECT_EQ(std::vector<int64_t>({p.B, p.H, p.W, p.Cin, p.Cout, p.kh, p.kw, p.Ho, p.Wo}),
            std::vector<int64_t>({1, 64, 48, 3, 8, 16, 16, 4, 3}));
  const ops::Conv2dShape q = ops::conv2d_shape(x4, Tensor::zeros({4, 3, 3, 3}), 2, 1);
  EXPECT_EQ(q.Ho, 3);
  EXPECT_EQ(q.Wo, 4);
  EXPECT_THROW(ops::conv2d_shape(x4, Tensor::zeros({4, 2, 3, 3}), 1, 0), InvalidArgument);  // Cin
  EXPECT_THROW(ops::conv2d_shape(x4, Tensor::zeros({4, 3, 9, 3}), 1, 1), InvalidArgument);  // kernel too tall
  EXPECT_THROW(ops::conv2d_shape(x4, Tensor::zeros({4, 3, 3, 3}), 0, 0), InvalidArgument);  // stride
}

// The streamed BSR kernel's schedule (ops/cuda/bsr_stream_schedule.h, device code tested here):
// every (tile, row_order position) is exactly one item, and a persistent CTA that takes items c,
// c + grid, ... meets several positions even when the grid is a multiple of the block-row count
// (264 CTAs over ViT-B's 12 or 24 block-rows: without the rotation each CTA kept one position, the
// slow ones fell behind and x fell out of L2; BENCHMARKS.md 2026-12-04 16:00 session, call 3).
TEST(OpsCpu, BsrStreamScheduleCoversEveryItemOnceAndRotates) {
  for (int block_rows : {1, 12, 20, 24, 48, 96}) {
    const int tiles = 394;  // 50432 tokens
    std::vector<int> seen(static_cast<size_t>(tiles) * block_rows, 0);
    for (int item = 0; item < tiles * block_rows; ++item) {
      const vitrt::cuda::BsrStreamItem it = vitrt::cuda::bsr_stream_item(item, block_rows);
      ASSERT_TRUE(it.tile >= 0 && it.tile < tiles && it.position >= 0 && it.position < block_rows) << item;
      EXPECT_EQ(it.tile, item / block_rows) << "items go tile by tile";
      ++seen[static_cast<size_t>(it.tile) * block_rows + it.position];
    }
    for (int n : seen) ASSERT_EQ(n, 1) << "block_rows " << block_rows;
    if (block_rows < 12) continue;
    for (int grid : {264, 132}) {
      std::vector<int> positions;
      for (int item = 5; item < tiles * block_rows; item += grid)  // CTA 5's items
        positions.push_back(vitrt::cuda::bsr_stream_item(item, block_rows).position);
      std::sort(positions.begin(), positions.end());
      const auto distinct = std::unique(positions.begin(), positions.end()) - positions.begin();
      EXPECT_GE(distinct, std::min(4, block_rows / 4)) << "block_rows " << block_rows << " grid " << grid;
    }
  }
}

// The kernel steps through its items with BsrStreamCursor (no division per item): equal to
// bsr_stream_item at every step, for grids below, at and above the block-row count, multiples of it
// and not, and first items in and past the first tile.
TEST(OpsCpu, BsrStreamCursorMatchesTheSchedule) {
  for (int block_rows : {1, 2, 7, 12, 24, 48, 96})
    for (int grid : {1, 3, 11, 12, 13, 24, 100, 132, 264, 300}) {
      const int items = 394 * block_rows;
      for (int first : {0, 1, grid / 2, grid - 1}) {
        if (first >= items) continue;
        vitrt::cuda::BsrStreamCursor cur(first, grid, block_rows);
        for (int item = first; item < items; item += grid, cur.step()) {
          const vitrt::cuda::BsrStreamItem want = vitrt::cuda::bsr_stream_item(item, block_rows);
          const vitrt::cuda::BsrStreamItem got = cur.current();
          ASSERT_EQ(cur.item, item);
          ASSERT_EQ(got.tile, want.tile) << "block_rows " << block_rows << " grid " << grid << " item " << item;
          ASSERT_EQ(got.position, want.position) << "block_rows " << block_rows << " grid " << grid << " item " << item;
        }
      }
    }
}

// The fused MLP kernel's division of work (ops/cuda/bsr_mlp_units.h, device code tested here): the
// CTAs' ranges cover every unit once, in order; in whole-tile mode every range is whole tiles and the
// ranges differ by at most a tile, else by at most a unit; the whole-tile rule takes ViT-B/16 at
// batch 256 (263 tiles on 132 SMs) and leaves a batch of 200 tiles to units.
TEST(OpsCpu, BsrMlpUnitRangesCoverEveryUnitOnce) {
  struct Case {
    int tiles, tile_units, grid;
  };
  for (const Case& c : std::vector<Case>{{263, 12, 132}, {200, 12, 132}, {33, 12, 132}, {2, 12, 24}, {6, 2, 7},
                                         {6, 2, 3}, {1, 1, 1}, {5, 3, 15}, {394, 1, 132}, {1000, 24, 132}})
    for (bool whole : {false, true}) {
      SCOPED_TRACE(::testing::Message() << c.tiles << " tiles x " << c.tile_units << " on " << c.grid << " CTAs, whole "
                                        << whole);
      int next = 0, least = INT32_MAX, most = 0;
      for (int cta = 0; cta < c.grid; ++cta) {
        const vitrt::cuda::BsrMlpUnitRange r = vitrt::cuda::bsr_mlp_unit_range(c.tiles, c.tile_units, whole, cta, c.grid);
        ASSERT_EQ(r.begin, next);
        ASSERT_GE(r.end, r.begin);
        if (whole) EXPECT_EQ(r.begin % c.tile_units, 0);
        least = std::min(least, r.end - r.begin);
        most = std::max(most, r.end - r.begin);
        next = r.end;
      }
      EXPECT_EQ(next, c.tiles * c.tile_units);
      EXPECT_LE(most - least, whole ? c.tile_units : 1);
      if ((whole ? c.tiles : c.tiles * c.tile_units) >= c.grid) EXPECT_GE(least, 1) << "a CTA without work";
    }
  EXPECT_TRUE(vitrt::cuda::bsr_mlp_whole_tiles(263, 132));
  EXPECT_TRUE(vitrt::cuda::bsr_mlp_whole_tiles(264, 132));
  EXPECT_TRUE(vitrt::cuda::bsr_mlp_whole_tiles(132, 132));
  EXPECT_FALSE(vitrt::cuda::bsr_mlp_whole_tiles(200, 132));
  EXPECT_FALSE(vitrt::cuda::bsr_mlp_whole_tiles(33, 132));
  EXPECT_FALSE(vitrt::cuda::bsr_mlp_whole_tiles(6, 7));
  EXPECT_TRUE(vitrt::cuda::bsr_mlp_whole_tiles(125, 132));  // (7 CTAs idle: the busiest still has 1 tile)
}

// Tiles shared by P CTAs (bsr_mlp_units.h): the parts hold every block-row once, within the LPT bound
// (the busiest part at most the average plus the costliest row); the CTAs' cursors visit every (tile,
// block-row) unit exactly once, each CTA its part's rows of tiles in ascending order; the choice
// shares ViT-B/16's 197 tiles on 132 SMs and declines a batch with fewer than two tiles per group.
TEST(OpsCpu, BsrMlpSharedTilesCoverEveryUnitOnce) {
  std::mt19937 rng(7);
  for (int groups : {1, 2, 3, 12, 16, 20, 32, 33})
    for (int P = 1; P <= 9; ++P) {
      std::vector<int64_t> cost(groups);
      for (auto& c : cost) c = 1 + static_cast<int64_t>(rng() % 60);
      const vitrt::cuda::BsrMlpTileParts t = vitrt::cuda::bsr_mlp_tile_parts(cost, P);
      SCOPED_TRACE(::testing::Message() << groups << " block-rows in " << P << " parts");
      if (P > vitrt::cuda::kMaxTileParts || groups < P || groups > vitrt::cuda::kMaxPartRows) {
        EXPECT_EQ(t.ctas, 0);
        continue;
      }
      ASSERT_EQ(t.ctas, P);
      ASSERT_EQ(t.begin[0], 0);
      ASSERT_EQ(t.begin[P], groups);
      std::vector<int> seen(groups, 0);
      const int64_t total = std::accumulate(cost.begin(), cost.end(), int64_t{0});
      const int64_t costliest = *std::max_element(cost.begin(), cost.end());
      for (int i = 0; i < P; ++i) {
        ASSERT_LT(t.begin[i], t.begin[i + 1]) << "an empty part";
        int64_t load = 0;
        for (int k = t.begin[i]; k < t.begin[i + 1]; ++k) {
          ++seen[t.rows[k]];
          load += cost[t.rows[k]];
          if (k > t.begin[i]) EXPECT_LT(t.rows[k - 1], t.rows[k]);
        }
        EXPECT_LE(load * P, total + costliest * P);
      }
      EXPECT_EQ(seen, std::vector<int>(groups, 1));
      for (int tiles : {1, 5, 33, 197})
        for (int grid : {P, P + 1, 3 * P, 132}) {
          SCOPED_TRACE(::testing::Message() << tiles << " tiles on " << grid << " CTAs");
          std::vector<int> units(static_cast<size_t>(tiles) * groups, 0);
          for (int cta = 0; cta < grid; ++cta) {
            vitrt::cuda::BsrMlpUnitCursor cur(tiles, groups, false, t, cta, grid);
            int tile = -1, grp = -1, last_tile = -1;
            while (cur.next(t, tile, grp)) {
              ASSERT_TRUE(tile >= 0 && tile < tiles && grp >= 0 && grp < groups);
              ASSERT_GE(tile, last_tile);
              EXPECT_EQ(tile % (grid / P), cta / P);
              ++units[static_cast<size_t>(tile) * groups + grp];
              last_tile = tile;
            }
          }
          EXPECT_EQ(units, std::vector<int>(units.size(), 1));
        }
    }
  // Contiguous ranges through the same cursor (ctas = 0).
  const vitrt::cuda::BsrMlpTileParts none;
  std::vector<int> units(200 * 12, 0);
  for (int cta = 0; cta < 132; ++cta) {
    vitrt::cuda::BsrMlpUnitCursor cur(200, 12, false, none, cta, 132);
    int tile = 0, grp = 0;
    while (cur.next(none, tile, grp)) ++units[static_cast<size_t>(tile) * 12 + grp];
  }
  EXPECT_EQ(units, std::vector<int>(units.size(), 1));
  // The choice: ViT-B's 12 block-rows at similar costs, 197 tiles on 132 SMs: shared; 25 tiles: not.
  std::vector<int64_t> vit(12);
  for (auto& c : vit) c = 30 + static_cast<int64_t>(rng() % 20);
  EXPECT_GT(vitrt::cuda::bsr_mlp_choose_tile_parts(vit, 197, 132).ctas, 0);
  EXPECT_EQ(vitrt::cuda::bsr_mlp_choose_tile_parts(vit, 25, 132).ctas, 0);
  EXPECT_EQ(vitrt::cuda::bsr_mlp_choose_tile_parts(vit, 1, 8, 4).ctas, 4);   // asked for: wherever it fits
  EXPECT_EQ(vitrt::cuda::bsr_mlp_choose_tile_parts(vit, 1, 3, 4).ctas, 0);   // (fewer CTAs than parts)
  // One costly row among cheap ones: no P splits it evenly, so none is taken.
  std::vector<int64_t> lopsided(12, 1);
  lopsided[3] = 100;
  EXPECT_EQ(vitrt::cuda::bsr_mlp_choose_tile_parts(lopsided, 197, 132).ctas, 0);
}
