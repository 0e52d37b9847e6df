#include "ops/cpu/gemm.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <dnnl.h>
#include <dnnl.hpp>

#include "ops/cpu/dnnl_util.h"
#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// Everything that selects a distinct matmul primitive.
struct MatmulKey {
  int64_t batch, M, N, K;
  bool b_is_nk;  // weights stored [N, K] (transposed view given to oneDNN)
  bool bias;
  Act act;
  bool residual;
  auto tie() const { return std::tie(batch, M, N, K, b_is_nk, bias, act, residual); }
  bool operator<(const MatmulKey& o) const { return tie() < o.tie(); }
};

struct CachedMatmul {
  dnnl::matmul prim;
  memory::desc src, wei, bias, dst, res;
  size_t scratch_bytes = 0;
};

// SAM calls a handful of shapes over and over (every block of the encoder has the same linears),
// so primitive creation (milliseconds: JIT code generation) is paid once per shape.
std::shared_ptr<const CachedMatmul> get_matmul(const MatmulKey& k) {
  static std::mutex mu;
  static std::map<MatmulKey, std::shared_ptr<const CachedMatmul>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k);
    if (it != cache.end()) return it->second;
  }
  auto c = std::make_shared<CachedMatmul>();
  const auto f32 = memory::data_type::f32;
  // 3-D descriptors throughout; batch 1 is a plain 2-D product.
  c->src = memory::desc(Dims{k.batch, k.M, k.K}, f32, Dims{k.M * k.K, k.K, 1});
  // Weights [K, N] logically. An [N, K] PyTorch weight is the same matrix with strides {1, K}:
  // oneDNN reads it in place, the weights are never copied per call.
  c->wei = k.b_is_nk ? memory::desc(Dims{k.batch, k.K, k.N}, f32, Dims{k.N * k.K, 1, k.K})
                     : memory::desc(Dims{k.batch, k.K, k.N}, f32, Dims{k.N * k.K, k.N, 1});
  c->dst = memory::desc(Dims{k.batch, k.M, k.N}, f32, Dims{k.M * k.N, k.N, 1});
  if (k.bias) c->bias = memory::desc(Dims{1, 1, k.N}, f32, Dims{k.N, k.N, 1});
  dnnl::post_ops po;
  if (k.act == Act::GELU) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  if (k.act == Act::ReLU) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (k.residual) {
    c->res = c->dst;
    po.append_binary(dnnl::algorithm::binary_add, c->res);
  }
  dnnl::primitive_attr attr = dnnl_util::base_attr();
  attr.set_post_ops(po);
  try {
    dnnl::matmul::desc d = k.bias ? dnnl::matmul::desc(c->src, c->wei, c->bias, c->dst)
                                  : dnnl::matmul::desc(c->src, c->wei, c->dst);
    dnnl::matmul::primitive_desc pd(d, attr, dnnl_util::engine());
    c->scratch_bytes = pd.scratchpad_desc().get_size();
    c->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Error(detail::concat("oneDNN matmul set-up failed for [", k.M, " x ", k.K, "] x [", k.K, " x ", k.N,
                               "] (batch ", k.batch, "): ", e.what()));
  }
  std::lock_guard<std::mutex> lock(mu);
  // Bound the cache: shapes that vary per call (the mask decoder's token count) must not grow
  // it forever. Dropping everything is crude but the steady state refills in one pass.
  if (cache.size() >= 512) cache.clear();
  cache.emplace(k, c);
  return c;
}

void run_matmul(const MatmulKey& k, const float* a, const float* b, float* c, const float* bias,
                const float* residual) {
  if (k.M == 0 || k.N == 0 || k.batch == 0) return;
  auto mm = get_matmul(k);
  auto& eng = dnnl_util::engine();
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, memory(mm->src, eng, const_cast<float*>(a)));
  args.emplace(DNNL_ARG_WEIGHTS, memory(mm->wei, eng, const_cast<float*>(b)));
  args.emplace(DNNL_ARG_DST, memory(mm->dst, eng, c));
  if (k.bias) args.emplace(DNNL_ARG_BIAS, memory(mm->bias, eng, const_cast<float*>(bias)));
  if (k.residual) {
    int idx = k.act == Act::None ? 0 : 1;  // position of the binary add in the post-op chain
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1,
                 memory(mm->res, eng, const_cast<float*>(residual)));
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, dnnl_util::scratchpad(mm->scratch_bytes));
  auto& s = dnnl_util::stream();
  try {
    mm->prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    throw Error(detail::concat("oneDNN matmul failed: ", e.what()));
  }
}

}  // namespace

void gemm_epilogue(const float* x, const float* w, bool w_is_nk, float* y, int64_t M, int64_t N,
                   int64_t K, const float* bias, Act act, const float* residual) {
  if (K == 0) {
    // Degenerate product: oneDNN rejects zero-sized K; the result is just the epilogue.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float v = bias ? bias[j] : 0.f;
        if (act == Act::ReLU) v = v > 0.f ? v : 0.f;
        if (act == Act::GELU) v = 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
        y[i * N + j] = v + (residual ? residual[i * N + j] : 0.f);
      }
    return;
  }
  run_matmul(MatmulKey{1, M, N, K, w_is_nk, bias != nullptr, act, residual != nullptr}, x, w, y, bias,
             residual);
}

void batched_matmul(const float* a, const float* b, float* c, int64_t batch, int64_t M, int64_t N,
                    int64_t K, bool transpose_b) {
  if (K == 0) {
    for (int64_t i = 0; i < batch * M * N; ++i) c[i] = 0.f;
    return;
  }
  run_matmul(MatmulKey{batch, M, N, K, transpose_b, false, Act::None, false}, a, b, c, nullptr, nullptr);
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                beta, C, ldc);
  if (st != dnnl_success)
    throw Error(detail::concat("dnnl_sgemm failed (status ", static_cast<int>(st), ") for M=", M, " N=", N,
                               " K=", K));
}

double measure_sgemm_gflops(int64_t M, int64_t N, int64_t K, int reps) {
  VITRT_CHECK(M > 0 && N > 0 && K > 0 && reps > 0, InvalidArgument, "measure_sgemm_gflops: bad sizes");
  std::vector<float> a(M * K), b(K * N), c(M * N);
  uint32_t state = 12345;  // small LCG: random-looking data without <random>'s cost
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.f - 0.5f;
  };
  for (auto& v : a) v = next();
  for (auto& v : b) v = next();
  sgemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) sgemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * static_cast<double>(M) * N * K * reps / secs / 1e9;
}

}  // namespace vitrt::cpu
