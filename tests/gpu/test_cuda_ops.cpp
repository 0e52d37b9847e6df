// CUDA operators (ops::cuda_impl) against the CPU operators (ops::*) on the same random inputs.
//
// Inputs are random normals (never all zeros), shapes odd and aligned, both dtypes:
//   float32: relative Frobenius error ||gpu - cpu|| / ||cpu|| <= 1e-5 (kTolF32) for arithmetic ops;
//            bit-identical for data movement (permute, cat, windows, im2col through conv is
//            arithmetic) and for the interpolations, whose float index math and FMA pattern
//            follow the CPU kernel exactly;
//   bfloat16: the CPU reference runs in fp32 on the bf16-rounded inputs; <= 1e-2 (kTolBF16)
//            relative Frobenius (bf16 output rounding is ~2^-9 relative); data movement is
//            bit-identical.
// Pre-processing (Pillow-exact resize, normalise + pad) and mask post-processing are
// byte/bit-identical to the CPU path. Every test skips (GTEST_SKIP) without CUDA or a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "ops/cpu/resize_antialias.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"
#include "vitrt/image.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/gemm.h"
#include "ops/cuda/gemm_cutlass.h"
#include "ops/cuda/runtime.h"
#endif

using namespace vitrt;
namespace cu = vitrt::ops::cuda_impl;
using ops::Activation;
using test::identical;

namespace {

constexpr double kTolF32 = 1e-5;
constexpr double kTolBF16 = 1e-2;
const DType kDtypes[] = {DType::F32, DType::BF16};

double tol(DType dt) { return dt == DType::F32 ? kTolF32 : kTolBF16; }

class CudaOps : public test::CudaTest {
 protected:
  void TearDown() override {
    test::CudaTest::TearDown();
#ifdef VITRT_HAVE_CUDA
    if (!IsSkipped() && cuda::device_count() > 0)
      std::printf("[gemm fallback calls so far: %lld]\n", static_cast<long long>(cuda::gemm_fallback_calls()));
#endif
  }
};

// Random normals * scale + offset as float32 on the host; exact zeros are replaced (never zeros).
Tensor randn(const Shape& s, uint32_t seed, float scale = 1.f, float offset = 0.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = offset + scale * nd(rng);
    p[i] = v == 0.f ? 0.25f : v;
  }
  return t;
}

// Host float32 -> device tensor of dtype dt (rounded to bf16 on the host).
Tensor up(const Tensor& host_f32, DType dt) { return cu::cast(host_f32, dt).to(Device::CUDA); }
// Device tensor -> host float32 (converted on the host, independent of the GPU cast kernel).
Tensor down(const Tensor& d) { return cu::cast(d.to(Device::CPU), DType::F32); }
// What the GPU sees of a host float32 tensor sent as dt: the CPU reference's input.
Tensor seen(const Tensor& host_f32, DType dt) {
  return dt == DType::F32 ? host_f32 : cu::cast(cu::cast(host_f32, DType::BF16), DType::F32);
}

std::string head(const float* p, int64_t n) {
  std::ostringstream os;
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i) os << (i ? ", " : "") << p[i];
  return os.str();
}

// Relative Frobenius error, with the worst element and the first values on failure.
::testing::AssertionResult close(const Tensor& got, const Tensor& want, double tolerance) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " != " << shape_str(want.shape());
  const Tensor g = got.to_f32(), w = want.to_f32();
  const float* a = g.data<float>();
  const float* b = w.data<float>();
  double num = 0, den = 0, worst = -1;
  int64_t wi = 0, nonfinite = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (!std::isfinite(a[i])) ++nonfinite;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
    if (std::fabs(d) > worst) worst = std::fabs(d), wi = i;
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (nonfinite == 0 && rel <= tolerance) return ::testing::AssertionSuccess() << "rel " << rel;
  return ::testing::AssertionFailure() << "shape " << shape_str(g.shape()) << ": relative Frobenius error " << rel
                                       << " > " << tolerance << " (" << nonfinite << " non-finite); worst |diff| "
                                       << worst << " at flat index " << wi << " (got " << a[wi] << ", want " << b[wi]
                                       << ")\n  got:  " << head(a, g.numel()) << "\n  want: " << head(b, w.numel());
}

// The strided-batch layout of a cuda::GemmArgs call (element strides; tb: B is [N, K]).
struct GemmLayout {
  int64_t batch, M, N, K, lda, ldb, ldd, sa, sb, sd;
  bool tb;
};

// D = alpha * A op(B) + C + bias, then ReLU, in double, on host float32 operands; D's padding columns
// keep the values of dinit.
Tensor reference_gemm(const Tensor& a, const Tensor& b, const Tensor* c, const Tensor* bias, bool relu, float alpha,
                      const Tensor& dinit, const GemmLayout& l) {
  Tensor want = dinit.clone();
  const float *pa = a.data<float>(), *pb = b.data<float>();
  for (int64_t z = 0; z < l.batch; ++z)
    for (int64_t m = 0; m < l.M; ++m)
      for (int64_t n = 0; n < l.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < l.K; ++k) {
          const double bv = l.tb ? pb[z * l.sb + n * l.ldb + k] : pb[z * l.sb + k * l.ldb + n];
          acc += static_cast<double>(pa[z * l.sa + m * l.lda + k]) * bv;
        }
        double v = alpha * acc;
        if (c) v += c->data<float>()[z * l.sd + m * l.ldd + n];
        if (bias) v += bias->data<float>()[n];
        if (relu && v < 0) v = 0;
        want.data<float>()[z * l.sd + m * l.ldd + n] = static_cast<float>(v);
      }
  return want;
}

#ifdef VITRT_HAVE_CUDA
// Runs cuda::gemm (or gemm_simple) on device operands laid out as `l`: A and B of dtype `dt`, C / D /
// bias of `d_dt`; c and bias may be null. D is updated in place.
void run_device_gemm(const GemmLayout& l, DType dt, DType d_dt, const Tensor& a, const Tensor& b, const Tensor* c,
                     const Tensor* bias, bool relu, float alpha, Tensor& d, bool simple) {
  cuda::GemmArgs g;
  g.dtype = dt;
  g.d_dtype = d_dt;
  g.M = l.M, g.N = l.N, g.K = l.K;
  g.a = a.raw(), g.b = b.raw(), g.trans_b = l.tb, g.d = d.raw();
  g.c = c ? c->raw() : nullptr;
  g.bias = bias ? bias->raw() : nullptr;
  g.relu = relu, g.alpha = alpha;
  g.lda = l.lda, g.ldb = l.ldb, g.ldd = l.ldd;
  g.batch = l.batch, g.stride_a = l.sa, g.stride_b = l.sb, g.stride_d = l.sd;
  if (simple)
    cuda::gemm_simple(g);
  else
    cuda::gemm(g);
}
#endif

