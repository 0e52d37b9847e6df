#include "ops/cuda/interpolate.h"

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

template <class TI, class TO>
__global__ void bilinear_kernel(const TI* x, int64_t N, int64_t H, int64_t W, int64_t plane_stride,
                                int64_t row_stride, TO* out, int64_t oh, int64_t ow, uint8_t* mask) {
  const int64_t n = N * oh * ow;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int64_t c = i % ow, r = i / ow;
    const int64_t y = r % oh, p = r / oh;
    const Tap v = linear_tap(H, oh, y);
    const Tap h = linear_tap(W, ow, c);
    const TI* r0 = x + p * plane_stride + v.i0 * row_stride;
    const TI* r1 = x + p * plane_stride + v.i1 * row_stride;
    // Width inside, height outside, as the CPU kernel.
    const float top = lerp2(h.w0, to_f(r0[h.i0]), h.w1, to_f(r0[h.i1]));
    const float bot = lerp2(h.w0, to_f(r1[h.i0]), h.w1, to_f(r1[h.i1]));
    const float o = lerp2(v.w0, top, v.w1, bot);
    if (out) out[i] = from_f<TO>(o);
    if (mask) mask[i] = o > 0.f ? 1 : 0;  // SAM's mask_threshold = 0.0, on the fp32 value
  }
}

}  // namespace

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
  dispatch_float(in_dt, "resize_bilinear", [&](auto ti) {
    dispatch_float(out_dt, "resize_bilinear", [&](auto to) {
      using TI = decltype(ti);
      using TO = decltype(to);
      bilinear_kernel<TI, TO><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
          static_cast<const TI*>(x), N, H, W, plane_stride, row_stride, static_cast<TO*>(out), oh, ow, mask);
    });
  });
  check_launch("resize_bilinear kernel");
}

}  // namespace vitrt::cuda
