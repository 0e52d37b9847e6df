#include "ops/cuda/amg.h"

#include <climits>
#include <cub/device/device_scan.cuh>

#include "core/device_memory.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/linear_taps.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using dev::to_f;

// One block covers kBand output rows of one plane, all columns: a row's pixel counts are then
// complete inside the block (needed for the per-row int16 cast), and a lane walking down its
// column for kBand rows builds exactly one 32-bit word of the bit-packed mask.
constexpr int kBand = 32;
constexpr int kWarps = 8;
constexpr int kMaxGridY = 65535;

// The CPU's linear taps (LogitUpscaler::taps, cpu::linear_taps), shared with interpolate.cu:
// ops/cuda/linear_taps.cuh. The scales are computed once per launch (as the CPU does).
using Tap = taps::LinearTap<int>;
using taps::lerp2;
__device__ __forceinline__ Tap linear_tap(int in, float scale, int d) { return taps::linear_tap<int>(in, scale, d); }

// Walks the upscaled plane of blockIdx.y over the rows of band blockIdx.x. Per pixel the value is
// LogitUpscaler's: first-resize columns (a) from low-res rows, horizontally then vertically;
// the second resize horizontally per first-resize row (cached for the two rows in use), then
// vertically. Stats or bits, by kStats.
template <class T, bool kStats>
__global__ void __launch_bounds__(kWarps * 32)
    upscale_kernel(const T* const* planes, int64_t plane0, MaskUpscale g, float thr, float hi, float lo,
                   MaskPlaneStats* stats, uint32_t* words, int64_t words_per_plane) {
  const int64_t j = plane0 + blockIdx.y;
  const int y_begin = static_cast<int>(blockIdx.x) * kBand;
  const int y_end = min(y_begin + kBand, g.out_h);
  const T* __restrict__ low = planes[j];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float sy1 = __fdiv_rn(static_cast<float>(g.low_h), static_cast<float>(g.img_size));
  const float sx1 = __fdiv_rn(static_cast<float>(g.low_w), static_cast<float>(g.img_size));
  const float sy2 = __fdiv_rn(static_cast<float>(g.input_h), static_cast<float>(g.out_h));
  const float sx2 = __fdiv_rn(static_cast<float>(g.input_w), static_cast<float>(g.out_w));

  __shared__ int row_hi[kBand], row_lo[kBand];
  if (kStats) {
    if (threadIdx.x < kBand) row_hi[threadIdx.x] = row_lo[threadIdx.x] = 0;
    __syncthreads();
  }
  int bx0 = INT_MAX, by0 = INT_MAX, bx1 = -1, by1 = -1;

  for (int xb = warp * 32; xb < g.out_w; xb += kWarps * 32) {  // warp-uniform
    const int x = xb + lane;
    const bool valid = x < g.out_w;
    const Tap tx = linear_tap(g.input_w, sx2, valid ? x : g.out_w - 1);  // into the input_w kept columns
    const Tap ca = linear_tap(g.low_w, sx1, tx.i0), cb = linear_tap(g.low_w, sx1, tx.i1);
    // Second-resize horizontal value of first-resize row r at this column.
    auto row_value = [&](int r) {
      const Tap tr = linear_tap(g.low_h, sy1, r);
      const T* top = low + static_cast<int64_t>(tr.i0) * g.low_w;
      const T* bot = low + static_cast<int64_t>(tr.i1) * g.low_w;
      const float a_top = lerp2(ca.w0, to_f(top[ca.i0]), ca.w1, to_f(top[ca.i1]));
      const float a_bot = lerp2(ca.w0, to_f(bot[ca.i0]), ca.w1, to_f(bot[ca.i1]));
      const float b_top = lerp2(cb.w0, to_f(top[cb.i0]), cb.w1, to_f(top[cb.i1]));
      const float b_bot = lerp2(cb.w0, to_f(bot[cb.i0]), cb.w1, to_f(bot[cb.i1]));
      const float a = lerp2(tr.w0, a_top, tr.w1, a_bot);
      const float b = lerp2(tr.w0, b_top, tr.w1, b_bot);
      return lerp2(tx.w0, a, tx.w1, b);
    };
    int r0 = -1, r1 = -1;
    float h0 = 0.f, h1 = 0.f;
    uint32_t word = 0;
    for (int y = y_begin; y < y_end; ++y) {  // block-uniform
      const Tap ty = linear_tap(g.input_h, sy2, y);
      const float a = ty.i0 == r0 ? h0 : ty.i0 == r1 ? h1 : row_value(ty.i0);
      const float b = ty.i1 == ty.i0 ? a : ty.i1 == r1 ? h1 : ty.i1 == r0 ? h0 : row_value(ty.i1);
      r0 = ty.i0, h0 = a, r1 = ty.i1, h1 = b;
      const float v = lerp2(ty.w0, a, ty.w1, b);
      const bool on = valid && v > thr;
      if (kStats) {
        const unsigned above_hi = __ballot_sync(0xffffffffu, valid && v > hi);
        const unsigned above_lo = __ballot_sync(0xffffffffu, valid && v > lo);
        if (lane == 0) {
          if (above_hi) atomicAdd(&row_hi[y - y_begin], __popc(above_hi));
          if (above_lo) atomicAdd(&row_lo[y - y_begin], __popc(above_lo));
        }
        if (on) bx0 = min(bx0, x), bx1 = max(bx1, x), by0 = min(by0, y), by1 = max(by1, y);
      } else {
        word |= static_cast<uint32_t>(on) << (y - y_begin);
      }
    }
    if (!kStats && valid) words[j * words_per_plane + static_cast<int64_t>(blockIdx.x) * g.out_w + x] = word;
  }

  if (kStats) {
    MaskPlaneStats& s = stats[j];
    bx0 = __reduce_min_sync(0xffffffffu, bx0);
    by0 = __reduce_min_sync(0xffffffffu, by0);
    bx1 = __reduce_max_sync(0xffffffffu, bx1);
    by1 = __reduce_max_sync(0xffffffffu, by1);
    if (lane == 0 && bx1 >= 0) {
      atomicMin(&s.x0, bx0);
      atomicMin(&s.y0, by0);
      atomicMax(&s.x1, bx1);
      atomicMax(&s.y1, by1);
    }
    __syncthreads();
    if (warp == 0) {
      int hi_sum = 0, lo_sum = 0;
      if (y_begin + lane < y_end) {  // each complete row's count through int16, as the reference
        hi_sum = static_cast<int16_t>(row_hi[lane]);
        lo_sum = static_cast<int16_t>(row_lo[lane]);
      }
      hi_sum = dev::warp_sum(hi_sum);
      lo_sum = dev::warp_sum(lo_sum);
      if (lane == 0) {
        if (hi_sum) atomicAdd(&s.above_hi, hi_sum);
        if (lo_sum) atomicAdd(&s.above_lo, lo_sum);
      }
    }
  }
}