const char* act_name(Activation a) {
  return a == Activation::None ? "none" : a == Activation::GELU ? "gelu" : "relu";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
TEST_F(CudaOps, CastMatchesHost) {
  Tensor x = randn({3, 1001}, 1, 10.f);
  // A few exact ties for round-to-nearest-even: bf16 keeps 8 mantissa bits.
  float* p = x.data<float>();
  p[0] = 1.f + 1.f / 256.f;  // halfway, even below
  p[1] = 1.f + 3.f / 256.f;  // halfway, even above
  Tensor hb = cu::cast(x, DType::BF16);
  Tensor gb = cu::cast(x.to(Device::CUDA), DType::BF16);
  ASSERT_TRUE(gb.is_cuda());
  EXPECT_TRUE(identical(gb.to(Device::CPU), hb)) << "F32 -> BF16 on the GPU vs the host";
  Tensor gf = cu::cast(hb.to(Device::CUDA), DType::F32);
  EXPECT_TRUE(identical(gf.to(Device::CPU), cu::cast(hb, DType::F32))) << "BF16 -> F32";
  // Same dtype: the tensor itself.
  Tensor same = cu::cast(gb, DType::BF16);
  EXPECT_EQ(same.raw(), gb.raw());
}

TEST_F(CudaOps, LinearEveryEpilogue) {
  struct Case {
    Shape x;
    int64_t N;
  };
  const Case cases[] = {{{37, 53}, 29}, {{2, 19, 53}, 31}, {{128, 256}, 192}, {{1, 1}, 1}, {{3, 5, 8}, 16}};
  uint32_t seed = 100;
  for (DType dt : kDtypes)
    for (const Case& c : cases)
      for (Activation act : {Activation::None, Activation::GELU, Activation::ReLU})
        for (bool use_bias : {false, true})
          for (bool use_res : {false, true}) {
            // A single output element next to a residual of similar size can cancel, and then the
            // intermediate rounding (bf16 GEMM output before GELU/ReLU + residual) is not small
            // relative to it: the 1x1 case runs without residual only.
            if (use_res && shape_numel(c.x) == 1) continue;
            const int64_t K = c.x.back();
            Shape out_shape = c.x;
            out_shape.back() = c.N;
            Tensor x = randn(c.x, ++seed), w = randn({c.N, K}, ++seed, 1.f / std::sqrt(float(K)));
            Tensor b = randn({c.N}, ++seed, 0.5f), r = randn(out_shape, ++seed);
            Tensor xs = seen(x, dt), ws = seen(w, dt), bs = seen(b, dt), rs = seen(r, dt);
            Tensor want = ops::linear(xs, ws, use_bias ? &bs : nullptr, act, use_res ? &rs : nullptr);
            Tensor xd = up(x, dt), wd = up(w, dt), bd = up(b, dt), rd = up(r, dt);
            Tensor got = cu::linear(xd, wd, use_bias ? &bd : nullptr, act, use_res ? &rd : nullptr);
            ASSERT_TRUE(got.is_cuda());
            EXPECT_EQ(got.dtype(), dt);
            EXPECT_TRUE(close(down(got), want, tol(dt)))
                << dtype_name(dt) << " x " << shape_str(c.x) << " N=" << c.N << " act=" << act_name(act)
                << " bias=" << use_bias << " residual=" << use_res;
          }
}

TEST_F(CudaOps, LinearAddInPlace) {
  // y += x w^T + bias in place, on a whole tensor and on a row range (a view), same dtype and
  // bf16 -> f32 (the encoder's fp32 residual stream); against the CPU linear with residual.
  uint32_t seed = 900;
  for (DType dt : kDtypes)
    for (bool to_f32 : {false, true}) {
      if (to_f32 && dt != DType::BF16) continue;
      const DType od = to_f32 ? DType::F32 : dt;
      for (bool use_bias : {false, true}) {
        Tensor x = randn({70, 48}, ++seed), w = randn({40, 48}, ++seed, 0.15f), b = randn({40}, ++seed, 0.5f);
        Tensor y = randn({70, 40}, ++seed);
        Tensor xs = seen(x, dt), ws = seen(w, dt), ys = seen(y, od), bs = seen(b, dt);
        Tensor want = ops::linear(xs, ws, use_bias ? &bs : nullptr, Activation::None, &ys);
        Tensor yd = up(y, od), xd = up(x, dt), wd = up(w, dt), bd = up(b, dt);
        cu::linear_add_(yd, xd, wd, use_bias ? &bd : nullptr);
        EXPECT_EQ(yd.dtype(), od);
        EXPECT_TRUE(close(down(yd), want, od == DType::F32 && dt == DType::BF16 ? 1e-4 : tol(od)))
            << dtype_name(dt) << " -> " << dtype_name(od) << " bias=" << use_bias;
        // Rows 10..50 only, through a view: the rest stays untouched.
        Tensor yd2 = up(y, od);
        Tensor rows = yd2.slice0(10, 50);
        cu::linear_add_(rows, up(x.slice0(10, 50).clone(), dt), wd, use_bias ? &bd : nullptr);
        Tensor got = down(yd2), orig = down(up(y, od));
        const float* g = got.data<float>();
        const float* o = orig.data<float>();
        for (int64_t i = 0; i < 10 * 40; ++i) ASSERT_EQ(g[i], o[i]) << "row range: element " << i << " changed";
        for (int64_t i = 50 * 40; i < 70 * 40; ++i) ASSERT_EQ(g[i], o[i]) << "row range: element " << i << " changed";
        EXPECT_TRUE(close(down(yd2).slice0(10, 50).clone(), want.slice0(10, 50).clone(),
                          od == DType::F32 && dt == DType::BF16 ? 1e-4 : tol(od)));
      }
    }
  Tensor y32 = up(randn({4, 8}, 1), DType::F32);
  EXPECT_THROW(cu::linear_add_(y32, up(randn({4, 8}, 2), DType::F32), up(randn({9, 8}, 3), DType::F32)),
               InvalidArgument);
}

TEST_F(CudaOps, LinearBroadcastAddMatchesCpu) {
  // One strided-batch GEMM with C's batch stride 0 (cuBLASLt's own C layout), against the CPU op;
  // B = 1 and a decoder-like shape (many rows per product, N = 128).
  uint32_t seed = 950;
  struct Case { int64_t B, T, K, N; };
  for (DType dt : kDtypes)
    for (const Case& k : {Case{5, 37, 48, 40}, Case{1, 16, 32, 24}, Case{8, 4096, 256, 128}}) {
      Tensor x = randn({k.B, k.T, k.K}, ++seed), w = randn({k.N, k.K}, ++seed, 1.f / std::sqrt(float(k.K)));
      Tensor c = randn({k.T, k.N}, ++seed);
      Tensor want = ops::linear_broadcast_add(seen(x, dt), seen(w, dt), seen(c, dt));
      Tensor got = cu::linear_broadcast_add(up(x, dt), up(w, dt), up(c, dt));
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_TRUE(close(down(got), want, tol(dt))) << dtype_name(dt) << " B=" << k.B << " T=" << k.T;
    }
  EXPECT_THROW(cu::linear_broadcast_add(up(randn({2, 4, 8}, 1), DType::F32), up(randn({6, 8}, 2), DType::F32),
                                        up(randn({5, 6}, 3), DType::F32)),
               InvalidArgument);
}

TEST_F(CudaOps, LinearLargeAndRepeatable) {
  // A SAM-sized MLP layer (tensor-core path), run twice: cached plans give identical bytes.
  for (DType dt : kDtypes) {
    Tensor x = randn({1024, 768}, 7), w = randn({3072, 768}, 8, 0.036f), b = randn({3072}, 9, 0.1f);
    Tensor want = ops::linear(seen(x, dt), seen(w, dt), nullptr, Activation::GELU, nullptr);
    Tensor bs = seen(b, dt);
    Tensor want_b = ops::linear(seen(x, dt), seen(w, dt), &bs, Activation::GELU, nullptr);
    Tensor xd = up(x, dt), wd = up(w, dt), bd = up(b, dt);
    Tensor g1 = cu::linear(xd, wd, &bd, Activation::GELU);
    Tensor g2 = cu::linear(xd, wd, &bd, Activation::GELU);
    EXPECT_TRUE(close(down(g1), want_b, tol(dt))) << dtype_name(dt);
    EXPECT_TRUE(identical(g2.to(Device::CPU), g1.to(Device::CPU))) << dtype_name(dt) << " repeat";
    EXPECT_TRUE(close(down(cu::linear(xd, wd, nullptr, Activation::GELU)), want, tol(dt))) << dtype_name(dt);
  }
}

TEST_F(CudaOps, LinearAutotunedInPlace) {
  // Large enough (2.1 GFLOP) for the GEMM autotuner to time its candidates on the first call. The
  // residual is added in place (D = x w^T + D), so the trials must not touch the real D: the
  // result has to be the CPU's, with the residual counted once.
  uint32_t seed = 980;
  for (DType dt : kDtypes)
    for (bool to_f32 : {false, true}) {
      if (to_f32 && dt != DType::BF16) continue;
      const DType od = to_f32 ? DType::F32 : dt;
      Tensor x = randn({2048, 512}, ++seed), w = randn({1024, 512}, ++seed, 0.044f), b = randn({1024}, ++seed, 0.5f);
      Tensor y = randn({2048, 1024}, ++seed);
      Tensor xs = seen(x, dt), ws = seen(w, dt), ys = seen(y, od), bs = seen(b, dt);
      Tensor want = ops::linear(xs, ws, &bs, Activation::None, &ys);
      Tensor yd = up(y, od), bd = up(b, dt);
      cu::linear_add_(yd, up(x, dt), up(w, dt), &bd);
      EXPECT_TRUE(close(down(yd), want, od == DType::F32 && dt == DType::BF16 ? 1e-4 : tol(od)))
          << dtype_name(dt) << " -> " << dtype_name(od);
    }
#ifdef VITRT_HAVE_CUDA
  std::printf("[gemm plans autotuned so far: %lld]\n", static_cast<long long>(cuda::gemm_autotuned_plans()));
#endif
}

#ifdef VITRT_HAVE_CUDA
// The CUTLASS bias (+ GELU, + residual) GEMMs (gemm_cutlass.h; VITRT_GEMM_CUTLASS puts them behind
// cu::linear) against the CPU's linear (with the exact GELU), on the bf16 values the GPU sees, both schedules:
// the MLP shapes of vit_b and vit_h, M not a multiple of the 128-row tile, small N and K; and the
// products they must decline.
TEST_F(CudaOps, GemmCutlassBias) {
  if (!cuda::cutlass_gemm_built() || !cuda::device_is_sm90()) GTEST_SKIP() << "no CUTLASS build or no sm_90 device";
  Tensor ws = Tensor::empty({8 << 20}, DType::F32, Device::CUDA);  // 32 MiB, as gemm()'s workspace
  const size_t ws_bytes = size_t{32} << 20;
  struct Shape3 {
    int64_t M, N, K;
  };
  uint32_t seed = 1200;
  const cuda::CutlassConfig configs[] = {{cuda::CutlassSchedule::Cooperative, 1}, {cuda::CutlassSchedule::Pingpong, 1},
                                         {cuda::CutlassSchedule::Cooperative, 2}, {cuda::CutlassSchedule::Pingpong, 2}};
  for (const bool gelu : {true, false})
  for (const cuda::CutlassConfig& config : configs)
  for (const Shape3 sh : {Shape3{1000, 3072, 768}, Shape3{131, 5120, 1280}, Shape3{64, 256, 64}, Shape3{4099, 1024, 512}}) {
    Tensor x = randn({sh.M, sh.K}, ++seed), w = randn({sh.N, sh.K}, ++seed, 1.f / std::sqrt(float(sh.K)));
    Tensor b = randn({sh.N}, ++seed, 0.5f);
    Tensor bs = seen(b, DType::BF16);
    Tensor want = ops::linear(seen(x, DType::BF16), seen(w, DType::BF16), &bs, gelu ? Activation::GELU : Activation::None,
                              nullptr);
    Tensor xd = up(x, DType::BF16), wd = up(w, DType::BF16), bd = up(b, DType::BF16);
    Tensor yd = Tensor::empty({sh.M, sh.N}, DType::BF16, Device::CUDA);
    const std::string name = cuda::to_string(config) +
                             (gelu ? " + gelu " : " ") + std::to_string(sh.M) + "x" + std::to_string(sh.N) + "x" +
                             std::to_string(sh.K);
    ASSERT_TRUE(cuda::cutlass_gemm_bias_bf16(xd.raw(), wd.raw(), bd.raw(), yd.raw(), sh.M, sh.N, sh.K, gelu, ws.raw(),
                                             ws_bytes, cuda::current_stream(), config))
        << name;
    cuda::synchronize();
    EXPECT_TRUE(close(down(yd), want, kTolBF16)) << name;
  }
  // Bias + residual into fp32 (the encoder's proj / lin2), in place (C = D) and with a separate C; a
  // cluster of 2 declines (not instantiated).
  for (const cuda::CutlassSchedule schedule : {cuda::CutlassSchedule::Cooperative, cuda::CutlassSchedule::Pingpong})
    for (const bool in_place : {true, false}) {
      const Shape3 sh{1000, 768, 3072};
      Tensor x = randn({sh.M, sh.K}, ++seed), w = randn({sh.N, sh.K}, ++seed, 1.f / std::sqrt(float(sh.K)));
      Tensor b = randn({sh.N}, ++seed, 0.5f), y = randn({sh.M, sh.N}, ++seed, 2.f);
      Tensor want = ops::linear(seen(x, DType::BF16), seen(w, DType::BF16), &b, Activation::None, &y);
      Tensor xd = up(x, DType::BF16), wd = up(w, DType::BF16), bd = up(b, DType::F32), cd = up(y, DType::F32);
      Tensor dd = in_place ? cd : Tensor::empty({sh.M, sh.N}, DType::F32, Device::CUDA);
      ASSERT_TRUE(cuda::cutlass_gemm_bias_residual_f32(xd.raw(), wd.raw(), bd.raw(), cd.raw(), dd.raw(), sh.M, sh.N, sh.K,
                                                       ws.raw(), ws_bytes, cuda::current_stream(), {schedule, 1}));
      cuda::synchronize();
      EXPECT_TRUE(close(down(dd), want, 1e-4)) << (in_place ? "in place" : "separate C");
    }
  {
    Tensor x = up(randn({64, 64}, 5), DType::BF16), w = up(randn({64, 64}, 6), DType::BF16);
    Tensor b = up(randn({64}, 4), DType::F32), c = up(randn({64, 64}, 3), DType::F32);
    EXPECT_FALSE(cuda::cutlass_gemm_bias_residual_f32(x.raw(), w.raw(), b.raw(), c.raw(), c.raw(), 64, 64, 64, ws.raw(),
                                                      ws_bytes, cuda::current_stream(),
                                                      {cuda::CutlassSchedule::Pingpong, 2}));
  }
  // Declined, nothing enqueued: K not a multiple of 8, a pointer off 16 bytes.
  Tensor xd = up(randn({64, 24}, 7), DType::BF16), wd = up(randn({64, 24}, 8), DType::BF16);
  Tensor bd = up(randn({64}, 9), DType::BF16), yd = Tensor::empty({64, 64}, DType::BF16, Device::CUDA);
  EXPECT_FALSE(cuda::cutlass_gemm_bias_bf16(xd.raw(), wd.raw(), bd.raw(), yd.raw(), 64, 64, 12, true, ws.raw(), ws_bytes,
                                            cuda::current_stream()));
  EXPECT_FALSE(cuda::cutlass_gemm_bias_bf16(static_cast<char*>(xd.raw()) + 2, wd.raw(), bd.raw(), yd.raw(), 63, 64, 16,
                                            false, ws.raw(), ws_bytes, cuda::current_stream()));
}
#endif

#ifdef VITRT_HAVE_CUDA
// VITRT_GEMM_CUTLASS's values (no GPU needed).
TEST(CutlassConfig, ParseAndPrint) {
  for (const char* name : {"cooperative", "pingpong", "cooperative-c2", "pingpong-c2"}) {
    cuda::CutlassConfig c;
    ASSERT_TRUE(cuda::parse_cutlass_config(name, &c)) << name;
    EXPECT_EQ(cuda::to_string(c), name);
  }
  cuda::CutlassConfig c{cuda::CutlassSchedule::Pingpong, 2};
  ASSERT_TRUE(cuda::parse_cutlass_config("1", &c));
  EXPECT_EQ(c.schedule, cuda::CutlassSchedule::Cooperative);
  EXPECT_EQ(c.cluster_m, 1);
  for (const char* bad : {"", "0", "pingpong-c3", "-c2", "ping", "cooperative-c2-c2", "1-c2"})
    EXPECT_FALSE(cuda::parse_cutlass_config(bad, &c)) << bad;
}
#endif

TEST_F(CudaOps, LinearMisalignedViews) {
  // Row 1 onwards of [38, 53]: pointers aligned to 4 (F32) / 2 (BF16) bytes only.
  for (DType dt : kDtypes) {
    Tensor xf = randn({38, 53}, 11), bigw = randn({30, 53}, 14, 0.14f);
    Tensor want = ops::linear(seen(xf, dt).slice0(1, 38).clone(), seen(bigw, dt).slice0(1, 30).clone(), nullptr,
                              Activation::ReLU, nullptr);
    Tensor xd = up(xf, dt).slice0(1, 38), wd = up(bigw, dt).slice0(1, 30);
    EXPECT_TRUE(close(down(cu::linear(xd, wd, nullptr, Activation::ReLU)), want, tol(dt))) << dtype_name(dt);
  }
}

TEST_F(CudaOps, Matmul) {
  struct Case {
    Shape a, b;
    bool tb;
  };
  const Case cases[] = {
      {{3, 17, 45}, {3, 45, 23}, false}, {{3, 17, 45}, {3, 23, 45}, true}, {{3, 17, 45}, {45, 23}, false},
      {{3, 17, 45}, {23, 45}, true},     {{17, 45}, {45, 23}, false},      {{4, 64, 64}, {4, 64, 64}, true},
      {{2, 1, 7}, {2, 7, 1}, false},
  };
  uint32_t seed = 300;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor a = randn(c.a, ++seed), b = randn(c.b, ++seed);
      Tensor want = ops::matmul(seen(a, dt), seen(b, dt), c.tb);
      Tensor got = cu::matmul(up(a, dt), up(b, dt), c.tb);
      EXPECT_TRUE(close(down(got), want, tol(dt)))
          << dtype_name(dt) << " " << shape_str(c.a) << " x " << shape_str(c.b) << (c.tb ? "^T" : "");
    }
}

