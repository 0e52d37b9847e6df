#include "ops/cpu/layout.h"

#include <algorithm>
#include <cstring>

namespace vitrt::cpu {

void window_partition(const float* x, float* out, int64_t B, int64_t H, int64_t W, int64_t C, int64_t ws) {
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws;
  const int64_t nrows = B * nh * nw * ws;  // one task per (window, row inside the window)
  const size_t row_bytes = static_cast<size_t>(ws * C) * sizeof(float);
#pragma omp parallel for schedule(static) if (nrows * ws * C > 32768)
  for (int64_t t = 0; t < nrows; ++t) {
    const int64_t r = t % ws, win = t / ws;
    const int64_t wx = win % nw, wy = (win / nw) % nh, b = win / (nw * nh);
    float* dst = out + t * ws * C;
    const int64_t y = wy * ws + r, x0 = wx * ws;
    if (y >= H) {
      std::memset(dst, 0, row_bytes);
      continue;
    }
    const int64_t valid = std::min(ws, W - x0);
    std::memcpy(dst, x + ((b * H + y) * W + x0) * C, static_cast<size_t>(valid * C) * sizeof(float));
    if (valid < ws) std::memset(dst + valid * C, 0, static_cast<size_t>((ws - valid) * C) * sizeof(float));
  }
}

void window_unpartition(const float* windows, float* out, int64_t B, int64_t H, int64_t W, int64_t C,
                        int64_t ws) {
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws;
  const int64_t nrows = B * H * nw;  // one task per (image row, window column)
#pragma omp parallel for schedule(static) if (B * H * W * C > 32768)
  for (int64_t t = 0; t < nrows; ++t) {
    const int64_t wx = t % nw, y = (t / nw) % H, b = t / (nw * H);
    const int64_t wy = y / ws, r = y % ws, x0 = wx * ws;
    const int64_t valid = std::min(ws, W - x0);
    const float* src = windows + (((b * nh + wy) * nw + wx) * ws + r) * ws * C;
    std::memcpy(out + ((b * H + y) * W + x0) * C, src, static_cast<size_t>(valid * C) * sizeof(float));
  }
}

void permute(const float* x, float* out, const std::vector<int64_t>& shape, const std::vector<int>& perm) {
  const int nd = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return;
  if (nd == 0) {
    out[0] = x[0];
    return;
  }
  std::vector<int64_t> in_stride(nd);
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= shape[d];
  }
  // Output dims and the input stride each one walks.
  std::vector<int64_t> oshape(nd), ostride_in(nd);
  for (int d = 0; d < nd; ++d) {
    oshape[d] = shape[perm[d]];
    ostride_in[d] = in_stride[perm[d]];
  }
  // Innermost output run: contiguous in the input too when the last dim stays last.
  const int64_t inner = oshape[nd - 1], inner_stride = ostride_in[nd - 1];
  const int64_t outer = total / inner;
#pragma omp parallel for schedule(static) if (total > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    // Decompose the outer index into output coordinates -> input offset.
    int64_t rem = o, off = 0;
    for (int d = nd - 2; d >= 0; --d) {
      off += (rem % oshape[d]) * ostride_in[d];
      rem /= oshape[d];
    }
    float* dst = out + o * inner;
    if (inner_stride == 1) {
      std::memcpy(dst, x + off, static_cast<size_t>(inner) * sizeof(float));
    } else {
      const float* src = x + off;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * inner_stride];
    }
  }
}

void cat(const std::vector<const float*>& xs, const std::vector<int64_t>& sizes, float* out, int64_t outer,
         int64_t inner) {
  int64_t total_cols = 0;
  for (int64_t s : sizes) total_cols += s * inner;
  if (total_cols == 0) return;
#pragma omp parallel for schedule(static) if (outer * total_cols > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    float* dst = out + o * total_cols;
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t cols = sizes[i] * inner;
      if (cols) std::memcpy(dst, xs[i] + o * cols, static_cast<size_t>(cols) * sizeof(float));
      dst += cols;
    }
  }
}

}  // namespace vitrt::cpu
