#include "ops/cuda/interpolate.h"

#include <algorithm>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/linear_taps.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using dev::from_f;
using dev::gstride;
using dev::gtid;
using dev::to_f;

// The taps (weights and arithmetic of the CPU kernels): ops/cuda/linear_taps.cuh.
using Tap = taps::LinearTap<int64_t>;
using taps::lerp2;
__device__ __forceinline__ Tap linear_tap(int64_t in, int64_t out, int64_t d) {
  return taps::linear_tap<int64_t>(in, taps::linear_scale(in, out), d);
}

template <class T>
__global__ void linear_rows_kernel(const T* x, T* out, int64_t L, int64_t C, int64_t new_len) {
  const int64_t n = new_len * C;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int64_t j = i / C, c = i % C;
    const Tap t = linear_tap(L, new_len, j);
    out[i] = from_f<T>(lerp2(t.w0, to_f(x[t.i0 * C + c]), t.w1, to_f(x[t.i1 * C + c])));
  }
}

// One thread per output column, a grid row per output row, planes over grid z: the taps are computed
// once per thread with 32-bit indices (the first version's flat index needed four 64-bit divisions per
// pixel; it took 3.5 ms for 192 masks at 1024x1024, in two passes). Same taps, same arithmetic order,
// so the same values bit for bit.
template <class TI, class TO>
__global__ void bilinear_kernel(const TI* x, int64_t N, int H, int W, int64_t plane_stride, int64_t row_stride,
                                TO* out, int oh, int ow, uint8_t* mask) {
  const int c = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= ow) return;
  const float sv = taps::linear_scale(H, oh), sh = taps::linear_scale(W, ow);
  const taps::LinearTap<int> h = taps::linear_tap<int>(W, sh, c);
  for (int y = blockIdx.y; y < oh; y += gridDim.y) {
    const taps::LinearTap<int> v = taps::linear_tap<int>(H, sv, y);
    for (int64_t p = blockIdx.z; p < N; p += gridDim.z) {
      const TI* r0 = x + p * plane_stride + static_cast<int64_t>(v.i0) * row_stride;
      const TI* r1 = x + p * plane_stride + static_cast<int64_t>(v.i1) * row_stride;
      // Width inside, height outside, as the CPU kernel.
      const float top = lerp2(h.w0, to_f(r0[h.i0]), h.w1, to_f(r0[h.i1]));
      const float bot = lerp2(h.w0, to_f(r1[h.i0]), h.w1, to_f(r1[h.i1]));
      const float o = lerp2(v.w0, top, v.w1, bot);
      const int64_t i = (p * oh + y) * ow + c;
      if (out) out[i] = from_f<TO>(o);
      if (mask) mask[i] = o > 0.f ? 1 : 0;  // SAM's mask_threshold = 0.0, on the fp32 value
    }
  }
}

// Sam.postprocess_masks in one pass: output pixel (y, x) of the resize input_h x input_w ->
// oh x ow reads 4 pixels of the S x S upsample's top-left crop, computed here from the m x m
// low-res plane with the first resize's taps and arithmetic -- the same fp32 values the two-pass
// form stores in its [N, S, S] intermediate (4 MB per mask, 800 MB for 64 prompts x 3 masks), so the
// results are bit for bit the same without it.
// A thread owns kPostCols adjacent output columns (so two upsample columns X0, X1 each) and walks
// kPostRows output rows down them. Consecutive output rows read the same or the next upsample rows,
// and those the same low-res rows, so both are cached (the two newest of each, in registers): about
// one upsample row and a quarter of a low-res row are computed per output row, instead of four
// upsample values of four loads each (that form took 3.5 ms for 192 masks at 1024 x 1024; one column
// per thread 0.76 ms, four 0.53 ms). The row taps and cache decisions serve all the thread's columns,
// and the masks go out 4 bytes at a time. Every lane of a warp works on the same row, so the cache
// branches are uniform.
constexpr int kPostRows = 32, kPostCols = 4, kPostThreads = 64;