__global__ void init_stats_kernel(MaskPlaneStats* stats, int64_t n) {
  for (int64_t i = dev::gtid(); i < n; i += dev::gstride()) {
    MaskPlaneStats s;
    s.x0 = s.y0 = INT_MAX;
    stats[i] = s;
  }
}

void check_upscale(const MaskUpscale& g, const char* op) {
  VITRT_CHECK(g.low_h >= 1 && g.low_w >= 1 && g.img_size >= 1 && g.input_h >= 1 && g.input_w >= 1 &&
                  g.input_h <= g.img_size && g.input_w <= g.img_size && g.out_h >= 1 && g.out_w >= 1,
              InvalidArgument, "cuda ", op, ": bad sizes: low-res ", g.low_h, "x", g.low_w, ", S ", g.img_size,
              ", input ", g.input_h, "x", g.input_w, ", output ", g.out_h, "x", g.out_w);
}

template <bool kStats>
void launch_upscale(DType dt, const void* const* planes, int64_t n, const MaskUpscale& g, float thr, float hi,
                    float lo, MaskPlaneStats* stats, uint32_t* words, const char* op) {
  check_upscale(g, op);
  if (n <= 0) return;
  const unsigned bands = static_cast<unsigned>((g.out_h + kBand - 1) / kBand);
  const int64_t wpp = mask_words_per_plane(g.out_h, g.out_w);
  dispatch_float(dt, op, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t p0 = 0; p0 < n; p0 += kMaxGridY) {
      const dim3 grid(bands, static_cast<unsigned>(std::min<int64_t>(kMaxGridY, n - p0)));
      upscale_kernel<T, kStats><<<grid, kWarps * 32, 0, current_stream()>>>(
          reinterpret_cast<const T* const*>(planes), p0, g, thr, hi, lo, stats, words, wpp);
    }
  });
  check_launch(op);
}

