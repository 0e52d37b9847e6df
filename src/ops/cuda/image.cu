#include "ops/cuda/image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/device_memory.h"
#include "ops/cpu/resize_antialias.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using dev::gstride;
using dev::gtid;

// ---- Host: Pillow's coefficients, from the CPU implementation itself (the same weights) ----
constexpr int kPrecisionBits = cpu::kResizePrecisionBits;
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
using Coefficients = cpu::ResizeCoefficients;

// Coefficients on the device: one int32 buffer [first | count | weights].
struct DeviceCoefficients {
  std::shared_ptr<void> mem;
  const int* first = nullptr;
  const int* count = nullptr;
  const int32_t* weights = nullptr;
  int ksize = 0;
};

DeviceCoefficients upload(const Coefficients& c) {
  const size_t n = c.first.size();
  std::vector<int32_t> packed;
  packed.reserve(2 * n + c.weights.size());
  packed.insert(packed.end(), c.first.begin(), c.first.end());
  packed.insert(packed.end(), c.count.begin(), c.count.end());
  packed.insert(packed.end(), c.weights.begin(), c.weights.end());
  DeviceCoefficients d;
  const size_t bytes = packed.size() * sizeof(int32_t);
  d.mem = devmem::cuda_alloc(bytes);
  devmem::copy(d.mem.get(), Device::CUDA, packed.data(), Device::CPU, bytes);
  const int32_t* base = static_cast<const int32_t*>(d.mem.get());
  d.first = base;
  d.count = base + n;
  d.weights = base + 2 * n;
  d.ksize = c.ksize;
  return d;
}

// ---- Device: the fixed-point passes ----

__device__ __forceinline__ uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;  // arithmetic shift, as Pillow
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Rows [0, rows) of `in` (in_w wide) resampled along x into `out` (out_w wide).
__global__ void horizontal_kernel(const uint8_t* in, int in_w, int rows, int cn, const int* first, const int* count,
                                  const int32_t* weights, int ksize, uint8_t* out, int out_w) {
  const int64_t n = static_cast<int64_t>(rows) * out_w * cn;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int c = static_cast<int>(i % cn);
    const int64_t r = i / cn;
    const int xx = static_cast<int>(r % out_w);
    const int64_t y = r / out_w;
    const int32_t* k = weights + static_cast<int64_t>(xx) * ksize;
    const uint8_t* p = in + (y * in_w + first[xx]) * cn + c;
    int32_t acc = kHalf;
    for (int x = 0; x < count[xx]; ++x) acc += static_cast<int32_t>(p[x * cn]) * k[x];
    out[i] = clip8(acc);
  }
}

// Resampled along y; `in` holds source rows from `first_row` on, each `stride` bytes (w * cn).
__global__ void vertical_kernel(const uint8_t* in, int64_t stride, int first_row, int out_h, const int* first,
                                const int* count, const int32_t* weights, int ksize, uint8_t* out) {
  const int64_t n = static_cast<int64_t>(out_h) * stride;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int yy = static_cast<int>(i / stride);
    const int64_t col = i % stride;
    const int32_t* k = weights + static_cast<int64_t>(yy) * ksize;
    const uint8_t* base = in + static_cast<int64_t>(first[yy] - first_row) * stride + col;
    int32_t acc = kHalf;
    for (int y = 0; y < count[yy]; ++y) acc += static_cast<int32_t>(base[y * stride]) * k[y];
    out[i] = clip8(acc);
  }
}

void horizontal_pass(const uint8_t* in, int in_w, int rows, int cn, const DeviceCoefficients& co, uint8_t* out,
                     int out_w) {
  const int64_t n = static_cast<int64_t>(rows) * out_w * cn;
  if (n == 0) return;
  horizontal_kernel<<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(in, in_w, rows, cn, co.first, co.count,
                                                                               co.weights, co.ksize, out, out_w);
  check_launch("resize horizontal pass");
}

void vertical_pass(const uint8_t* in, int w, int first_row, int cn, const DeviceCoefficients& co, int out_h,
                   uint8_t* out) {
  const int64_t stride = static_cast<int64_t>(w) * cn;
  if (stride == 0 || out_h == 0) return;
  vertical_kernel<<<dev::blocks_for(out_h * stride), dev::kThreads, 0, current_stream()>>>(
      in, stride, first_row, out_h, co.first, co.count, co.weights, co.ksize, out);
  check_launch("resize vertical pass");
}

struct Norm {  // per-channel constants, by value in the kernel parameters
  float mean[4], std[4];
};

