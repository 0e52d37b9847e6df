#include "ops/cuda/layout.h"
#include "ops/cuda/im2col_taps.h"
#include "ops/cuda/permute_plan.h"

#include "ops/cuda/elementwise.h"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using dev::gstride;
using dev::gtid;

constexpr int kMaxDims = 6;

// Output dims (leading ones padded with size 1) and, for each, the input stride it walks.
struct PermuteParams {
  int64_t out_shape[kMaxDims];
  int64_t in_stride[kMaxDims];
};

template <class T>
__global__ void permute_kernel(const T* x, T* out, int64_t total, PermuteParams p) {
  for (int64_t i = gtid(); i < total; i += gstride()) {
    int64_t rem = i, off = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {  // constant indices: the params stay in registers
      off += (rem % p.out_shape[d]) * p.in_stride[d];
      rem /= p.out_shape[d];
    }
    out[i] = x[off];
  }
}

// out[b] = x[b]^T for B matrices of R x C: 32 x 32 tiles through shared memory, so that both the
// reads (along C) and the writes (along R) are whole runs of a row. (The general kernel above reads
// with a stride of C elements here: SAM's final NHWC -> NCHW permute of the embeddings, [32, 4096,
// 256], took 0.42 ms, ~6x the copy time.)
constexpr int kTransposeTile = 32, kTransposeRows = 8;  // block: 32 x 8 threads
template <class T>
__global__ void transpose_kernel(const T* x, T* out, int64_t B, int64_t R, int64_t C) {
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];  // +1: the column reads hit distinct banks
  const int64_t tiles_c = (C + kTransposeTile - 1) / kTransposeTile, tiles_r = (R + kTransposeTile - 1) / kTransposeTile;
  const int64_t per_matrix = tiles_r * tiles_c;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < B * per_matrix; t += gridDim.x) {
    const int64_t b = t / per_matrix, rem = t - b * per_matrix, r0 = rem / tiles_c * kTransposeTile,
                  c0 = rem % tiles_c * kTransposeTile;
    const T* xb = x + b * R * C;
    T* ob = out + b * R * C;
    for (int i = ty; i < kTransposeTile; i += kTransposeRows)
      if (r0 + i < R && c0 + tx < C) tile[i][tx] = xb[(r0 + i) * C + c0 + tx];
    __syncthreads();
    for (int i = ty; i < kTransposeTile; i += kTransposeRows)
      if (c0 + i < C && r0 + tx < R) ob[(c0 + i) * R + r0 + tx] = tile[tx][i];
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

template <class T>
__global__ void copy_columns_kernel(const T* x, T* out, int64_t outer, int64_t cols, int64_t total_cols,
                                    int64_t offset) {
  const int64_t n = outer * cols;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int64_t o = i / cols, c = i % cols;
    out[o * total_cols + offset + c] = x[i];
  }
}

template <class T>
__global__ void window_partition_kernel(const T* x, T* out, int64_t B, int64_t H, int64_t W, int64_t C, int64_t ws,
                                        int64_t nh, int64_t nw) {
  const int64_t n = B * nh * nw * ws * ws * C;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    int64_t r = i;
    const int64_t c = r % C;
    r /= C;
    const int64_t px = r % ws;
    r /= ws;
    const int64_t py = r % ws;
    const int64_t win = r / ws;
    const int64_t wx = win % nw, wy = (win / nw) % nh, b = win / (nw * nh);
    const int64_t y = wy * ws + py, xx = wx * ws + px;
    out[i] = (y < H && xx < W) ? x[((b * H + y) * W + xx) * C + c] : T(0);
  }
}

template <class T>
__global__ void window_unpartition_kernel(const T* win, T* out, int64_t B, int64_t H, int64_t W, int64_t C,
                                          int64_t ws, int64_t nh, int64_t nw) {
  const int64_t n = B * H * W * C;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    int64_t r = i;
    const int64_t c = r % C;
    r /= C;
    const int64_t xx = r % W;
    r /= W;
    const int64_t y = r % H, b = r / H;
    const int64_t wy = y / ws, py = y % ws, wx = xx / ws, px = xx % ws;
    out[i] = win[((((b * nh + wy) * nw + wx) * ws + py) * ws + px) * C + c];
  }
}