#ifdef VITRT_HAVE_CUDA
// gemm() and the fallback gemm_simple() directly: strided batch, padded leading dimensions,
// alpha, C, bias, ReLU, both B layouts; reference in double on the host.
TEST_F(CudaOps, GemmArgsAndFallback) {
  const int64_t M = 19, N = 21, K = 35, lda = 40, ldd = 24;
  for (DType dt : kDtypes)
    for (bool tb : {false, true})
      for (bool batched : {false, true})  // batched: 3 products, no bias; else 1 product with bias
        for (bool with_c : {false, true})
          for (bool relu : {false, true})
            for (bool simple : {false, true}) {
              const int64_t batch = batched ? 3 : 1;
              const bool use_bias = !batched;
              const int64_t ldb = tb ? 37 : 22;  // 37 bf16 = 74-byte rows: 2-byte alignment only
              const int64_t sa = M * lda, sb = (tb ? N : K) * ldb, sd = M * ldd;
              Tensor a = seen(randn({batch * sa}, 500 + tb), dt), b = seen(randn({batch * sb}, 510 + tb, 0.2f), dt);
              Tensor c = seen(randn({batch * sd}, 520), dt), bias = seen(randn({N}, 530), dt);
              const float alpha = 0.75f;
              // Reference in double; D's padding columns keep their initial values.
              Tensor dinit = seen(randn({batch * sd}, 540), dt);
              const GemmLayout l{batch, M, N, K, lda, ldb, ldd, sa, sb, sd, tb};
              const Tensor want = reference_gemm(a, b, with_c ? &c : nullptr, use_bias ? &bias : nullptr, relu, alpha,
                                                 dinit, l);
              Tensor ad = up(a, dt), bd = up(b, dt), cd = up(c, dt), biasd = up(bias, dt), dd = up(dinit, dt);
              run_device_gemm(l, dt, dt, ad, bd, with_c ? &cd : nullptr, use_bias ? &biasd : nullptr, relu, alpha, dd,
                              simple);
              EXPECT_TRUE(close(down(dd), want, tol(dt)))
                  << (simple ? "gemm_simple " : "gemm ") << dtype_name(dt) << " trans_b=" << tb << " batch=" << batch
                  << " C=" << with_c << " bias=" << use_bias << " relu=" << relu;
            }
}
#endif

