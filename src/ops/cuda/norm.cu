#include "ops/cuda/norm.h"

#include <cstdint>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/env_choice.h"
#include "ops/cuda/layer_norm_row.cuh"
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
                                  TY* y, int64_t rows, int64_t C, float eps, bool gelu) {
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
    const float o = fmaf(n, to_f(w[c]), to_f(b[c]));
    yr[c] = from_f<TY>(gelu ? dev::gelu_for<TY>(o) : o);
  }
}

// The same LayerNorm with the row held in registers: LANES lanes per row (32, or 4 / 8 / 16 for short
// rows such as the decoder's 64-channel LayerNorm2d: 32 / LANES rows per warp), each lane holding
// V k values, k = chunks <= kMaxChunks (every SAM / ViT width up to 1536), read once with 8- to
// 16-byte loads (the kernel above reads x three times with 2-4 byte loads: ~1.5 TB/s on an H200 at
// the encoder's shapes; one warp per 64-channel row, 2 values per lane, spent 20 shuffles on 64
// values: 0.63 ms for the decoder's 1M rows, 0.15 ms with 8 lanes per row and the GELU fused).
// Same double-precision statistics, same fp32 normalisation per element; `gelu` applies the erf
// GELU to the result (LayerNorm2d then GELU in SAM's upscaling; dev::gelu_for picks the erf).
constexpr int kMaxChunks = 12;


// MAXC: the most chunks a launch may ask for; the row array is sized by it (12 x 8 floats for
// 1-chunk rows would cost 96 registers and halve the occupancy).
// `reverse`: block b takes the rows of block gridDim.x - 1 - b, so that the last rows go first (blocks
// start roughly in index order): see rows_last_first below.
template <class TX, class TW, class TY, int V, int LANES, int MAXC, bool F32STATS>
__global__ void layer_norm_rows_in_registers_kernel(const TX* x, const TW* w, const TW* b, TY* y, int64_t rows,
                                                    int chunks, float eps, bool gelu, bool reverse) {
  constexpr int kRowsPerWarp = 32 / LANES;
  const int64_t block = reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t row0 = (block * kRowsPerBlock + threadIdx.x / 32) * kRowsPerWarp;
  if (row0 >= rows) return;  // whole warps leave together: the shuffles see full warps
  const int64_t row = row0 + (threadIdx.x % 32) / LANES;
  const bool valid = row < rows;  // a warp's last rows may lie past the end: computed on row0, not stored
  const int64_t C = static_cast<int64_t>(LANES) * V * chunks;
  dev::layer_norm_row_in_registers<TX, TW, TY, V, LANES, MAXC, F32STATS>(x + (valid ? row : row0) * C, w, b,
                                                                         y + row * C, chunks, eps, gelu, valid,
                                                                         threadIdx.x % LANES);
}

// VITRT_LAYER_NORM_HALF_WARP: "0" one row per warp at every width (the form before), else (unset, "1")
// 16 lanes per row where the row fits them. Read once.
bool two_rows_per_warp() {
  static const bool on = kernel_mode_from_env("VITRT_LAYER_NORM_HALF_WARP") != KernelMode::Off;
  return on;
}

// VITRT_LAYER_NORM_F32_STATS: "0" the statistics in double for every input (the form before); else
// (unset, "1") in fp32 per lane for bf16 inputs (dev::layer_norm_row_in_registers, F32STATS). Read once.
bool f32_stats_for_bf16() {
  static const bool on = kernel_mode_from_env("VITRT_LAYER_NORM_F32_STATS") != KernelMode::Off;
  return on;
}

// VITRT_LAYER_NORM_ORDER: "reverse" runs the row kernel's blocks last rows first, "forward" (or unset)
// in row order, the default until measured. Why reverse: the producer of x (a GEMM or the fused MLP)
// writes its rows roughly in increasing order, so x's last rows are the ones still in L2 (50 MB
// against ViT-B/16's 77 MB at batch 256), and the consumer of y reads its first rows first, which a
// reversed pass writes last. Read once.
bool rows_last_first() {
  static const bool on =
      env_choice<bool>("VITRT_LAYER_NORM_ORDER", {{"reverse", true}, {"forward", false}}, false);
  return on;
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

template <int V, int LANES, int MAXC, class TX, class TW, class TY>
void launch_rows_in_registers(const TX* x, const TW* w, const TW* b, TY* y, int64_t rows, int64_t C, float eps,
                              bool gelu) {
  const int64_t rows_per_block = int64_t{kRowsPerBlock} * (32 / LANES);
  const auto blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  const int chunks = static_cast<int>(C / (LANES * V));
  if (sizeof(TX) == 2 && f32_stats_for_bf16())
    layer_norm_rows_in_registers_kernel<TX, TW, TY, V, LANES, MAXC, sizeof(TX) == 2>
        <<<blocks, dev::kThreads, 0, current_stream()>>>(x, w, b, y, rows, chunks, eps, gelu, rows_last_first());
  else
    layer_norm_rows_in_registers_kernel<TX, TW, TY, V, LANES, MAXC, false>
        <<<blocks, dev::kThreads, 0, current_stream()>>>(x, w, b, y, rows, chunks, eps, gelu, rows_last_first());
}

}  // namespace