// The values of the two newest rows computed, per column: X0 and X1 of each of the kPostCols columns.
struct TwoRowCache {
  int row[2] = {-1, -1};
  float2 val[2][kPostCols];
  // v = the values of row r when cached.
  __device__ __forceinline__ bool get(int r, float2 (&v)[kPostCols]) const {
    if (r != row[1] && r != row[0]) return false;
    const bool newest = r == row[1];  // a select, not an index: the arrays stay in registers
#pragma unroll
    for (int j = 0; j < kPostCols; ++j) v[j] = newest ? val[1][j] : val[0][j];
    return true;
  }
  __device__ __forceinline__ void put(int r, const float2 (&v)[kPostCols]) {
#pragma unroll
    for (int j = 0; j < kPostCols; ++j) val[0][j] = val[1][j], val[1][j] = v[j];
    row[0] = row[1], row[1] = r;
  }
};

template <class TI>
__global__ void __launch_bounds__(kPostThreads) upscale_crop_resize_kernel(const TI* low, int64_t N, int mh, int mw,
                                                                            int S, int ih, int iw, float* out,
                                                                            uint8_t* mask, int oh, int ow) {
  constexpr int C = kPostCols;
  const int x0 = (static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x) * C;
  if (x0 >= ow) return;
  const float s1v = taps::linear_scale(mh, S), s1h = taps::linear_scale(mw, S);
  const float s2v = taps::linear_scale(ih, oh), s2h = taps::linear_scale(iw, ow);
  taps::LinearTap<int> h2[C], h1a[C], h1b[C];
#pragma unroll
  for (int j = 0; j < C; ++j) {
    const int x = min(x0 + j, ow - 1);  // columns past the edge compute column ow - 1, never stored
    h2[j] = taps::linear_tap<int>(iw, s2h, x);
    h1a[j] = taps::linear_tap<int>(mw, s1h, h2[j].i0);
    h1b[j] = taps::linear_tap<int>(mw, s1h, h2[j].i1);
  }
  const bool full = x0 + C <= ow;
  const int y_begin = static_cast<int>(blockIdx.y) * kPostRows, y_end = min(oh, y_begin + kPostRows);
  for (int64_t p = blockIdx.z; p < N; p += gridDim.z) {
    const TI* plane = low + p * mh * mw;
    // The first resize's width step on low-res row r at every column's X0 and X1.
    TwoRowCache lowres_rows;
    auto across = [&](int r, float2 (&v)[C]) {
      if (lowres_rows.get(r, v)) return;
      const TI* row = plane + static_cast<int64_t>(r) * mw;
#pragma unroll
      for (int j = 0; j < C; ++j)
        v[j] = make_float2(lerp2(h1a[j].w0, to_f(row[h1a[j].i0]), h1a[j].w1, to_f(row[h1a[j].i1])),
                           lerp2(h1b[j].w0, to_f(row[h1b[j].i0]), h1b[j].w1, to_f(row[h1b[j].i1])));
      lowres_rows.put(r, v);
    };
    // The S x S upsample at row Y, every column's X0 and X1: width inside, height outside (as the CPU).
    TwoRowCache upsample_rows;
    auto upsampled = [&](int Y, float2 (&v)[C]) {
      if (upsample_rows.get(Y, v)) return;
      const taps::LinearTap<int> v1 = taps::linear_tap<int>(mh, s1v, Y);
      float2 t[C], b[C];
      across(v1.i0, t);
      across(v1.i1, b);
#pragma unroll
      for (int j = 0; j < C; ++j)
        v[j] = make_float2(lerp2(v1.w0, t[j].x, v1.w1, b[j].x), lerp2(v1.w0, t[j].y, v1.w1, b[j].y));
      upsample_rows.put(Y, v);
    };
    for (int y = y_begin; y < y_end; ++y) {
      const taps::LinearTap<int> v2 = taps::linear_tap<int>(ih, s2v, y);
      float2 a[C], b[C];
      upsampled(v2.i0, a);
      upsampled(v2.i1, b);
      float o[C];
#pragma unroll
      for (int j = 0; j < C; ++j) {
        const float top = lerp2(h2[j].w0, a[j].x, h2[j].w1, a[j].y);
        const float bot = lerp2(h2[j].w0, b[j].x, h2[j].w1, b[j].y);
        o[j] = lerp2(v2.w0, top, v2.w1, bot);
      }
      const int64_t i = (p * oh + y) * ow + x0;
      if (full && i % C == 0) {  // 4-byte / 16-byte aligned: one store each
        if (out) *reinterpret_cast<float4*>(out + i) = make_float4(o[0], o[1], o[2], o[3]);
        if (mask) {
          uchar4 m;
          m.x = o[0] > 0.f, m.y = o[1] > 0.f, m.z = o[2] > 0.f, m.w = o[3] > 0.f;  // SAM's threshold 0.0
          *reinterpret_cast<uchar4*>(mask + i) = m;
        }
      } else {
#pragma unroll
        for (int j = 0; j < C; ++j)
          if (x0 + j < ow) {
            if (out) out[i + j] = o[j];
            if (mask) mask[i + j] = o[j] > 0.f ? 1 : 0;
          }
      }
    }
  }
}

}  // namespace

