// The GPU's tap-major im2col index arithmetic (src/ops/cuda/im2col_taps.h), run on the host: the
// columns it builds times the weight permuted to [Cout, kh, kw, Cin] must equal the CPU convolution,
// for the patch embedding (kernel = stride, 3 channels), the neck's 3x3 padded conv, strides,
// asymmetric sizes and both the scalar and the vectorised step.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/cuda/im2col_taps.h"
#include "ops/ops.h"

namespace vitrt {
namespace {

Tensor randn(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::empty(s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
  return t;
}

TEST(Im2colTaps, ColumnsTimesPermutedWeightEqualConvolution) {
  struct Case {
    int B, H, W, Cin, Cout, k, stride, pad, vec;
  };
  const Case cases[] = {
      {2, 32, 32, 3, 8, 16, 16, 0, 1},  // patch embedding
      {2, 9, 7, 16, 5, 3, 1, 1, 1},     // neck-like 3x3, scalar steps
      {1, 9, 7, 16, 5, 3, 1, 1, 8},     // the same with 8-element (16-byte bf16) steps
      {1, 11, 13, 8, 4, 3, 2, 1, 4},    // stride 2
      {3, 5, 6, 4, 3, 2, 1, 0, 2},      // even kernel, no padding
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("k" + std::to_string(c.k) + " s" + std::to_string(c.stride) + " p" + std::to_string(c.pad) +
                 " vec" + std::to_string(c.vec));
    Tensor x = randn({c.B, c.H, c.W, c.Cin}, ++seed), w = randn({c.Cout, c.Cin, c.k, c.k}, ++seed);
    const Tensor want = ops::conv2d_nhwc(x, w, nullptr, c.stride, c.pad);
    const int Ho = static_cast<int>(want.size(1)), Wo = static_cast<int>(want.size(2));
    cuda::Im2colTaps g{c.B, c.H, c.W, c.Cin, c.k, c.k, c.stride, c.pad, Ho, Wo, c.vec};
    const int64_t M = int64_t{c.B} * Ho * Wo, K = int64_t{c.Cin} * c.k * c.k;
    ASSERT_EQ(g.steps() * c.vec, M * K);
    Tensor col = Tensor::empty({M, K});
    std::vector<int> written(static_cast<size_t>(M * K), 0);
    for (int64_t i = 0; i < g.steps(); ++i) {
      int64_t d = -1, s = -1;
      const bool inside = g.at(i, &d, &s);
      ASSERT_TRUE(d >= 0 && d + c.vec <= M * K) << i;
      for (int e = 0; e < c.vec; ++e) {
        col.data<float>()[d + e] = inside ? x.data<float>()[s + e] : 0.f;
        ++written[static_cast<size_t>(d + e)];
      }
    }
    for (int n : written) ASSERT_EQ(n, 1) << "every column element written exactly once";
    const Tensor w_taps = ops::permute(w, {0, 2, 3, 1});
    const Tensor got = ops::linear(col, w_taps.reshape({c.Cout, K}));
    ASSERT_EQ(got.numel(), want.numel());
    double err = 0, ref = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double d = got.data<float>()[i] - want.data<float>()[i];
      err += d * d;
      ref += double(want.data<float>()[i]) * want.data<float>()[i];
    }
    EXPECT_LT(std::sqrt(err / ref), 1e-6);
  }
}

// The padding-free kernel-row steps write exactly the tap-major columns: every element once, with
// the value the per-tap steps put there (patch embeddings of SAM / ViT-B/16 and a strided case).
TEST(Im2colTaps, KernelRowRunsEqualTapSteps) {
  struct Case {
    int B, H, W, Cin, k, stride, vec;
  };
  const Case cases[] = {{2, 32, 32, 3, 16, 16, 8}, {1, 48, 32, 3, 16, 16, 16}, {2, 9, 11, 4, 3, 2, 4}, {1, 8, 8, 2, 4, 4, 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE("k" + std::to_string(c.k) + " s" + std::to_string(c.stride) + " vec" + std::to_string(c.vec));
    const int Ho = (c.H - c.k) / c.stride + 1, Wo = (c.W - c.k) / c.stride + 1;
    const cuda::Im2colTaps taps{c.B, c.H, c.W, c.Cin, c.k, c.k, c.stride, 0, Ho, Wo, 1};
    const cuda::Im2colRows rows{c.B, c.H, c.W, c.Cin, c.k, c.k, c.stride, Ho, Wo, c.vec};
    ASSERT_EQ((c.k * c.Cin) % c.vec, 0);
    const int64_t n = taps.steps();
    ASSERT_EQ(rows.steps() * c.vec, n);
    std::vector<int64_t> want(static_cast<size_t>(n), -1), got(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = 0, s = 0;
      ASSERT_TRUE(taps.at(i, &d, &s));
      want[static_cast<size_t>(d)] = s;
    }
    for (int64_t i = 0; i < rows.steps(); ++i) {
      int64_t d = 0, s = 0;
      rows.at(i, &d, &s);
      ASSERT_TRUE(d >= 0 && d + c.vec <= n && d % c.vec == 0 && s % c.vec == 0) << i;
      for (int e = 0; e < c.vec; ++e) {
        ASSERT_EQ(got[static_cast<size_t>(d + e)], -1) << "written twice: " << d + e;
        got[static_cast<size_t>(d + e)] = s + e;
      }
    }
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace vitrt