template <class T>
__global__ void im2col_kernel(const T* x, T* col, int64_t B, int64_t H, int64_t W, int64_t Cin, int64_t kh,
                              int64_t kw, int64_t stride, int64_t pad, int64_t Ho, int64_t Wo) {
  const int64_t K = Cin * kh * kw;
  const int64_t n = B * Ho * Wo * K;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    const int64_t k = i % K, m = i / K;
    const int64_t kx = k % kw, ky = (k / kw) % kh, ci = k / (kw * kh);
    const int64_t ox = m % Wo, oy = (m / Wo) % Ho, b = m / (Wo * Ho);
    const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    col[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[((b * H + iy) * W + ix) * Cin + ci] : T(0);
  }
}

// Tap-major im2col (see im2col_taps.h): V is the type moved per step (a 16-byte vector when the
// channels allow, else one element).
template <class V>
__global__ void im2col_taps_kernel(const V* x, V* col, Im2colTaps g) {
  const int64_t n = g.steps();
  for (int64_t i = gtid(); i < n; i += gstride()) {
    int64_t d = 0, s = 0;
    V v{};
    if (g.at(i, &d, &s)) v = x[s / g.vec];
    col[d / g.vec] = v;
  }
}

// The same columns without padding, one contiguous kernel-row run at a time (im2col_taps.h).
template <class V>
__global__ void im2col_rows_kernel(const V* x, V* col, Im2colRows g) {
  const int64_t n = g.steps();
  for (int64_t i = gtid(); i < n; i += gstride()) {
    int64_t d = 0, s = 0;
    g.at(i, &d, &s);
    col[d / g.vec] = x[s / g.vec];
  }
}

// One thread per (input pixel, output channel): reads that pixel's 4 GEMM columns of the channel
// (contiguous: column co*4 + ky*2 + kx) and writes them to its 2x2 output block (for a fixed tap,
// consecutive threads write consecutive channels). Index type I: 32-bit when the sizes allow (the
// first version decomposed every output index with three 64-bit divisions and read with a stride of
// 4 elements).
template <class T, class I>
__global__ void convt_scatter_kernel(const T* y, const T* bias, T* out, I B, I H, I W, I Cout, bool gelu) {
  const I n = B * H * W * Cout;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I co = i % Cout, m = i / Cout;
    const I ix = m % W, r = m / W;
    const I iy = r % H, b = r / H;
    const T* src = y + static_cast<int64_t>(m) * Cout * 4 + static_cast<int64_t>(co) * 4;
    const float add = bias ? dev::to_f(bias[co]) : 0.f;
    const int64_t Wo = 2 * static_cast<int64_t>(W);
    const int64_t top = ((static_cast<int64_t>(b) * 2 * H + 2 * iy) * Wo + 2 * ix) * Cout + co;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t o = top + (k / 2) * Wo * Cout + (k % 2) * Cout;
      const float v = dev::to_f(src[k]) + add;
      out[o] = dev::from_f<T>(gelu ? dev::gelu_for<T>(v) : v);
    }
  }
}

// Calls f(T{}) with an unsigned integer type of the element size: copies need no arithmetic.
template <class F>
void dispatch_size(size_t elem, const char* op, F&& f) {
  switch (elem) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: throw InvalidArgument(detail::concat("cuda ", op, ": element size ", elem, " is not supported"));
  }
}

}  // namespace