void upscale_crop_resize(DType in_dt, const void* low, int64_t N, int64_t mh, int64_t mw, int64_t S, int64_t input_h,
                         int64_t input_w, float* logits, uint8_t* mask, int64_t oh, int64_t ow) {
  if (N == 0 || oh == 0 || ow == 0) return;
  VITRT_CHECK(mh >= 1 && mw >= 1 && S >= 1 && input_h >= 1 && input_w >= 1 && input_h <= S && input_w <= S,
              InvalidArgument, "cuda upscale_crop_resize: bad sizes");
  VITRT_CHECK(S < (int64_t{1} << 24) && oh <= int64_t{65535} * kPostRows && ow < (int64_t{1} << 31), InvalidArgument,
              "cuda upscale_crop_resize: sizes too large");
  dispatch_float(in_dt, "upscale_crop_resize", [&](auto tag) {
    using TI = decltype(tag);
    constexpr int64_t cols_per_block = int64_t{kPostThreads} * kPostCols;
    const dim3 grid(static_cast<unsigned>((ow + cols_per_block - 1) / cols_per_block),
                    static_cast<unsigned>((oh + kPostRows - 1) / kPostRows),
                    static_cast<unsigned>(std::min<int64_t>(N, 65535)));
    upscale_crop_resize_kernel<TI><<<grid, kPostThreads, 0, current_stream()>>>(
        static_cast<const TI*>(low), N, static_cast<int>(mh), static_cast<int>(mw), static_cast<int>(S),
        static_cast<int>(input_h), static_cast<int>(input_w), logits, mask, static_cast<int>(oh),
        static_cast<int>(ow));
  });
  check_launch("upscale_crop_resize kernel");
}

void interpolate_linear_rows(DType dt, const void* x, void* out, int64_t L, int64_t C, int64_t new_len) {
  if (new_len == 0 || C == 0) return;
  VITRT_CHECK(L >= 1, InvalidArgument, "cuda interpolate_linear_rows: empty input");
  dispatch_float(dt, "interpolate_linear_rows", [&](auto tag) {
    using T = decltype(tag);
    linear_rows_kernel<T><<<dev::blocks_for(new_len * C), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<T*>(out), L, C, new_len);
  });
  check_launch("interpolate_linear_rows kernel");
}

void resize_bilinear(DType in_dt, const void* x, int64_t N, int64_t H, int64_t W, int64_t plane_stride,
                     int64_t row_stride, DType out_dt, void* out, int64_t oh, int64_t ow, uint8_t* mask) {
  const int64_t n = N * oh * ow;
  if (n == 0) return;
  VITRT_CHECK(H >= 1 && W >= 1, InvalidArgument, "cuda resize_bilinear: empty input planes");
  VITRT_CHECK(H < (int64_t{1} << 31) && W < (int64_t{1} << 31) && oh < (int64_t{1} << 31) && ow < (int64_t{1} << 31),
              InvalidArgument, "cuda resize_bilinear: planes of 2^31 rows or columns or more");
  dispatch_float(in_dt, "resize_bilinear", [&](auto ti) {
    dispatch_float(out_dt, "resize_bilinear", [&](auto to) {
      using TI = decltype(ti);
      using TO = decltype(to);
      const dim3 grid(static_cast<unsigned>((ow + 127) / 128), static_cast<unsigned>(std::min<int64_t>(oh, 65535)),
                      static_cast<unsigned>(std::min<int64_t>(N, 65535)));
      bilinear_kernel<TI, TO><<<grid, 128, 0, current_stream()>>>(
          static_cast<const TI*>(x), N, static_cast<int>(H), static_cast<int>(W), plane_stride, row_stride,
          static_cast<TO*>(out), static_cast<int>(oh), static_cast<int>(ow), mask);
    });
  });
  check_launch("resize_bilinear kernel");
}

}  // namespace vitrt::cuda