TEST_F(CudaOps, LayerNorm) {
  struct Case {
    Shape x;
    float eps, offset;
  };
  // C = 131, 1 and 1664: the generic kernel; bf16 multiples of 256 (768, 1536: 8 per lane), multiples
  // of 128 (4 per lane) and of 64 (2 per lane) up
  // to 1536: the row held in registers; 32, 64 and 128: 4-16 lanes per row, several rows per warp,
  // with row counts that leave a warp's last rows past the end; 384 / 640 / 768 (5 rows, 3 rows): two
  // rows per warp, 16 lanes each (VITRT_LAYER_NORM_HALF_WARP), an odd row count leaving the last half
  // warp without a row; 74 rows of 768: a block's last warps past the end.
  const Case cases[] = {{{5, 7, 131}, 1e-6f, 3.f}, {{64, 768}, 1e-6f, 0.f}, {{3, 256}, 1e-5f, -2.f},
                        {{9, 1}, 1e-5f, 1.f},      {{7, 384}, 1e-6f, 5.f},  {{2, 1536}, 1e-6f, -1.f},
                        {{3, 1664}, 1e-6f, 0.5f},  {{33, 64}, 1e-6f, 2.f},  {{4, 192}, 1e-6f, -3.f},
                        {{67, 32}, 1e-6f, 1.f},    {{2, 3, 128}, 1e-6f, -1.f}, {{301, 64}, 1e-6f, 0.f},
                        {{5, 768}, 1e-6f, 4.f},    {{3, 640}, 1e-6f, -2.f}, {{37, 2, 768}, 1e-6f, -1.f}};
  uint32_t seed = 600;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      const int64_t C = c.x.back();
      Tensor x = randn(c.x, ++seed, 2.f, c.offset), w = randn({C}, ++seed, 0.5f, 1.f), b = randn({C}, ++seed, 0.3f);
      Tensor want = ops::layer_norm(seen(x, dt), seen(w, dt), seen(b, dt), c.eps);
      Tensor got = cu::layer_norm(up(x, dt), up(w, dt), up(b, dt), c.eps);
      EXPECT_TRUE(close(down(got), want, tol(dt))) << dtype_name(dt) << " " << shape_str(c.x) << " eps " << c.eps;
      // LayerNorm + GELU in one pass = the CPU's LayerNorm, then GELU.
      Tensor want_gelu = ops::layer_norm(seen(x, dt), seen(w, dt), seen(b, dt), c.eps, std::nullopt, ops::Activation::GELU);
      Tensor plain_gelu = want.clone();
      ops::gelu_(plain_gelu);
      ASSERT_TRUE(identical(want_gelu, plain_gelu));
      Tensor got_gelu = cu::layer_norm(up(x, dt), up(w, dt), up(b, dt), c.eps, std::nullopt, ops::Activation::GELU);
      EXPECT_TRUE(close(down(got_gelu), want_gelu, tol(dt))) << dtype_name(dt) << " +gelu " << shape_str(c.x);
    }
}

TEST_F(CudaOps, AddBroadcast) {
  // [4, 5, 6]: the scalar kernel where y's size is not a multiple of 16 bytes; [3, 4, 256]: 16-byte
  // vectors (the decoder's shapes), broadcast or not.
  const std::pair<Shape, Shape> xys[] = {{{4, 5, 6}, {4, 5, 6}}, {{4, 5, 6}, {5, 6}}, {{4, 5, 6}, {6}},
                                         {{4, 5, 6}, {120}},     {{4, 5, 6}, {2, 60}}, {{3, 4, 256}, {4, 256}},
                                         {{3, 4, 256}, {256}},   {{3, 4, 256}, {3, 4, 256}}};
  uint32_t seed = 700;
  for (DType dt : kDtypes)
    for (const auto& [xs, y_shape] : xys) {
      Tensor x = randn(xs, ++seed), y = randn(y_shape, ++seed);
      Tensor want = ops::add(seen(x, dt), seen(y, dt));
      Tensor xd = up(x, dt), yd = up(y, dt);
      EXPECT_TRUE(close(down(cu::add(xd, yd)), want, tol(dt))) << dtype_name(dt) << " + " << shape_str(y_shape);
      cu::add_(xd, yd);
      EXPECT_TRUE(close(down(xd), want, tol(dt))) << dtype_name(dt) << " add_ " << shape_str(y_shape);
    }
}

TEST_F(CudaOps, ScaleGeluRelu) {
  uint32_t seed = 800;
  for (DType dt : kDtypes)
    for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{70000}}) {
      Tensor x = randn({n}, ++seed, 3.f);
      {
        Tensor want = seen(x, dt).clone();
        ops::scale_(want, -0.37f);
        Tensor g = up(x, dt);
        cu::scale_(g, -0.37f);
        EXPECT_TRUE(close(down(g), want, tol(dt))) << dtype_name(dt) << " scale n=" << n;
      }
      {
        Tensor want = seen(x, dt).clone();
        ops::gelu_(want);
        Tensor g = up(x, dt);
        cu::gelu_(g);
        EXPECT_TRUE(close(down(g), want, tol(dt))) << dtype_name(dt) << " gelu n=" << n;
      }
      {
        Tensor want = seen(x, dt).clone();
        ops::relu_(want);
        Tensor g = up(x, dt);
        cu::relu_(g);
        EXPECT_TRUE(close(down(g), want, tol(dt))) << dtype_name(dt) << " relu n=" << n;
      }
    }
}

TEST_F(CudaOps, Softmax) {
  const Shape shapes[] = {{7, 33}, {3, 1500}, {5, 1}, {2, 3, 4097}, {1000, 64}};
  uint32_t seed = 900;
  for (DType dt : kDtypes)
    for (const Shape& s : shapes) {
      Tensor x = randn(s, ++seed, 4.f, 1.f);
      Tensor want = seen(x, dt).clone();
      ops::softmax_lastdim_(want);
      Tensor g = up(x, dt);
      cu::softmax_lastdim_(g);
      EXPECT_TRUE(close(down(g), want, tol(dt))) << dtype_name(dt) << " " << shape_str(s);
    }
}

TEST_F(CudaOps, PermuteExact) {
  struct Case {
    Shape s;
    std::vector<int> perm;
  };
  const Case cases[] = {{{2, 3, 4, 5}, {0, 2, 3, 1}}, {{2, 3, 4, 5}, {3, 2, 1, 0}}, {{2, 3, 1, 4, 5, 3}, {5, 0, 4, 1, 3, 2}},
                        {{7}, {0}},                   {{6, 5}, {1, 0}},             {{1, 64, 64, 24}, {0, 3, 1, 2}},
                        // batches of transposes (the tiled kernel): tiles cut at both edges, one batch
                        {{3, 40, 70, 33}, {0, 3, 1, 2}}, {{100, 129}, {1, 0}}, {{5, 1, 37, 1, 64}, {0, 4, 1, 3, 2}}};
  uint32_t seed = 1000;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor x = randn(c.s, ++seed);
      Tensor want = ops::permute(seen(x, dt), c.perm);
      EXPECT_TRUE(identical(down(cu::permute(up(x, dt), c.perm)), want)) << dtype_name(dt) << " " << shape_str(c.s);
    }
  // Any dtype moves: uint8 through the same kernel.
  Tensor u = Tensor::empty({3, 4, 5}, DType::U8);
  for (int64_t i = 0; i < u.numel(); ++i) u.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 + 1);
  Tensor pu = cu::permute(u.to(Device::CUDA), {2, 0, 1}).to(Device::CPU);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 5; ++c)
        ASSERT_EQ(pu.data<uint8_t>()[(c * 3 + a) * 4 + b], u.data<uint8_t>()[(a * 4 + b) * 5 + c]) << a << b << c;
}