// ---- RLE ----------------------------------------------------------------------------------

// Calls emit(position) for every change of value in column x of a placed mask, in order, at
// positions of the column-major H x W image: a pixel differs from the one before it (the
// previous column's last pixel for row 0 when the crop spans the full height; zero padding
// otherwise), and, after a set last pixel, the padding pixel that follows it.
template <class Emit>
__device__ __forceinline__ void column_changes(const uint32_t* __restrict__ w_mask, const MaskPlacement& p, int nwy,
                                               int x, Emit&& emit) {
  uint32_t prev = 0;
  if (x > 0 && p.y0 == 0 && p.h == p.H) prev = (w_mask[static_cast<int64_t>(nwy - 1) * p.w + x - 1] >> ((p.h - 1) & 31)) & 1u;
  const uint64_t base = static_cast<uint64_t>(p.x0 + x) * p.H + p.y0;
  for (int wy = 0; wy < nwy; ++wy) {
    const uint32_t word = w_mask[static_cast<int64_t>(wy) * p.w + x];
    const int nb = min(32, p.h - 32 * wy);
    const uint32_t in_mask = nb == 32 ? 0xffffffffu : ((1u << nb) - 1u);
    uint32_t d = (word ^ ((word << 1) | prev)) & in_mask;
    while (d) {
      emit(base + 32u * wy + (__ffs(d) - 1));
      d &= d - 1;
    }
    prev = (word >> (nb - 1)) & 1u;
  }
  if (prev) {  // a set last pixel followed by padding: the run of ones ends there
    if (p.y0 + p.h < p.H)
      emit(static_cast<uint64_t>(p.x0 + x) * p.H + p.y0 + p.h);
    else if (p.x0 + x + 1 < p.W && !(p.y0 == 0 && x + 1 < p.w))
      emit(static_cast<uint64_t>(p.x0 + x + 1) * p.H);
  }
}

// col_counts[j, x] = number of changes in column x of mask j; [j, w] = 1 (the final run);
// col_counts[n * (w + 1)] = 0 so that the exclusive scan's last element is the total.
__global__ void rle_count_kernel(const uint32_t* words, int64_t n, MaskPlacement p, int nwy, int64_t wpp,
                                 int64_t* col_counts) {
  const int64_t cols = p.w + 1, total = n * cols;
  for (int64_t i = dev::gtid(); i <= total; i += dev::gstride()) {
    if (i == total) {
      col_counts[i] = 0;
      continue;
    }
    const int64_t j = i / cols;
    const int x = static_cast<int>(i % cols);
    int64_t c = 1;
    if (x < p.w) {
      c = 0;
      column_changes(words + j * wpp, p, nwy, x, [&](uint64_t) { ++c; });
    }
    col_counts[i] = c;
  }
}

__global__ void rle_starts_kernel(const int64_t* col_offsets, int64_t n, int64_t cols, int64_t* starts) {
  for (int64_t j = dev::gtid(); j <= n; j += dev::gstride()) starts[j] = col_offsets[j * cols];
}

// Change positions (and the image size as the end of the last run) at their offsets.
__global__ void rle_positions_kernel(const uint32_t* words, int64_t n, MaskPlacement p, int nwy, int64_t wpp,
                                     const int64_t* col_offsets, uint32_t* pos) {
  const int64_t cols = p.w + 1, total = n * cols;
  for (int64_t i = dev::gtid(); i < total; i += dev::gstride()) {
    const int64_t j = i / cols;
    const int x = static_cast<int>(i % cols);
    int64_t o = col_offsets[i];
    if (x == p.w)
      pos[o] = static_cast<uint32_t>(static_cast<uint64_t>(p.H) * p.W);
    else
      column_changes(words + j * wpp, p, nwy, x, [&](uint64_t q) { pos[o++] = static_cast<uint32_t>(q); });
  }
}

