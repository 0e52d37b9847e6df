// One LayerNorm row held in registers by a group of LANES lanes: the body of norm.cu's row kernel, as
// a device function, so that a kernel normalising rows of its own gives bit-identical results. (Tried
// in the fused block-sparse MLP, its spare producer warps normalising each finished tile: at three
// warps the double-precision reductions were too slow, the last tile's rows lengthened the kernel by
// 0.2 ms; BENCHMARKS.md, 2026-12-04 20:22 session, call 2.)
// The row: C = LANES * V * chunks values, lane `lane` (0 .. LANES - 1) holding V values of each
// chunk, read once with one vector load per chunk. Statistics in double (the mean, then the sum of
// squared deviations), then the fp32 normalisation the CPU kernel (and torch) does:
// y = (x - mean) * rstd * w + b; `gelu` applies the erf GELU to the result (dev::gelu_for).
// Every lane of the warp must call it (the reductions shuffle across the whole warp); `store` false
// (a row past the end, given a valid row to read) computes without writing.
// F32STATS (bf16 rows): each lane's sums in fp32 and only the cross-lane sums in double, the mean
// corrected by the deviations' own sum (mean = m0 + sum(x - m0) / C, var = sum((x - m0)^2) / C -
// (sum(x - m0) / C)^2, m0 the first pass's mean in fp32). Why: per value the double form converts
// twice to double (F2F.F64.F32, a quarter-rate pipe: 16 per clock and SM) and does three double
// operations: by the throughput tables ~21 us of conversion-pipe time per ViT-B/16 LayerNorm at batch
// 256, against ~40 us of memory time, and the kernel measured 62 us (BENCHMARKS.md, 2026-12-04 20:22
// session); here three fp32 operations (not measured yet). The statistics' error stays below 1e-6 of
// the row's spread (a bf16 input's own step is 4e-3 of its value), also for rows far from zero, and
// 1 of 122880 bf16 outputs came out one step apart from the double form's:
// scripts/tests/test_layer_norm_stats.py emulates both forms on bf16 rows in the kernel's order.
#pragma once
#include <type_traits>

#include "ops/cuda/elementwise.h"

namespace vitrt::cuda::dev {

template <class TX, class TW, class TY, int V, int LANES, int MAXC, bool F32STATS = false>
__device__ __forceinline__ void layer_norm_row_in_registers(const TX* xrow, const TW* w, const TW* b, TY* yrow,
                                                            int chunks, float eps, bool gelu, bool store,
                                                            int lane) {
  using VecX = VecN<TX, V>;
  using VecW = VecN<TW, V>;
  using VecY = VecN<TY, V>;
  const int64_t C = static_cast<int64_t>(LANES) * V * chunks;
  const VecX* xr = reinterpret_cast<const VecX*>(xrow);
  float v[MAXC][V];
  // The first pass: the row's values, and this lane's sum (in fp32 for F32STATS, else in double).
  std::conditional_t<F32STATS, float, double> s = 0;
#pragma unroll
  for (int k = 0; k < MAXC; ++k)
    if (k < chunks) {
      const VecX q = xr[k * LANES + lane];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] = to_f(q.v[j]);
        s += v[k][j];
      }
    }
  double mean, var;
  if constexpr (F32STATS) {
    const float m0 = static_cast<float>(group_sum<LANES>(static_cast<double>(s)) / static_cast<double>(C));
    float sd = 0.f, sq = 0.f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k)
      if (k < chunks)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float d = v[k][j] - m0;
          sd += d;
          sq = fmaf(d, d, sq);
        }
    const double dm = group_sum<LANES>(static_cast<double>(sd)) / static_cast<double>(C);
    mean = static_cast<double>(m0) + dm;
    var = fmax(group_sum<LANES>(static_cast<double>(sq)) / static_cast<double>(C) - dm * dm, 0.0);
  } else {
    mean = group_sum<LANES>(s) / static_cast<double>(C);
    double sq = 0.0;
#pragma unroll
    for (int k = 0; k < MAXC; ++k)
      if (k < chunks)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const double d = static_cast<double>(v[k][j]) - mean;
          sq += d * d;
        }
    var = group_sum<LANES>(sq) / static_cast<double>(C);
  }
  if (!store) return;
  const float rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  const float meanf = static_cast<float>(mean);
  const VecW* wr = reinterpret_cast<const VecW*>(w);
  const VecW* br = reinterpret_cast<const VecW*>(b);
  VecY* yr = reinterpret_cast<VecY*>(yrow);
#pragma unroll
  for (int k = 0; k < MAXC; ++k)
    if (k < chunks) {
      const VecW wq = wr[k * LANES + lane], bq = br[k * LANES + lane];
      VecY out;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float n = __fmul_rn(__fsub_rn(v[k][j], meanf), rstd);
        float o = fmaf(n, to_f(wq.v[j]), to_f(bq.v[j]));
        if (gelu) o = gelu_for<TY>(o);
        out.v[j] = from_f<TY>(o);
      }
      yr[k * LANES + lane] = out;
    }
}

}  // namespace vitrt::cuda::dev