TEST_F(CudaOps, CatExact) {
  struct Case {
    std::vector<Shape> xs;
    int dim;
  };
  // Copied in 16-byte units (the ViT's class token + patches: rows of 768), 8- and 4-byte units
  // ([2, *, 4] in bf16 / f32 mixes) and element by element (odd widths).
  const Case cases[] = {{{{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1},
                        {{{1, 3, 4}, {2, 3, 4}}, 0},
                        {{{2, 3, 1}, {2, 3, 7}}, -1},
                        {{{5, 0, 2}, {5, 3, 2}}, 1},
                        {{{3, 1, 768}, {3, 196, 768}}, 1},
                        {{{3, 2, 6}, {3, 2, 10}}, -1}};
  uint32_t seed = 1100;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      std::vector<Tensor> hs, ds;
      for (const Shape& s : c.xs) {
        Tensor t = randn(s, ++seed);
        hs.push_back(seen(t, dt));
        ds.push_back(up(t, dt));
      }
      EXPECT_TRUE(identical(down(cu::cat(ds, c.dim)), ops::cat(hs, c.dim))) << dtype_name(dt) << " dim " << c.dim;
    }
}

TEST_F(CudaOps, WindowsExact) {
  struct Case {
    Shape s;
    int ws;
  };
  const Case cases[] = {{{2, 13, 11, 5}, 4}, {{1, 14, 14, 8}, 7}, {{1, 5, 5, 3}, 8}, {{1, 64, 64, 16}, 14}};
  uint32_t seed = 1200;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor x = randn(c.s, ++seed);
      Tensor want = ops::window_partition(seen(x, dt), c.ws);
      Tensor got = cu::window_partition(up(x, dt), c.ws);
      EXPECT_TRUE(identical(down(got), want)) << dtype_name(dt) << " partition " << shape_str(c.s) << " ws " << c.ws;
      // Unpartition of arbitrary windows (padding content included), and the round trip.
      Tensor win = randn(want.shape(), ++seed);
      const int64_t H = c.s[1], W = c.s[2];
      EXPECT_TRUE(identical(down(cu::window_unpartition(up(win, dt), c.ws, H, W)),
                            ops::window_unpartition(seen(win, dt), c.ws, H, W)))
          << dtype_name(dt) << " unpartition " << shape_str(c.s);
      EXPECT_TRUE(identical(down(cu::window_unpartition(got, c.ws, H, W)), seen(x, dt))) << "round trip";
    }
}

TEST_F(CudaOps, Conv2d) {
  struct Case {
    Shape x, w;
    int stride, pad;
    bool bias;
  };
  const Case cases[] = {
      {{2, 11, 13, 5}, {7, 5, 3, 3}, 1, 1, true},    // odd everything
      {{2, 11, 13, 5}, {7, 5, 3, 3}, 2, 1, false},   // strided
      {{1, 32, 48, 3}, {16, 3, 8, 8}, 8, 0, true},   // patch embedding (16-byte kernel-row runs)
      {{2, 64, 48, 3}, {24, 3, 16, 16}, 16, 0, true}, // SAM / ViT-B/16's 16 x 16 patches
      {{1, 24, 36, 3}, {8, 3, 4, 4}, 4, 0, false},   // runs of 24 bytes: per-tap steps
      {{2, 9, 7, 12}, {10, 12, 1, 1}, 1, 0, true},   // 1x1: plain GEMM
      {{1, 6, 6, 4}, {3, 4, 2, 3}, 1, 0, false},     // non-square kernel
      {{1, 32, 32, 64}, {64, 64, 3, 3}, 1, 1, true}, // neck-like 3x3
  };
  uint32_t seed = 1300;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      const float ws = 1.f / std::sqrt(float(c.w[1] * c.w[2] * c.w[3]));
      Tensor x = randn(c.x, ++seed), w = randn(c.w, ++seed, ws), b = randn({c.w[0]}, ++seed, 0.2f);
      Tensor bs = seen(b, dt), bd = up(b, dt);
      Tensor want = ops::conv2d_nhwc(seen(x, dt), seen(w, dt), c.bias ? &bs : nullptr, c.stride, c.pad);
      Tensor got = cu::conv2d_nhwc(up(x, dt), up(w, dt), c.bias ? &bd : nullptr, c.stride, c.pad);
      EXPECT_TRUE(close(down(got), want, tol(dt)))
          << dtype_name(dt) << " x " << shape_str(c.x) << " w " << shape_str(c.w) << " stride " << c.stride << " pad "
          << c.pad << " bias " << c.bias;
    }
}

TEST_F(CudaOps, ConvTranspose2x2) {
  struct Case {
    Shape x;
    int64_t cout;
    bool bias, gelu;
  };
  // The GELU is fused into the GPU's scatter (the mask decoder's second upscaling layer). bf16 with
  // Cin = 64 and Cout 32 / 64 / 128: the tensor-core kernel (SAM's 64 -> 32), with pixel counts
  // that leave its last 64-pixel tile partly empty, rows that end mid-tile, and enough tiles for
  // each CTA to walk several (the double-buffered loop).
  const Case cases[] = {{{2, 5, 7, 6}, 9, true, false},    {{2, 5, 7, 6}, 9, false, false},
                        {{1, 16, 16, 64}, 32, true, false}, {{3, 6, 5, 16}, 8, true, true},
                        {{2, 16, 16, 64}, 32, true, true},  {{3, 5, 7, 64}, 32, true, true},
                        {{2, 9, 6, 64}, 64, true, false},   {{1, 4, 5, 64}, 128, false, false},
                        {{1, 3, 70, 64}, 32, true, true},   {{2, 9, 6, 256}, 64, true, false},
                        {{9, 128, 128, 64}, 32, true, true}};
  uint32_t seed = 1400;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      const int64_t cin = c.x[3];
      const auto act = c.gelu ? ops::Activation::GELU : ops::Activation::None;
      Tensor x = randn(c.x, ++seed), w = randn({cin, c.cout, 2, 2}, ++seed, 0.3f), b = randn({c.cout}, ++seed);
      Tensor bs = seen(b, dt), bd = up(b, dt);
      Tensor want = ops::conv_transpose2x2_nhwc(seen(x, dt), seen(w, dt), c.bias ? &bs : nullptr, act);
      Tensor got = cu::conv_transpose2x2_nhwc(up(x, dt), up(w, dt), c.bias ? &bd : nullptr, act);
      EXPECT_TRUE(close(down(got), want, tol(dt)))
          << dtype_name(dt) << " x " << shape_str(c.x) << " bias " << c.bias << " gelu " << c.gelu;
    }
}

TEST_F(CudaOps, ConvTranspose2x2DotMatchesUpscaleThenMatmul) {
  // SAM's second upscaling fused with masks = hyper @ upscaled (bf16, Cin 64 -> Cout 32, 4 vectors
  // per image): against the CPU composition with the upscaled tensor rounded to bf16 as the unfused
  // GPU path stores it. Shapes: SAM's 128 x 128, several images (the vectors change per tile),
  // no bias / no GELU; W not a multiple of 64 and F32 take the two-operator path (same op, same answer).
  struct Case {
    Shape x;
    bool bias, gelu, fused;
  };
  const Case cases[] = {{{3, 8, 64, 64}, true, true, true},    {{2, 4, 128, 64}, false, true, true},
                        {{2, 4, 128, 64}, true, false, true},  {{5, 128, 128, 64}, true, true, true},
                        {{2, 3, 70, 64}, true, true, false}};
  uint32_t seed = 1450;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      const int64_t B = c.x[0];
      const auto act = c.gelu ? ops::Activation::GELU : ops::Activation::None;
      Tensor x = randn(c.x, ++seed), w = randn({64, 32, 2, 2}, ++seed, 0.15f), b = randn({32}, ++seed, 0.3f);
      Tensor v = randn({B, 4, 32}, ++seed, 0.2f);
      Tensor bs = seen(b, dt), bd = up(b, dt);
      const Tensor upscaled = seen(ops::conv_transpose2x2_nhwc(seen(x, dt), seen(w, dt), c.bias ? &bs : nullptr, act), dt);
      const Tensor want = ops::matmul(seen(v, dt), upscaled.reshape({B, 4 * c.x[1] * c.x[2], 32}), true);
      const Tensor xd = up(x, dt), wd = up(w, dt), vd = up(v, dt);
      Tensor got = ops::conv_transpose2x2_dot(xd, wd, c.bias ? &bd : nullptr, act, vd);
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_TRUE(close(down(got), want, tol(dt))) << dtype_name(dt) << " x " << shape_str(c.x) << " bias " << c.bias
                                                    << " gelu " << c.gelu;
      EXPECT_EQ(cu::conv_transpose2x2_dot(xd, wd, c.bias ? &bd : nullptr, act, vd).defined(),
                c.fused && dt == DType::BF16)
          << "which path: " << shape_str(c.x) << " " << dtype_name(dt);
    }
}

