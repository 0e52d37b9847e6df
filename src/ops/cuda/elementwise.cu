#include "ops/cuda/elementwise.h"

#include "ops/cuda/gemm.h"
#include "ops/cuda/runtime.h"

#include <cstdint>
#include <type_traits>

namespace vitrt::cuda {

void check_launch(const char* what) { check(cudaGetLastError(), what); }

namespace {

using dev::from_f;
using dev::gstride;
using dev::gtid;
using dev::to_f;

using dev::gelu_erf;
__device__ __forceinline__ float relu_f(float v) { return v < 0.f ? 0.f : v; }  // NaN passes, as on the CPU

template <class T>
__global__ void add_kernel(const T* x, const T* y, T* out, int64_t n, int64_t ny) {
  for (int64_t i = gtid(); i < n; i += gstride()) out[i] = from_f<T>(to_f(x[i]) + to_f(y[ny == n ? i : i % ny]));
}

// 16 bytes per thread and step (8 bf16 / 4 fp32), one 64-bit modulo per vector instead of per
// element: the decoder's k = keys + key_pe over [prompts, 4096, 256] and its residual adds ran at
// ~1 TB/s with the scalar kernel above.
template <class T>
using Vec16 = dev::VecN<T, 16 / sizeof(T)>;

template <class T>
__global__ void add_vec16_kernel(const Vec16<T>* x, const Vec16<T>* y, Vec16<T>* out, int64_t nv, int64_t nyv) {
  for (int64_t i = gtid(); i < nv; i += gstride()) {
    const Vec16<T> a = x[i], b = y[nyv == nv ? i : i % nyv];
    Vec16<T> o;
#pragma unroll
    for (int j = 0; j < 16 / static_cast<int>(sizeof(T)); ++j) o.v[j] = from_f<T>(to_f(a.v[j]) + to_f(b.v[j]));
    out[i] = o;
  }
}

template <class T>
__global__ void scale_kernel(T* x, int64_t n, float s) {
  for (int64_t i = gtid(); i < n; i += gstride()) x[i] = from_f<T>(to_f(x[i]) * s);
}

template <class T>
__global__ void gelu_kernel(T* x, int64_t n) {
  for (int64_t i = gtid(); i < n; i += gstride()) x[i] = from_f<T>(dev::gelu_for<T>(to_f(x[i])));
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
    if (act == Act::GELU) v = gelu_erf(v);
    else if (act == Act::ReLU) v = relu_f(v);
    if (res) v += to_f(res[i]);
    y[i] = from_f<T>(v);
  }
}

// gemm_simple: 16 x 16 output tile per block, K in steps of 16 through shared memory, fp32
// accumulation; epilogue in cuBLASLt's order: alpha * acc + C + bias, then ReLU. A and B are T,
// C, D and bias TD (T itself, or float for bf16 inputs with an fp32 output).
constexpr int kTile = 16;
struct SimpleGemm {
  int64_t M, N, K, lda, ldb, ldd, sa, sb, sd, sc;
  bool trans_b, relu, gelu_tanh;
  float alpha;
};

template <class T, class TD>
__global__ void gemm_simple_kernel(const T* a, const T* b, const TD* c, const TD* bias, TD* d, SimpleGemm p) {
  __shared__ float As[kTile][kTile + 1], Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t z = blockIdx.z;
  const int64_t m = static_cast<int64_t>(blockIdx.y) * kTile + ty;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  a += z * p.sa;
  b += z * p.sb;
  d += z * p.sd;
  if (c) c += z * p.sc;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < p.K; k0 += kTile) {
    // As[ty][tx] = A[m, k0 + tx]; Bs[ty][tx] = B(k0 + ty, n) = op(B)[k, n].
    const int64_t ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (m < p.M && ka < p.K) ? to_f(a[m * p.lda + ka]) : 0.f;
    float bv = 0.f;
    if (n < p.N && kb < p.K) bv = to_f(p.trans_b ? b[n * p.ldb + kb] : b[kb * p.ldb + n]);
    Bs[ty][tx] = bv;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
    __syncthreads();
  }
  if (m < p.M && n < p.N) {
    float v = p.alpha * acc;
    if (c) v += to_f(c[m * p.ldd + n]);
    if (bias) v += to_f(bias[n]);
    if (p.relu) v = relu_f(v);
    if (p.gelu_tanh) v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    d[m * p.ldd + n] = from_f<TD>(v);
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
    constexpr int V = 16 / sizeof(T);
    auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (n % V == 0 && ny % V == 0 && a16(x) && a16(y) && a16(out)) {
      add_vec16_kernel<T><<<dev::blocks_for(n / V), dev::kThreads, 0, current_stream()>>>(
          static_cast<const Vec16<T>*>(x), static_cast<const Vec16<T>*>(y), static_cast<Vec16<T>*>(out), n / V,
          ny / V);
      return;
    }
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

void gemm_simple(const GemmArgs& g) {
  VITRT_CHECK(g.M >= 0 && g.N >= 0 && g.K >= 0 && g.batch >= 1, InvalidArgument, "cuda::gemm_simple: bad sizes");
  if (g.M == 0 || g.N == 0) return;
  VITRT_CHECK(g.bias == nullptr || g.batch == 1, InvalidArgument, "cuda::gemm_simple: bias with a batch");
  SimpleGemm p;
  p.M = g.M, p.N = g.N, p.K = g.K;
  p.lda = g.lda ? g.lda : g.K;
  p.ldb = g.ldb ? g.ldb : (g.trans_b ? g.K : g.N);
  p.ldd = g.ldd ? g.ldd : g.N;
  const bool batched = g.batch > 1;
  p.sa = batched ? g.stride_a : 0, p.sb = batched ? g.stride_b : 0, p.sd = batched ? g.stride_d : 0;
  p.sc = batched ? (g.stride_c < 0 ? g.stride_d : g.stride_c) : 0;
  p.trans_b = g.trans_b, p.relu = g.relu, p.gelu_tanh = g.gelu_tanh, p.alpha = g.alpha;
  const int64_t gx = (g.N + kTile - 1) / kTile, gy = (g.M + kTile - 1) / kTile;
  VITRT_CHECK(gx <= INT32_MAX && gy <= 65535 && g.batch <= 65535, InvalidArgument,
              "cuda::gemm_simple: problem too large for the fallback kernel (M=", g.M, " N=", g.N, " batch=", g.batch,
              ")");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(g.batch));
  const dim3 block(kTile, kTile);
  const DType od = g.out_dtype();
  VITRT_CHECK(od == g.dtype || (g.dtype == DType::BF16 && od == DType::F32), InvalidArgument, "cuda::gemm_simple: ",
              dtype_name(g.dtype), " inputs with ", dtype_name(od),
              " output are not supported (same dtype, or bfloat16 -> float32)");
  dispatch_float(g.dtype, "gemm_simple", [&](auto tag) {
    dispatch_float(od, "gemm_simple", [&](auto dtag) {
      using T = decltype(tag);
      using TD = decltype(dtag);
      if constexpr (std::is_same_v<T, TD> || std::is_same_v<TD, float>) {
        gemm_simple_kernel<T, TD><<<grid, block, 0, current_stream()>>>(
            static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<const TD*>(g.c),
            static_cast<const TD*>(g.bias), static_cast<TD*>(g.d), p);
      }
    });
  });
  check_launch("gemm_simple kernel");
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
