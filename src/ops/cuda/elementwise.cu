#include "ops/cuda/elementwise.h"

#include "ops/cuda/runtime.h"

namespace vitrt::cuda {

void check_launch(const char* what) { check(cudaGetLastError(), what); }

namespace {

using dev::from_f;
using dev::gstride;
using dev::gtid;
using dev::to_f;

__device__ __forceinline__ float gelu_f(float v) {
  // Exact GELU as torch.nn.GELU() / oneDNN gelu_erf: 0.5 x (1 + erf(x / sqrt 2)).
  return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
}
__device__ __forceinline__ float relu_f(float v) { return v < 0.f ? 0.f : v; }  // NaN passes, as on the CPU

template <class T>
__global__ void add_kernel(const T* x, const T* y, T* out, int64_t n, int64_t ny) {
  for (int64_t i = gtid(); i < n; i += gstride()) out[i] = from_f<T>(to_f(x[i]) + to_f(y[ny == n ? i : i % ny]));
}

template <class T>
__global__ void scale_kernel(T* x, int64_t n, float s) {
  for (int64_t i = gtid(); i < n; i += gstride()) x[i] = from_f<T>(to_f(x[i]) * s);
}

template <class T>
__global__ void gelu_kernel(T* x, int64_t n) {
  for (int64_t i = gtid(); i < n; i += gstride()) x[i] = from_f<T>(gelu_f(to_f(x[i])));
}

template <class T>
__global__ void relu_kernel(T* x, int64_t n) {
  for (int64_t i = gtid(); i < n; i += gstride()) x[i] = from_f<T>(relu_f(to_f(x[i])));
}

template <class T>
__global__ void bias_act_residual_kernel(T* y, int64_t rows, int64_t cols, const T* bias, Act act, const T* res) {
  const int64_t n = rows * cols;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    float v = to_f(y[i]);
    if (bias) v += to_f(bias[i % cols]);
    if (act == Act::GELU) v = gelu_f(v);
    else if (act == Act::ReLU) v = relu_f(v);
    if (res) v += to_f(res[i]);
    y[i] = from_f<T>(v);
  }
}

template <class TI, class TO>
__global__ void cast_kernel(const TI* x, TO* y, int64_t n) {
  for (int64_t i = gtid(); i < n; i += gstride()) y[i] = from_f<TO>(to_f(x[i]));
}

}  // namespace

void add_broadcast(DType dt, const void* x, const void* y, void* out, int64_t n, int64_t ny) {
  if (n == 0) return;
  VITRT_CHECK(ny > 0 && n % ny == 0, InvalidArgument, "cuda add: ", ny, " elements do not broadcast over ", n);
  dispatch_float(dt, "add", [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out), n, ny);
  });
  check_launch("add kernel");
}

void scale(DType dt, void* x, int64_t n, float s) {
  if (n == 0) return;
  dispatch_float(dt, "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(static_cast<T*>(x), n, s);
  });
  check_launch("scale kernel");
}

void gelu(DType dt, void* x, int64_t n) {
  if (n == 0) return;
  dispatch_float(dt, "gelu", [&](auto tag) {
    using T = decltype(tag);
    gelu_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(static_cast<T*>(x), n);
  });
  check_launch("gelu kernel");
}

void relu(DType dt, void* x, int64_t n) {
  if (n == 0) return;
  dispatch_float(dt, "relu", [&](auto tag) {
    using T = decltype(tag);
    relu_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(static_cast<T*>(x), n);
  });
  check_launch("relu kernel");
}

void bias_act_residual(DType dt, void* y, int64_t rows, int64_t cols, const void* bias, Act act,
                       const void* residual) {
  if (rows == 0 || cols == 0) return;
  if (!bias && act == Act::None && !residual) return;
  dispatch_float(dt, "bias_act_residual", [&](auto tag) {
    using T = decltype(tag);
    bias_act_residual_kernel<T><<<dev::blocks_for(rows * cols), dev::kThreads, 0, current_stream()>>>(
        static_cast<T*>(y), rows, cols, static_cast<const T*>(bias), act, static_cast<const T*>(residual));
  });
  check_launch("bias_act_residual kernel");
}

void cast(DType from, const void* x, DType to, void* y, int64_t n) {
  if (n == 0) return;
  if (from == to) {
    check(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * dtype_size(from), cudaMemcpyDeviceToDevice, current_stream()),
          "cast copy");
    return;
  }
  dispatch_float(from, "cast", [&](auto ti) {
    dispatch_float(to, "cast", [&](auto to_tag) {
      using TI = decltype(ti);
      using TO = decltype(to_tag);
      cast_kernel<TI, TO><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(static_cast<const TI*>(x),
                                                                                     static_cast<TO*>(y), n);
    });
  });
  check_launch("cast kernel");
}

}  // namespace vitrt::cuda
