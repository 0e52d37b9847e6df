#include "ops/cuda/norm.h"

#include <cstdint>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using dev::from_f;
using dev::to_f;

constexpr int kRowsPerBlock = dev::kThreads / 32;  // one warp per row

// Two passes over the row (the second and third reads hit L1/L2): mean, then the sum of squared
// deviations, both in double, then the fp32 normalisation the CPU kernel (and torch) does:
// y = (x - mean) * rstd * w + b.
template <class TX, class TW, class TY>
__global__ void layer_norm_kernel(const TX* x, const TW* w, const TW* b,
                                  TY* y, int64_t rows, int64_t C, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const TX* xr = x + row * C;
  TY* yr = y + row * C;
  double s = 0.0;
  for (int64_t c = lane; c < C; c += 32) s += to_f(xr[c]);
  const double mean = dev::warp_sum(s) / static_cast<double>(C);
  double q = 0.0;
  for (int64_t c = lane; c < C; c += 32) {
    const double d = static_cast<double>(to_f(xr[c])) - mean;
    q += d * d;
  }
  const double var = dev::warp_sum(q) / static_cast<double>(C);
  const float rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  const float meanf = static_cast<float>(mean);
  for (int64_t c = lane; c < C; c += 32) {
    const float n = __fmul_rn(__fsub_rn(to_f(xr[c]), meanf), rstd);
    yr[c] = from_f<TY>(fmaf(n, to_f(w[c]), to_f(b[c])));
  }
}

// The same LayerNorm for rows of C = 32 V k channels (V = 4, or 2 for widths like the decoder's 64),
// k <= kMaxChunks (every SAM / ViT width up to 1536): each lane holds its V k values of the row in
// registers, read once with 4- to 16-byte loads (the kernel above reads x three times with 2-4 byte
// loads: ~1.5 TB/s on an H200 at the encoder's shapes). Same double-precision statistics, same fp32
// normalisation per element.
constexpr int kMaxChunks = 12;

template <class T, int V>
struct alignas(V * sizeof(T)) VecN {
  T v[V];
};

template <class TX, class TW, class TY, int V>
__global__ void layer_norm_rows_in_registers_kernel(const TX* x, const TW* w, const TW* b, TY* y, int64_t rows,
                                                    int chunks, float eps) {
  using Vec4X = VecN<TX, V>;
  using Vec4W = VecN<TW, V>;
  using Vec4Y = VecN<TY, V>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t C = 32 * V * static_cast<int64_t>(chunks);
  const Vec4X* xr = reinterpret_cast<const Vec4X*>(x + row * C);
  float v[kMaxChunks][V];
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < kMaxChunks; ++k)
    if (k < chunks) {
      const Vec4X q = xr[k * 32 + lane];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] = to_f(q.v[j]);
        s += v[k][j];
      }
    }
  const double mean = dev::warp_sum(s) / static_cast<double>(C);
  double sq = 0.0;
#pragma unroll
  for (int k = 0; k < kMaxChunks; ++k)
    if (k < chunks)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const double d = static_cast<double>(v[k][j]) - mean;
        sq += d * d;
      }
  const double var = dev::warp_sum(sq) / static_cast<double>(C);
  const float rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  const float meanf = static_cast<float>(mean);
  const Vec4W* wr = reinterpret_cast<const Vec4W*>(w);
  const Vec4W* br = reinterpret_cast<const Vec4W*>(b);
  Vec4Y* yr = reinterpret_cast<Vec4Y*>(y + row * C);
#pragma unroll
  for (int k = 0; k < kMaxChunks; ++k)
    if (k < chunks) {
      const Vec4W wq = wr[k * 32 + lane], bq = br[k * 32 + lane];
      Vec4Y out;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float n = __fmul_rn(__fsub_rn(v[k][j], meanf), rstd);
        out.v[j] = from_f<TY>(fmaf(n, to_f(wq.v[j]), to_f(bq.v[j])));
      }
      yr[k * 32 + lane] = out;
    }
}

bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// max, then the sum of exp(x - max), then x = exp(x - max) * (1 / sum) as the CPU kernel
// (exponentials recomputed rather than stored, so bf16 rows keep fp32 intermediates).
template <class T>
__global__ void softmax_kernel(T* x, int64_t rows, int64_t n) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  T* xr = x + row * n;
  float m = -INFINITY;
  for (int64_t i = lane; i < n; i += 32) m = fmaxf(m, to_f(xr[i]));
  m = dev::warp_max(m);
  float s = 0.f;
  for (int64_t i = lane; i < n; i += 32) s += expf(to_f(xr[i]) - m);
  s = dev::warp_sum(s);
  const float inv = 1.f / s;
  for (int64_t i = lane; i < n; i += 32) xr[i] = from_f<T>(expf(to_f(xr[i]) - m) * inv);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

template <int V, class TX, class TW, class TY>
void launch_rows_in_registers(const TX* x, const TW* w, const TW* b, TY* y, int64_t rows, int64_t C, float eps) {
  layer_norm_rows_in_registers_kernel<TX, TW, TY, V><<<row_blocks(rows), dev::kThreads, 0, current_stream()>>>(
      x, w, b, y, rows, static_cast<int>(C / (32 * V)), eps);
}

}  // namespace

void layer_norm(DType xdt, const void* x, DType wdt, const void* weight, const void* bias, DType ydt, void* y,
                int64_t rows, int64_t C, float eps) {
  if (rows == 0 || C == 0) return;
  VITRT_CHECK(rows / kRowsPerBlock < (int64_t{1} << 31) - 1, InvalidArgument, "cuda layer_norm: too many rows");
  VITRT_CHECK(x != y || xdt == ydt, InvalidArgument, "cuda layer_norm: in place needs one dtype for x and y");
  dispatch_float(xdt, "layer_norm", [&](auto xtag) {
    dispatch_float(wdt, "layer_norm", [&](auto wtag) {
      dispatch_float(ydt, "layer_norm", [&](auto ytag) {
        using TX = decltype(xtag);
        using TW = decltype(wtag);
        using TY = decltype(ytag);
        // V values per lane and chunk: 4 when C is a multiple of 128, else 2 for multiples of 64.
        const int V = C % 128 == 0 ? 4 : C % 64 == 0 ? 2 : 0;
        const bool in_registers = V > 0 && C / (32 * V) <= kMaxChunks && aligned_to(x, V * sizeof(TX)) &&
                                  aligned_to(weight, V * sizeof(TW)) && aligned_to(bias, V * sizeof(TW)) &&
                                  aligned_to(y, V * sizeof(TY));
        const auto* xt = static_cast<const TX*>(x);
        const auto* wt = static_cast<const TW*>(weight);
        const auto* bt = static_cast<const TW*>(bias);
        auto* yt = static_cast<TY*>(y);
        if (in_registers && V == 4)
          launch_rows_in_registers<4>(xt, wt, bt, yt, rows, C, eps);
        else if (in_registers)
          launch_rows_in_registers<2>(xt, wt, bt, yt, rows, C, eps);
        else
          layer_norm_kernel<TX, TW, TY><<<row_blocks(rows), dev::kThreads, 0, current_stream()>>>(xt, wt, bt, yt,
                                                                                                  rows, C, eps);
      });
    });
  });
  check_launch("layer_norm kernel");
}

void softmax_lastdim(DType dt, void* x, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  VITRT_CHECK(rows / kRowsPerBlock < (int64_t{1} << 31) - 1, InvalidArgument, "cuda softmax: too many rows");
  dispatch_float(dt, "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T><<<row_blocks(rows), dev::kThreads, 0, current_stream()>>>(static_cast<T*>(x), rows, n);
  });
  check_launch("softmax kernel");
}

}  // namespace vitrt::cuda
