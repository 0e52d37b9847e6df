#include "ops/cpu/elementwise.h"

#include <immintrin.h>

#include <map>
#include <memory>
#include <mutex>

#include "ops/cpu/dnnl_util.h"
#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save

struct CachedEltwise {
  dnnl::eltwise_forward prim;
  dnnl::memory::desc md;
  size_t scratch_bytes = 0;
};

std::shared_ptr<const CachedEltwise> get_gelu(int64_t n) {
  static std::mutex mu;
  static std::map<int64_t, std::shared_ptr<const CachedEltwise>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(n);
    if (it != cache.end()) return it->second;
  }
  auto c = std::make_shared<CachedEltwise>();
  c->md = dnnl::memory::desc({n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1});
  try {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_gelu_erf, c->md,
                                  0.f, 0.f);
    dnnl::eltwise_forward::primitive_desc pd(d, dnnl_util::base_attr(), dnnl_util::engine());
    c->scratch_bytes = pd.scratchpad_desc().get_size();
    c->prim = dnnl::eltwise_forward(pd);
  } catch (const dnnl::error& e) {
    throw Error(detail::concat("oneDNN GELU set-up failed for ", n, " elements: ", e.what()));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) cache.clear();
  cache.emplace(n, c);
  return c;
}

}  // namespace

void add_broadcast(const float* x, const float* y, float* out, int64_t n, int64_t ny) {
  if (n == 0) return;
  if (ny == n) {  // same shape: one flat loop, so a single big "row" still uses every thread
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
    return;
  }
  const int64_t rows = n / ny;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ny;
    float* o = out + r * ny;
    int64_t i = 0;
    for (; i + 8 <= ny; i += 8)
      _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(xr + i), _mm256_loadu_ps(y + i)));
    for (; i < ny; ++i) o[i] = xr[i] + y[i];
  }
}

void scale(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void relu(float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0.f ? 0.f : x[i];
}

void gelu(float* x, int64_t n) {
  if (n == 0) return;
  auto g = get_gelu(n);
  auto& eng = dnnl_util::engine();
  dnnl::memory m(g->md, eng, x);
  auto& s = dnnl_util::stream();
  try {
    g->prim.execute(s, {{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}, {DNNL_ARG_SCRATCHPAD, dnnl_util::scratchpad(g->scratch_bytes)}});
    s.wait();
  } catch (const dnnl::error& e) {
    throw Error(detail::concat("oneDNN GELU failed: ", e.what()));
  }
}

}  // namespace vitrt::cpu