TEST_F(CudaOps, InterpolateLinearRows) {
  struct Case {
    Shape x;
    int64_t len;
  };
  const Case cases[] = {{{27, 16}, 13}, {{27, 16}, 61}, {{27, 16}, 27}, {{1, 5}, 7}, {{127, 64}, 27}};
  uint32_t seed = 1500;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor x = randn(c.x, ++seed);
      Tensor want = ops::interpolate_linear_rows(seen(x, dt), c.len);
      Tensor got = down(cu::interpolate_linear_rows(up(x, dt), c.len));
      if (dt == DType::F32)
        EXPECT_TRUE(identical(got, want)) << "float32 " << shape_str(c.x) << " -> " << c.len << " (bit-exact)";
      else
        EXPECT_TRUE(close(got, want, tol(dt))) << "bfloat16 " << shape_str(c.x) << " -> " << c.len;
    }
}

TEST_F(CudaOps, ResizeBilinear) {
  struct Case {
    Shape x;
    int64_t oh, ow;
  };
  const Case cases[] = {{{3, 17, 23}, 64, 50}, {{3, 40, 40}, 13, 9}, {{2, 2, 9, 9}, 9, 9}, {{1, 1, 1}, 4, 4},
                        {{2, 256, 256}, 1024, 1024}};
  uint32_t seed = 1600;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor x = randn(c.x, ++seed, 3.f);
      Tensor want = ops::resize_bilinear(seen(x, dt), c.oh, c.ow);
      Tensor got = down(cu::resize_bilinear(up(x, dt), c.oh, c.ow));
      if (dt == DType::F32)
        EXPECT_TRUE(identical(got, want)) << "float32 " << shape_str(c.x) << " -> " << c.oh << "x" << c.ow
                                          << " (bit-exact)";
      else
        EXPECT_TRUE(close(got, want, tol(dt))) << "bfloat16 " << shape_str(c.x) << " -> " << c.oh << "x" << c.ow;
    }
}

// ---- pre- and post-processing ----

namespace {
// A random-ish image with smooth structure plus noise (so resizing has something to round).
Image make_image(int w, int h, int channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-40, 40);
  Image im;
  im.width = w, im.height = h, im.channels = channels;
  im.pixels.resize(static_cast<size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) {
        const int base = 128 + static_cast<int>(100 * std::sin(0.05 * x + 0.3 * c) * std::cos(0.07 * y));
        im.pixels[(static_cast<size_t>(y) * w + x) * channels + c] =
            static_cast<uint8_t>(std::min(255, std::max(0, base + noise(rng))));
      }
  return im;
}

Tensor image_tensor(const Image& im) {
  Tensor t = Tensor::empty({im.height, im.width, im.channels}, DType::U8);
  std::memcpy(t.raw(), im.pixels.data(), im.pixels.size());
  return t;
}

// predictor.cpp's normalise_and_pad, on the host.
Tensor normalise_and_pad_cpu(const Image& resized, int S, const std::array<float, 3>& mean,
                             const std::array<float, 3>& stdv) {
  Tensor x = Tensor::zeros({1, S, S, 3});
  float* out = x.data<float>();
  for (int y = 0; y < resized.height; ++y) {
    const uint8_t* row = resized.row(y);
    float* o = out + static_cast<int64_t>(y) * S * 3;
    for (int i = 0; i < resized.width; ++i)
      for (int ch = 0; ch < 3; ++ch) o[i * 3 + ch] = (static_cast<float>(row[i * 3 + ch]) - mean[ch]) / stdv[ch];
  }
  return x;
}

const std::array<float, 3> kMean = {123.675f, 116.28f, 103.53f};
const std::array<float, 3> kStd = {58.395f, 57.12f, 57.375f};
}  // namespace

TEST_F(CudaOps, ResizeAntialiasByteIdentical) {
  struct Case {
    int sw, sh, dw, dh, cn;
    const char* what;
  };
  const Case cases[] = {
      {1500, 1000, 1024, 683, 3, "downscale, horizontal pass first"},
      {640, 2000, 328, 1024, 3, "downscale, vertical pass first"},
      {333, 517, 661, 1024, 3, "upscale"},
      {100, 50, 70, 50, 3, "width only"},
      {50, 100, 50, 37, 3, "height only"},
      {64, 48, 64, 48, 3, "same size (copy)"},
      {97, 61, 40, 29, 1, "gray"},
      {97, 61, 40, 29, 4, "four channels"},
      {3000, 7, 1024, 2, 3, "very wide"},
  };
  uint32_t seed = 1700;
  for (const Case& c : cases) {
    Image im = make_image(c.sw, c.sh, c.cn, ++seed);
    Tensor want = Tensor::empty({c.dh, c.dw, c.cn}, DType::U8);
    cpu::resize_bilinear_antialias_u8(im.pixels.data(), c.sw, c.sh, c.cn, want.data<uint8_t>(), c.dw, c.dh);
    Tensor got = cu::resize_antialias_u8(image_tensor(im).to(Device::CUDA), c.dh, c.dw).to(Device::CPU);
    EXPECT_TRUE(identical(got, want)) << c.what << ": " << c.sw << "x" << c.sh << "x" << c.cn << " -> " << c.dw << "x"
                                      << c.dh;
  }
}

TEST_F(CudaOps, PreprocessImageMatchesPredictor) {
  const int S = 1024;
  struct Case {
    int w, h;
  };
  const Case cases[] = {{1500, 1000}, {480, 1300}, {1024, 1024}, {77, 51}};
  uint32_t seed = 1800;
  for (const Case& c : cases) {
    Image im = make_image(c.w, c.h, 3, ++seed);
    Image resized = resize_longest_side(im, S);
    Tensor want = normalise_and_pad_cpu(resized, S, kMean, kStd);
    for (DType dt : kDtypes) {
      int ih = -1, iw = -1;
      Tensor got = cu::preprocess_image(im, S, kMean, kStd, dt, &ih, &iw);
      EXPECT_EQ(ih, resized.height);
      EXPECT_EQ(iw, resized.width);
      ASSERT_TRUE(got.is_cuda());
      EXPECT_EQ(got.dtype(), dt);
      // float32 bit-identical; bfloat16 the same fp32 values rounded once, on the host here.
      EXPECT_TRUE(identical(got.to(Device::CPU), cu::cast(want, dt)))
          << dtype_name(dt) << " " << c.w << "x" << c.h << " -> " << iw << "x" << ih;
    }
  }
}

TEST_F(CudaOps, PostprocessMasksMatchPredictor) {
  struct Case {
    Shape low;
    int64_t S, ih, iw, oh, ow;
  };
  const Case cases[] = {
      {{3, 256, 256}, 1024, 683, 1024, 1000, 1500},
      {{1, 256, 256}, 1024, 1024, 394, 1300, 500},
      {{2, 64, 64}, 256, 200, 256, 77, 99},
      {{2, 256, 256}, 1024, 1024, 1024, 1024, 1024},  // square photo: the second resize is the identity
      {{1, 256, 256}, 1024, 1024, 768, 100, 37},      // strong downscale: rows skip past the caches
  };
  uint32_t seed = 1900;
  for (DType dt : kDtypes)
    for (const Case& c : cases) {
      Tensor low = randn(c.low, ++seed, 6.f, 0.5f);
      const Tensor ls = seen(low, dt);
      // predictor.cpp's postprocess on the host.
      const int64_t K = c.low[0];
      Tensor full = ops::resize_bilinear(ls, c.S, c.S);
      Tensor crop = Tensor::empty({K, c.ih, c.iw});
      for (int64_t k = 0; k < K; ++k)
        for (int64_t y = 0; y < c.ih; ++y)
          std::memcpy(crop.data<float>() + (k * c.ih + y) * c.iw, full.data<float>() + (k * c.S + y) * c.S,
                      sizeof(float) * c.iw);
      Tensor want_logits = ops::resize_bilinear(crop, c.oh, c.ow);
      Tensor want_masks = Tensor::empty(want_logits.shape(), DType::U8);
      for (int64_t i = 0; i < want_logits.numel(); ++i)
        want_masks.data<uint8_t>()[i] = want_logits.data<float>()[i] > 0.0f;

      Tensor logits;
      Tensor masks = cu::postprocess_masks(up(low, dt), c.S, c.ih, c.iw, c.oh, c.ow, &logits);
      ASSERT_TRUE(masks.is_cuda() && logits.is_cuda());
      EXPECT_TRUE(identical(masks.to(Device::CPU), want_masks)) << dtype_name(dt) << " masks " << shape_str(c.low);
      EXPECT_TRUE(identical(logits.to(Device::CPU), want_logits)) << dtype_name(dt) << " logits " << shape_str(c.low);
      Tensor masks_only = cu::postprocess_masks(up(low, dt), c.S, c.ih, c.iw, c.oh, c.ow, nullptr);
      EXPECT_TRUE(identical(masks_only.to(Device::CPU), want_masks)) << dtype_name(dt) << " masks without logits";
    }
}