void permute(size_t elem_size, const void* x, void* out, const std::vector<int64_t>& shape,
             const std::vector<int>& perm) {
  const int nd = static_cast<int>(shape.size());
  VITRT_CHECK(nd <= kMaxDims && perm.size() == shape.size(), InvalidArgument, "cuda permute: ", nd,
              " dims (at most ", kMaxDims, ") with ", perm.size(), " axes");
  const int64_t total = shape_numel(shape);
  if (total == 0) return;
  // A batch of matrix transposes ([B,] R, C -> [B,] C, R after merging): the tiled kernel.
  const MergedPermutation merged = merge_permutation(shape, perm);
  const std::vector<int64_t>& ms = merged.shape;
  const std::vector<int>& mp = merged.perm;
  const bool transpose2 = mp.size() == 2 && mp[0] == 1, transpose3 = mp.size() == 3 && mp == std::vector<int>{0, 2, 1};
  if (transpose2 || transpose3) {
    const int64_t B = transpose3 ? ms[0] : 1, R = ms[mp.size() - 2], C = ms[mp.size() - 1];
    const int64_t tiles = B * ((R + kTransposeTile - 1) / kTransposeTile) * ((C + kTransposeTile - 1) / kTransposeTile);
    const int blocks = static_cast<int>(std::min<int64_t>(tiles, int64_t{1} << 20));
    dispatch_size(elem_size, "permute", [&](auto tag) {
      using T = decltype(tag);
      transpose_kernel<T><<<blocks, dim3(kTransposeTile, kTransposeRows), 0, current_stream()>>>(
          static_cast<const T*>(x), static_cast<T*>(out), B, R, C);
    });
    check_launch("transpose kernel");
    return;
  }
  std::vector<int64_t> in_stride(nd);
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= shape[d];
  }
  PermuteParams p;
  const int lead = kMaxDims - nd;
  for (int d = 0; d < kMaxDims; ++d) {
    if (d < lead) {
      p.out_shape[d] = 1;
      p.in_stride[d] = 0;
    } else {
      p.out_shape[d] = shape[perm[d - lead]];
      p.in_stride[d] = in_stride[perm[d - lead]];
    }
  }
  dispatch_size(elem_size, "permute", [&](auto tag) {
    using T = decltype(tag);
    permute_kernel<T><<<dev::blocks_for(total), dev::kThreads, 0, current_stream()>>>(static_cast<const T*>(x),
                                                                                     static_cast<T*>(out), total, p);
  });
  check_launch("permute kernel");
}

void copy_columns(size_t elem_size, const void* x, void* out, int64_t outer, int64_t cols, int64_t total_cols,
                  int64_t col_offset) {
  if (outer == 0 || cols == 0) return;
  // Copies move bytes: in the widest unit (16, 8, 4 bytes) that divides every row length and offset
  // and both addresses, not element by element (the ViT's [B, 196, 768] bf16 cat ran at ~0.7 TB/s
  // in 2-byte units, each with a 64-bit division).
  const auto bytes = [&](int64_t n) { return static_cast<uint64_t>(n) * elem_size; };
  const uint64_t all = bytes(cols) | bytes(total_cols) | bytes(col_offset) | reinterpret_cast<uintptr_t>(x) |
                       reinterpret_cast<uintptr_t>(out);
  size_t unit = elem_size;
  for (size_t u : {size_t{16}, size_t{8}, size_t{4}})
    if (u > unit && all % u == 0) {
      unit = u;
      break;
    }
  const int64_t k = static_cast<int64_t>(unit / elem_size);
  const auto launch = [&](auto tag) {
    using T = decltype(tag);
    copy_columns_kernel<T><<<dev::blocks_for(outer * (cols / k)), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<T*>(out), outer, cols / k, total_cols / k, col_offset / k);
  };
  if (unit == 16) launch(uint4{});
  else dispatch_size(unit, "cat", launch);
  check_launch("cat kernel");
}

void window_partition(size_t elem_size, const void* x, void* out, int64_t B, int64_t H, int64_t W, int64_t C,
                      int64_t ws) {
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws;
  const int64_t n = B * nh * nw * ws * ws * C;
  if (n == 0) return;
  dispatch_size(elem_size, "window_partition", [&](auto tag) {
    using T = decltype(tag);
    window_partition_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<T*>(out), B, H, W, C, ws, nh, nw);
  });
  check_launch("window_partition kernel");
}

void window_unpartition(size_t elem_size, const void* windows, void* out, int64_t B, int64_t H, int64_t W, int64_t C,
                        int64_t ws) {
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws;
  const int64_t n = B * H * W * C;
  if (n == 0) return;
  dispatch_size(elem_size, "window_unpartition", [&](auto tag) {
    using T = decltype(tag);
    window_unpartition_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(windows), static_cast<T*>(out), B, H, W, C, ws, nh, nw);
  });
  check_launch("window_unpartition kernel");
}