// Run lengths: differences of consecutive positions within each mask (the first from 0).
__global__ void rle_diff_kernel(const uint32_t* pos, const int64_t* starts, int64_t mask0, uint32_t* counts) {
  const int64_t j = mask0 + blockIdx.y;
  const int64_t b = starts[j], e = starts[j + 1];
  for (int64_t i = b + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < e;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    counts[i] = pos[i] - (i == b ? 0u : pos[i - 1]);
}

void check_placement(const MaskPlacement& p, const char* op) {
  VITRT_CHECK(p.h >= 1 && p.w >= 1 && p.x0 >= 0 && p.y0 >= 0 && p.x0 + p.w <= p.W && p.y0 + p.h <= p.H,
              InvalidArgument, "cuda ", op, ": a ", p.w, "x", p.h, " mask at (", p.x0, ", ", p.y0,
              ") does not fit a ", p.W, "x", p.H, " image");
  VITRT_CHECK(static_cast<uint64_t>(p.H) * static_cast<uint64_t>(p.W) <= 0xffffffffull, InvalidArgument, "cuda ",
              op, ": a ", p.W, "x", p.H, " image has too many pixels for uint32 run lengths");
}

}  // namespace

int64_t mask_words_per_plane(int h, int w) { return static_cast<int64_t>((h + kBand - 1) / kBand) * w; }

void upscaled_mask_stats(DType dt, const void* const* planes, int64_t n, const MaskUpscale& g, float thr, float hi,
                         float lo, MaskPlaneStats* stats) {
  if (n <= 0) return check_upscale(g, "upscaled_mask_stats");
  init_stats_kernel<<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(stats, n);
  check_launch("upscaled_mask_stats init");
  launch_upscale<true>(dt, planes, n, g, thr, hi, lo, stats, nullptr, "upscaled_mask_stats");
}

void upscaled_mask_bits(DType dt, const void* const* planes, int64_t n, const MaskUpscale& g, float thr,
                        uint32_t* words) {
  launch_upscale<false>(dt, planes, n, g, thr, 0.f, 0.f, nullptr, words, "upscaled_mask_bits");
}

int64_t rle_col_offsets_size(int64_t n, const MaskPlacement& p) { return n * (p.w + 1) + 1; }

void rle_plan(const uint32_t* words, int64_t n, const MaskPlacement& p, int64_t* col_offsets, int64_t* starts) {
  check_placement(p, "rle_plan");
  if (n <= 0) {
    devmem::memset_zero(starts, Device::CUDA, sizeof(int64_t));
    return;
  }
  const int nwy = (p.h + kBand - 1) / kBand;
  const int64_t wpp = mask_words_per_plane(p.h, p.w), size = rle_col_offsets_size(n, p);
  std::shared_ptr<void> col_counts = devmem::cuda_alloc(sizeof(int64_t) * size);
  auto* cc = static_cast<int64_t*>(col_counts.get());
  rle_count_kernel<<<dev::blocks_for(size), dev::kThreads, 0, current_stream()>>>(words, n, p, nwy, wpp, cc);
  check_launch("rle_plan count");
  size_t temp_bytes = 0;
  VITRT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, cc, col_offsets, size, current_stream()));
  std::shared_ptr<void> temp = devmem::cuda_alloc(temp_bytes);
  VITRT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, cc, col_offsets, size, current_stream()));
  rle_starts_kernel<<<dev::blocks_for(n + 1), dev::kThreads, 0, current_stream()>>>(col_offsets, n, p.w + 1, starts);
  check_launch("rle_plan starts");
}

void rle_write(const uint32_t* words, int64_t n, const MaskPlacement& p, const int64_t* col_offsets,
               const int64_t* starts, int64_t total, uint32_t* counts) {
  check_placement(p, "rle_write");
  if (n <= 0 || total <= 0) return;
  const int nwy = (p.h + kBand - 1) / kBand;
  const int64_t wpp = mask_words_per_plane(p.h, p.w);
  std::shared_ptr<void> positions = devmem::cuda_alloc(sizeof(uint32_t) * total);
  auto* pos = static_cast<uint32_t*>(positions.get());
  rle_positions_kernel<<<dev::blocks_for(n * (p.w + 1)), dev::kThreads, 0, current_stream()>>>(words, n, p, nwy, wpp,
                                                                                               col_offsets, pos);
  check_launch("rle_write positions");
  // A few blocks per mask: most masks have hundreds to thousands of runs.
  for (int64_t m0 = 0; m0 < n; m0 += kMaxGridY) {
    const dim3 grid(4, static_cast<unsigned>(std::min<int64_t>(kMaxGridY, n - m0)));
    rle_diff_kernel<<<grid, dev::kThreads, 0, current_stream()>>>(pos, starts, m0, counts);
  }
  check_launch("rle_write counts");
}

}  // namespace vitrt::cuda