template <class T>
__global__ void normalize_pad_kernel(const uint8_t* img, int h, int w, int cn, int S, Norm nm, T* out) {
  const int64_t n = static_cast<int64_t>(S) * S * cn;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int c = static_cast<int>(i % cn);
    const int64_t r = i / cn;
    const int x = static_cast<int>(r % S), y = static_cast<int>(r / S);
    float v = 0.f;
    if (y < h && x < w) {
      // (float(v) - mean) / std, each operation rounded as the CPU's float expression.
      const float px = static_cast<float>(img[(static_cast<int64_t>(y) * w + x) * cn + c]);
      v = __fdiv_rn(__fsub_rn(px, nm.mean[c]), nm.std[c]);
    }
    out[i] = dev::from_f<T>(v);
  }
}

}  // namespace

void resize_antialias_u8(const uint8_t* src, int src_w, int src_h, int channels, uint8_t* dst, int dst_w, int dst_h) {
  VITRT_CHECK(src_w > 0 && src_h > 0 && dst_w > 0 && dst_h > 0, InvalidArgument, "cuda resize: empty image (", src_w,
              "x", src_h, " -> ", dst_w, "x", dst_h, ")");
  VITRT_CHECK(channels >= 1 && channels <= 4, InvalidArgument, "cuda resize: ", channels,
              " channels (1 to 4 supported)");
  const int cn = channels;
  const bool need_h = dst_w != src_w;
  const bool need_v = dst_h != src_h;
  if (!need_h && !need_v) {
    check(cudaMemcpyAsync(dst, src, static_cast<size_t>(src_w) * src_h * cn, cudaMemcpyDeviceToDevice,
                          current_stream()),
          "resize copy");
    return;
  }
  if (!need_h) {
    const DeviceCoefficients vert = upload(cpu::resize_coefficients(src_h, dst_h));
    vertical_pass(src, src_w, 0, cn, vert, dst_h, dst);
    return;
  }
  if (!need_v) {
    const DeviceCoefficients horiz = upload(cpu::resize_coefficients(src_w, dst_w));
    horizontal_pass(src, src_w, src_h, cn, horiz, dst, dst_w);
    return;
  }
  const Coefficients horiz_h = cpu::resize_coefficients(src_w, dst_w);
  const Coefficients vert_h = cpu::resize_coefficients(src_h, dst_h);
  const DeviceCoefficients horiz = upload(horiz_h);
  const DeviceCoefficients vert = upload(vert_h);
  // Pass order and intermediate rows exactly as the CPU (Pillow 13) code: vertical first when
  // the height shrinks by more than twice as many pixels as the width does.
  if (dst_h < src_h && src_h - dst_h > 2 * (src_w - dst_w)) {
    auto temp = devmem::cuda_alloc(static_cast<size_t>(dst_h) * src_w * cn);
    uint8_t* t = static_cast<uint8_t*>(temp.get());
    vertical_pass(src, src_w, 0, cn, vert, dst_h, t);
    horizontal_pass(t, src_w, dst_h, cn, horiz, dst, dst_w);
  } else {
    const int row0 = vert_h.first.front();
    const int row1 = vert_h.first.back() + vert_h.count.back();
    auto temp = devmem::cuda_alloc(static_cast<size_t>(row1 - row0) * dst_w * cn);
    uint8_t* t = static_cast<uint8_t*>(temp.get());
    horizontal_pass(src + static_cast<size_t>(row0) * src_w * cn, src_w, row1 - row0, cn, horiz, t, dst_w);
    vertical_pass(t, dst_w, row0, cn, vert, dst_h, dst);
  }
  // The temporaries and coefficient buffers are released stream-ordered (cudaFreeAsync on the
  // current stream), after the kernels that read them.
}

void normalize_pad(const uint8_t* img, int h, int w, int channels, int S, const float* mean, const float* std,
                   DType out_dt, void* out) {
  VITRT_CHECK(channels >= 1 && channels <= 4 && h >= 0 && w >= 0 && h <= S && w <= S && S >= 0, InvalidArgument,
              "cuda normalize_pad: image ", w, "x", h, "x", channels, " does not fit ", S, "x", S);
  const int64_t n = static_cast<int64_t>(S) * S * channels;
  if (n == 0) return;
  Norm nm{};
  for (int c = 0; c < channels; ++c) nm.mean[c] = mean[c], nm.std[c] = std[c];
  dispatch_float(out_dt, "normalize_pad", [&](auto tag) {
    using T = decltype(tag);
    normalize_pad_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(img, h, w, channels, S, nm,
                                                                                        static_cast<T*>(out));
  });
  check_launch("normalize_pad kernel");
}

}  // namespace vitrt::cuda