void im2col_nhwc(size_t elem_size, const void* x, void* col, int64_t B, int64_t H, int64_t W, int64_t Cin,
                 int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t Ho, int64_t Wo) {
  const int64_t n = B * Ho * Wo * Cin * kh * kw;
  if (n == 0) return;
  dispatch_size(elem_size, "im2col", [&](auto tag) {
    using T = decltype(tag);
    im2col_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<T*>(col), B, H, W, Cin, kh, kw, stride, pad, Ho, Wo);
  });
  check_launch("im2col kernel");
}

void im2col_nhwc_taps(size_t elem_size, const void* x, void* col, int64_t B, int64_t H, int64_t W, int64_t Cin,
                      int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t Ho, int64_t Wo) {
  Im2colTaps g{static_cast<int>(B), static_cast<int>(H), static_cast<int>(W), static_cast<int>(Cin),
               static_cast<int>(kh), static_cast<int>(kw), static_cast<int>(stride), static_cast<int>(pad),
               static_cast<int>(Ho), static_cast<int>(Wo), 1};
  const bool aligned = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(col) % 16 == 0);
  if (aligned && (Cin * static_cast<int64_t>(elem_size)) % 16 == 0) g.vec = static_cast<int>(16 / elem_size);
  // No padding and a channel count too small for 16-byte taps (the patch embedding's 3): whole
  // kernel rows, when every run start (column ky * kw * Cin; pixel ox * stride; row stride W * Cin)
  // is 16-byte aligned too.
  const int64_t es = static_cast<int64_t>(elem_size);
  if (g.vec == 1 && pad == 0 && aligned && (kw * Cin * es) % 16 == 0 && (stride * Cin * es) % 16 == 0 &&
      (W * Cin * es) % 16 == 0) {
    const Im2colRows r{g.B, g.H, g.W, g.Cin, g.kh, g.kw, g.stride, g.Ho, g.Wo, static_cast<int>(16 / elem_size)};
    const int64_t nr = r.steps();
    if (nr == 0) return;
    im2col_rows_kernel<uint4><<<dev::blocks_for(nr), dev::kThreads, 0, current_stream()>>>(
        static_cast<const uint4*>(x), static_cast<uint4*>(col), r);
    check_launch("im2col (kernel rows) kernel");
    return;
  }
  const int64_t n = g.steps();
  if (n == 0) return;
  if (g.vec > 1) {
    im2col_taps_kernel<uint4><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
        static_cast<const uint4*>(x), static_cast<uint4*>(col), g);
  } else {
    dispatch_size(elem_size, "im2col", [&](auto tag) {
      using T = decltype(tag);
      im2col_taps_kernel<T><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(static_cast<const T*>(x),
                                                                                       static_cast<T*>(col), g);
    });
  }
  check_launch("im2col (tap-major) kernel");
}

void conv_transpose2x2_scatter(DType dt, const void* y, const void* bias, void* out, int64_t B, int64_t H, int64_t W,
                               int64_t Cout, bool gelu) {
  const int64_t n = B * H * W * Cout;  // threads: one per input pixel and channel
  if (n == 0) return;
  dispatch_float(dt, "conv_transpose2x2", [&](auto tag) {
    using T = decltype(tag);
    const T* yt = static_cast<const T*>(y);
    const T* bt = static_cast<const T*>(bias);
    T* ot = static_cast<T*>(out);
    if (4 * n < (int64_t{1} << 31))
      convt_scatter_kernel<T, int32_t><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(
          yt, bt, ot, static_cast<int32_t>(B), static_cast<int32_t>(H), static_cast<int32_t>(W),
          static_cast<int32_t>(Cout), gelu);
    else
      convt_scatter_kernel<T, int64_t><<<dev::blocks_for(n), dev::kThreads, 0, current_stream()>>>(yt, bt, ot, B, H, W,
                                                                                                 Cout, gelu);
  });
  check_launch("conv_transpose2x2 scatter kernel");
}

}  // namespace vitrt::cuda