void layer_norm(DType xdt, const void* x, DType wdt, const void* weight, const void* bias, DType ydt, void* y,
                int64_t rows, int64_t C, float eps, bool gelu) {
  if (rows == 0 || C == 0) return;
  VITRT_CHECK(rows / kRowsPerBlock < (int64_t{1} << 31) - 1, InvalidArgument, "cuda layer_norm: too many rows");
  VITRT_CHECK(x != y || xdt == ydt, InvalidArgument, "cuda layer_norm: in place needs one dtype for x and y");
  dispatch_float(xdt, "layer_norm", [&](auto xtag) {
    dispatch_float(wdt, "layer_norm", [&](auto wtag) {
      dispatch_float(ydt, "layer_norm", [&](auto ytag) {
        using TX = decltype(xtag);
        using TW = decltype(wtag);
        using TY = decltype(ytag);
        const auto* xt = static_cast<const TX*>(x);
        const auto* wt = static_cast<const TW*>(weight);
        const auto* bt = static_cast<const TW*>(bias);
        auto* yt = static_cast<TY*>(y);
        auto aligned = [&](int v) {
          return aligned_to(x, v * sizeof(TX)) && aligned_to(weight, v * sizeof(TW)) &&
                 aligned_to(bias, v * sizeof(TW)) && aligned_to(y, v * sizeof(TY));
        };
        // Rows of 4-32 16-byte x vectors (bf16 C = 32 ... 256: the decoder's widths): 4-32 lanes per
        // row, several rows per warp below 32; else V = 4 values per lane and chunk when C is a multiple of 128, 2 for multiples of
        // 64, one warp per row; else the generic kernel.
        constexpr int Vs = 16 / sizeof(TX);
        const int64_t short_lanes = C % Vs == 0 ? C / Vs : 0;
        const int V = C % 128 == 0 ? 4 : C % 64 == 0 ? 2 : 0;
        if ((short_lanes == 4 || short_lanes == 8 || short_lanes == 16 || short_lanes == 32) && aligned(Vs)) {
          if (short_lanes == 4) launch_rows_in_registers<Vs, 4, 1>(xt, wt, bt, yt, rows, C, eps, gelu);
          else if (short_lanes == 8) launch_rows_in_registers<Vs, 8, 1>(xt, wt, bt, yt, rows, C, eps, gelu);
          else if (short_lanes == 16) launch_rows_in_registers<Vs, 16, 1>(xt, wt, bt, yt, rows, C, eps, gelu);
          else launch_rows_in_registers<Vs, 32, 1>(xt, wt, bt, yt, rows, C, eps, gelu);
        } else if (two_rows_per_warp() && C % (16 * Vs) == 0 && C / (16 * Vs) <= kMaxChunks / (Vs / 4) &&
                   aligned(Vs)) {
          // Rows of up to 6 (bf16) / 12 (fp32) 16-byte vectors per half warp (ViT-B's 768 bf16 values,
          // vit_b's 768 floats): 16 lanes per row, two rows per warp, so that each lane has as many
          // loads in flight as at SAM's widest rows. One row per warp left each lane 3 loads at
          // ViT-B's bf16 rows, and the statistics' fixed cost per row (two shuffle reductions in
          // double) then bounded the kernel: ~2.1 TB/s (BENCHMARKS.md, 2026-12-04 12:08 session).
          // (Tried 2026-12-06 on an H100, where this form runs ViT-B/16's rows at ~2.7 TB/s: the rows
          // kept as bf16 in registers with 1 / 2 / 4 rows per half warp, all loaded before the first is
          // reduced: 3% / 27% / 230% slower. `git show 9ad2364`.)
          if constexpr (Vs == 8) launch_rows_in_registers<8, 16, kMaxChunks / 2>(xt, wt, bt, yt, rows, C, eps, gelu);
          else launch_rows_in_registers<4, 16, kMaxChunks>(xt, wt, bt, yt, rows, C, eps, gelu);
        } else if (sizeof(TX) == 2 && C % 256 == 0 && C / 256 <= kMaxChunks / 2 && aligned(8)) {
          // 2-byte rows (the bf16 ViT's stream): 8 values per lane and chunk, 16-byte loads (the V = 4
          // path loaded 8 bytes at a time: ~2.1 TB/s on ViT-B/16's 768-wide rows).
          launch_rows_in_registers<8, 32, kMaxChunks / 2>(xt, wt, bt, yt, rows, C, eps, gelu);
        } else if (V == 4 && C / 128 <= kMaxChunks && aligned(4)) {
          launch_rows_in_registers<4, 32, kMaxChunks>(xt, wt, bt, yt, rows, C, eps, gelu);
        } else if (V == 2 && C / 64 <= kMaxChunks && aligned(2)) {
          launch_rows_in_registers<2, 32, kMaxChunks>(xt, wt, bt, yt, rows, C, eps, gelu);
        } else {
          layer_norm_kernel<TX, TW, TY><<<row_blocks(rows), dev::kThreads, 0, current_stream()>>>(xt, wt, bt, yt,
                                                                                                  rows, C, eps, gelu);
        }
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