TEST_F(CudaOps, BadArgumentsThrow) {
  Tensor xh = randn({4, 8}, 1), wh = randn({3, 8}, 2);
  Tensor xd = xh.to(Device::CUDA), wd = wh.to(Device::CUDA);
  EXPECT_THROW(cu::linear(xh, wd), InvalidArgument);                       // CPU operand
  EXPECT_THROW(cu::linear(xd, cu::cast(wd, DType::BF16)), InvalidArgument);  // dtype mix
  EXPECT_THROW(cu::linear(xd, randn({3, 7}, 3).to(Device::CUDA)), InvalidArgument);  // K mismatch
  EXPECT_THROW(cu::matmul(xd, xd), InvalidArgument);
  EXPECT_THROW(cu::permute(randn({1, 1, 1, 1, 1, 1, 2}, 4).to(Device::CUDA), {0, 1, 2, 3, 4, 5, 6}), InvalidArgument);
  EXPECT_THROW(cu::cast(xd, DType::I32), InvalidArgument);
  Tensor y = randn({5}, 5).to(Device::CUDA);
  EXPECT_THROW(cu::add_(xd, y), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Mixed precision for the bf16 image encoder's float32 residual stream: bf16 activations and
// weights in, float32 out (linear / conv2d_nhwc / gemm), and LayerNorm between dtypes.
//
// Tolerance kTolMixed = 1e-4 relative Frobenius for every float32 output: the CPU reference runs
// in fp32 on the same bf16-rounded x / w (bf16 x bf16 products are exact in fp32), the float32
// residual and an fp32 (or bf16-widened) bias, so the only difference is the fp32 summation
// order (~1e-6). 1e-4 is ~10x below what a single bf16 rounding of the output would cost
// (~1e-3 rms relative), so a result that went through bf16 anywhere after the GEMM fails.
// bf16 outputs (LayerNorm f32 -> bf16) keep kTolBF16 semantics with a tighter bound, 4e-3
// (one bf16 rounding of the output, ~1.1e-3 rms relative).
namespace {
constexpr double kTolMixed = 1e-4;
constexpr double kTolMixedBf16Out = 4e-3;
}  // namespace

TEST_F(CudaOps, LinearBf16InF32Out) {
  struct Case {
    Shape x;
    int64_t N;
  };
  // Odd sizes (cuBLASLt's alignment limits, maybe the fallback) and SAM-like proj / lin2 sizes.
  const Case cases[] = {{{37, 53}, 29}, {{2, 19, 53}, 31}, {{3, 5, 8}, 16}, {{1, 1}, 1},
                        {{2, 64, 768}, 768}, {{256, 3072}, 768}};
  enum class BiasKind { None, BF16, F32 };
  uint32_t seed = 2000;
  for (const Case& c : cases)
    for (BiasKind bk : {BiasKind::None, BiasKind::BF16, BiasKind::F32})
      for (bool use_res : {false, true})
        for (Activation act : {Activation::None, Activation::GELU, Activation::ReLU}) {
          if (act != Activation::None && use_res) continue;  // the encoder uses residual with None only
          const int64_t K = c.x.back();
          Shape out_shape = c.x;
          out_shape.back() = c.N;
          Tensor x = randn(c.x, ++seed), w = randn({c.N, K}, ++seed, 1.f / std::sqrt(float(K)));
          Tensor b = randn({c.N}, ++seed, 0.5f), r = randn(out_shape, ++seed, 3.f);
          // Reference: bf16-rounded x, w (and bias when sent as bf16); residual and f32 bias as they are.
          Tensor xs = seen(x, DType::BF16), wsn = seen(w, DType::BF16);
          Tensor bs = bk == BiasKind::BF16 ? seen(b, DType::BF16) : b;
          const Tensor* bias_ref = bk == BiasKind::None ? nullptr : &bs;
          Tensor want = ops::linear(xs, wsn, bias_ref, act, use_res ? &r : nullptr);
          Tensor xd = up(x, DType::BF16), wd = up(w, DType::BF16);
          Tensor bd = up(b, bk == BiasKind::F32 ? DType::F32 : DType::BF16), rd = up(r, DType::F32);
          Tensor got =
              cu::linear(xd, wd, bk == BiasKind::None ? nullptr : &bd, act, use_res ? &rd : nullptr, DType::F32);
          ASSERT_TRUE(got.is_cuda());
          EXPECT_EQ(got.dtype(), DType::F32);
          EXPECT_TRUE(close(got.to(Device::CPU), want, kTolMixed))
              << "bf16 -> f32 x " << shape_str(c.x) << " N=" << c.N << " act=" << act_name(act)
              << " bias=" << (bk == BiasKind::None ? "none" : bk == BiasKind::BF16 ? "bf16" : "f32")
              << " residual=" << use_res;
        }
  // Through ops::linear (the dispatcher the encoder calls) as well, and repeatable (cached plan).
  Tensor x = randn({300, 768}, 2100), w = randn({768, 768}, 2101, 0.036f), b = randn({768}, 2102, 0.1f);
  Tensor r = randn({300, 768}, 2103, 4.f);
  Tensor bs = seen(b, DType::BF16);
  Tensor want = ops::linear(seen(x, DType::BF16), seen(w, DType::BF16), &bs, Activation::None, &r);
  Tensor xd = up(x, DType::BF16), wd = up(w, DType::BF16), bd = up(b, DType::BF16), rd = up(r, DType::F32);
  Tensor g1 = ops::linear(xd, wd, &bd, Activation::None, &rd, DType::F32);
  Tensor g2 = ops::linear(xd, wd, &bd, Activation::None, &rd, DType::F32);
  EXPECT_TRUE(close(g1.to(Device::CPU), want, kTolMixed));
  EXPECT_TRUE(identical(g2.to(Device::CPU), g1.to(Device::CPU))) << "repeat";
  // Explicit out_dtype equal to x's: the plain path.
  EXPECT_EQ(ops::linear(xd, wd, &bd, Activation::None, nullptr, DType::BF16).dtype(), DType::BF16);
}

TEST_F(CudaOps, LinearBf16InF32OutMisaligned) {
  // Row 1 onwards: x / w pointers aligned to 2 bytes, residual / output rows of 29 floats.
  Tensor xf = randn({38, 53}, 2200), bigw = randn({30, 53}, 2201, 0.14f), r = randn({37, 29}, 2202);
  Tensor want = ops::linear(seen(xf, DType::BF16).slice0(1, 38).clone(), seen(bigw, DType::BF16).slice0(1, 30).clone(),
                            nullptr, Activation::None, &r);
  Tensor xd = up(xf, DType::BF16).slice0(1, 38), wd = up(bigw, DType::BF16).slice0(1, 30), rd = up(r, DType::F32);
  EXPECT_TRUE(close(cu::linear(xd, wd, nullptr, Activation::None, &rd, DType::F32).to(Device::CPU), want, kTolMixed));
}

#ifdef VITRT_HAVE_CUDA
// gemm() / gemm_simple() with bf16 A/B and fp32 C/D/bias: padded leading dimensions, C, bias,
// ReLU, strided batch, both B layouts; reference in double.
TEST_F(CudaOps, GemmBf16InF32Out) {
  const int64_t M = 19, N = 21, K = 35, lda = 40, ldd = 23;
  for (bool tb : {false, true})
    for (bool batched : {false, true})
      for (bool with_c : {false, true})
        for (bool relu : {false, true})
          for (bool simple : {false, true}) {
            const int64_t batch = batched ? 3 : 1;
            const bool use_bias = !batched;
            const int64_t ldb = tb ? 37 : 22;
            const int64_t sa = M * lda, sb = (tb ? N : K) * ldb, sd = M * ldd;
            Tensor a = seen(randn({batch * sa}, 2300 + tb), DType::BF16);
            Tensor b = seen(randn({batch * sb}, 2310 + tb, 0.2f), DType::BF16);
            Tensor c = randn({batch * sd}, 2320), bias = randn({N}, 2330);  // fp32, not rounded
            const float alpha = 0.75f;
            Tensor dinit = randn({batch * sd}, 2340);
            const GemmLayout l{batch, M, N, K, lda, ldb, ldd, sa, sb, sd, tb};
            const Tensor want = reference_gemm(a, b, with_c ? &c : nullptr, use_bias ? &bias : nullptr, relu, alpha,
                                               dinit, l);
            Tensor ad = up(a, DType::BF16), bd = up(b, DType::BF16);
            Tensor cd = up(c, DType::F32), biasd = up(bias, DType::F32), dd = up(dinit, DType::F32);
            run_device_gemm(l, DType::BF16, DType::F32, ad, bd, with_c ? &cd : nullptr, use_bias ? &biasd : nullptr,
                            relu, alpha, dd, simple);
            EXPECT_TRUE(close(dd.to(Device::CPU), want, kTolMixed))
                << (simple ? "gemm_simple" : "gemm") << " bf16->f32 trans_b=" << tb << " batch=" << batch
                << " C=" << with_c << " bias=" << use_bias << " relu=" << relu;
          }
  // Unsupported combination: f32 inputs with a bf16 output.
  Tensor z = Tensor::zeros({4}).to(Device::CUDA);
  cuda::GemmArgs bad;
  bad.dtype = DType::F32;
  bad.d_dtype = DType::BF16;
  bad.M = bad.N = bad.K = 1;
  bad.a = bad.b = z.raw();
  bad.d = z.raw();
  EXPECT_THROW(cuda::gemm(bad), InvalidArgument);
  EXPECT_THROW(cuda::gemm_simple(bad), InvalidArgument);
}
#endif

TEST_F(CudaOps, Conv2dBf16InF32Out) {
  // The encoder's patch embedding in the bf16 model: bf16 image and weight, bf16 bias, fp32 out.
  struct Case {
    Shape x, w;
    int stride, pad;
  };
  const Case cases[] = {{{1, 32, 48, 3}, {16, 3, 8, 8}, 8, 0}, {{2, 9, 7, 12}, {10, 12, 1, 1}, 1, 0},
                        {{2, 11, 13, 5}, {7, 5, 3, 3}, 1, 1}};
  uint32_t seed = 2400;
  for (const Case& c : cases)
    for (bool use_bias : {false, true}) {
      const float ws = 1.f / std::sqrt(float(c.w[1] * c.w[2] * c.w[3]));
      Tensor x = randn(c.x, ++seed), w = randn(c.w, ++seed, ws), b = randn({c.w[0]}, ++seed, 0.2f);
      Tensor bs = seen(b, DType::BF16), bd = up(b, DType::BF16);
      Tensor want = ops::conv2d_nhwc(seen(x, DType::BF16), seen(w, DType::BF16), use_bias ? &bs : nullptr, c.stride,
                                     c.pad);
      Tensor got = cu::conv2d_nhwc(up(x, DType::BF16), up(w, DType::BF16), use_bias ? &bd : nullptr, c.stride, c.pad,
                                   DType::F32);
      EXPECT_EQ(got.dtype(), DType::F32);
      EXPECT_TRUE(close(got.to(Device::CPU), want, kTolMixed))
          << "bf16 -> f32 x " << shape_str(c.x) << " w " << shape_str(c.w) << " bias " << use_bias;
    }
}

TEST_F(CudaOps, LayerNormMixedDtypes) {
  // x, weight/bias and output dtypes independently; the reference normalises what the GPU sees
  // (bf16-rounded where sent as bf16) in fp32.
  struct Case {
    Shape x;
    float eps, offset;
  };
  const Case cases[] = {
      {{5, 7, 131}, 1e-6f, 3.f}, {{64, 768}, 1e-6f, 0.f}, {{4, 1280}, 1e-6f, 20.f}, {{9, 1}, 1e-5f, 1.f},
      {{9, 64}, 1e-6f, 2.f},     {{6, 32}, 1e-6f, -1.f}};
  uint32_t seed = 2500;
  for (DType xdt : kDtypes)
    for (DType wdt : kDtypes)
      for (DType odt : kDtypes)
        for (const Case& c : cases) {
          const int64_t C = c.x.back();
          Tensor x = randn(c.x, ++seed, 2.f, c.offset), w = randn({C}, ++seed, 0.5f, 1.f), b = randn({C}, ++seed, 0.3f);
          Tensor want = ops::layer_norm(seen(x, xdt), seen(w, wdt), seen(b, wdt), c.eps);
          Tensor got = cu::layer_norm(up(x, xdt), up(w, wdt), up(b, wdt), c.eps, odt);
          ASSERT_EQ(got.dtype(), odt);
          const double t = odt == DType::BF16 ? kTolMixedBf16Out : kTolF32;
          EXPECT_TRUE(close(down(got), want, t)) << "x " << dtype_name(xdt) << " w " << dtype_name(wdt) << " out "
                                                 << dtype_name(odt) << " " << shape_str(c.x);
          if (xdt == DType::F32 && wdt == DType::BF16 && odt == DType::BF16) {
            // The encoder's case through the dispatcher, and bit-identical to rounding the f32 result.
            Tensor via_ops = ops::layer_norm(up(x, xdt), up(w, wdt), up(b, wdt), c.eps, DType::BF16);
            EXPECT_TRUE(identical(via_ops.to(Device::CPU), got.to(Device::CPU)));
            Tensor f32_out = cu::layer_norm(up(x, xdt), up(w, wdt), up(b, wdt), c.eps, DType::F32);
            EXPECT_TRUE(identical(cu::cast(f32_out, DType::BF16).to(Device::CPU), got.to(Device::CPU)))
                << "f32 -> bf16 LayerNorm differs from the f32 LayerNorm rounded once " << shape_str(c.x);
          }
        }
}

TEST_F(CudaOps, MixedDtypeBadArgumentsThrow) {
  Tensor xf = randn({4, 8}, 1).to(Device::CUDA), wf = randn({3, 8}, 2).to(Device::CUDA);
  Tensor xb = cu::cast(xf, DType::BF16), wb = cu::cast(wf, DType::BF16);
  Tensor rf = randn({4, 3}, 3).to(Device::CUDA), rb = cu::cast(rf, DType::BF16);
  Tensor bf = randn({3}, 4).to(Device::CUDA), bb = cu::cast(bf, DType::BF16);
  // f32 in, bf16 out: not supported.
  EXPECT_THROW(cu::linear(xf, wf, nullptr, Activation::None, nullptr, DType::BF16), InvalidArgument);
  // bf16 in, f32 out: residual must be f32, weight bf16.
  EXPECT_THROW(cu::linear(xb, wb, nullptr, Activation::None, &rb, DType::F32), InvalidArgument);
  EXPECT_THROW(cu::linear(xb, wf, nullptr, Activation::None, &rf, DType::F32), InvalidArgument);
  EXPECT_NO_THROW(cu::linear(xb, wb, &bb, Activation::None, &rf, DType::F32));
  EXPECT_NO_THROW(cu::linear(xb, wb, &bf, Activation::None, &rf, DType::F32));
  // A bf16 x with a bf16 output takes no f32 bias / residual.
  EXPECT_THROW(cu::linear(xb, wb, &bf), InvalidArgument);
  EXPECT_THROW(cu::linear(xb, wb, nullptr, Activation::None, &rf), InvalidArgument);
  EXPECT_THROW(cu::linear(xb, wb, nullptr, Activation::None, nullptr, DType::I32), InvalidArgument);
  // LayerNorm: weight and bias share one dtype; float outputs only.
  Tensor lw = randn({8}, 5).to(Device::CUDA), lb = randn({8}, 6).to(Device::CUDA);
  EXPECT_THROW(cu::layer_norm(xf, lw, cu::cast(lb, DType::BF16), 1e-6f, DType::BF16), InvalidArgument);
  EXPECT_THROW(cu::layer_norm(xf, lw, lb, 1e-6f, DType::I32), InvalidArgument);
  // The CPU path computes in float32 only.
  Tensor xh = randn({4, 8}, 7), wh = randn({3, 8}, 8), lwh = randn({8}, 9), lbh = randn({8}, 10);
  EXPECT_THROW(ops::linear(xh, wh, nullptr, Activation::None, nullptr, DType::BF16), InvalidArgument);
  EXPECT_THROW(ops::layer_norm(xh, lwh, lbh, 1e-6f, DType::BF16), InvalidArgument);
  EXPECT_NO_THROW(ops::linear(xh, wh, nullptr, Activation::None, nullptr, DType::F32));
  EXPECT_NO_THROW(ops::layer_norm(xh, lwh, lbh, 1e-6f, DType::F32));
}
