#include "ops/cpu/conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ops/cpu/gemm.h"
#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

Buffer alloc_floats(int64_t n) {
  auto* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((n + 16) / 16 * 16) * sizeof(float)));
  if (!p) throw Error(detail::concat("out of memory allocating ", n, " floats for a convolution"));
  return Buffer(p);
}

}  // namespace

void conv2d_nhwc(const float* x, const float* w, const float* bias, float* out, int64_t B, int64_t H,
                 int64_t W, int64_t Cin, int64_t Cout, int64_t kh, int64_t kw, int64_t stride, int64_t pad) {
  const int64_t Ho = (H + 2 * pad - kh) / stride + 1, Wo = (W + 2 * pad - kw) / stride + 1;
  const int64_t M = B * Ho * Wo, K = Cin * kh * kw;
  if (M <= 0 || Cout == 0) return;

  // 1x1, stride 1, no padding: the NHWC input already is the [M, Cin] GEMM operand.
  if (kh == 1 && kw == 1 && stride == 1 && pad == 0) {
    gemm_epilogue(x, w, true, out, M, Cout, K, bias, Act::None, nullptr);
    return;
  }

  // Weights reordered once per call to [Cout, kh, kw, Cin] so that im2col columns are runs of
  // Cin contiguous channels (plain memcpy from NHWC). Cost: Cout*K floats, tiny next to the GEMM.
  Buffer wr = alloc_floats(Cout * K);
#pragma omp parallel for schedule(static) if (Cout * K > 65536)
  for (int64_t co = 0; co < Cout; ++co)
    for (int64_t ci = 0; ci < Cin; ++ci)
      for (int64_t t = 0; t < kh * kw; ++t) wr[(co * kh * kw + t) * Cin + ci] = w[(co * Cin + ci) * kh * kw + t];

  // im2col in chunks of output rows so the column buffer stays around 8 MB (it would be 38 MB
  // for SAM's 3x3 neck conv at once) and in cache while the GEMM eats it.
  // Equal chunks, so every chunk's GEMM has the same shape (one cached oneDNN primitive).
  const int64_t nchunks = std::max<int64_t>(1, (M * K + (int64_t{2} << 20) - 1) / (int64_t{2} << 20));
  const int64_t chunk = (M + nchunks - 1) / nchunks;
  Buffer col = alloc_floats(chunk * K);
  const size_t run_bytes = static_cast<size_t>(Cin) * sizeof(float);
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t rows = std::min(chunk, M - m0);
#pragma omp parallel for schedule(static) if (rows * K > 32768)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t m = m0 + r;
      const int64_t ox = m % Wo, oy = (m / Wo) % Ho, b = m / (Wo * Ho);
      float* dst = col.get() + r * K;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = oy * stride - pad + ky;
        float* drow = dst + ky * kw * Cin;
        if (iy < 0 || iy >= H) {
          std::memset(drow, 0, static_cast<size_t>(kw) * run_bytes);
          continue;
        }
        const int64_t ix0 = ox * stride - pad;
        const float* srow = x + (b * H + iy) * W * Cin;
        if (ix0 >= 0 && ix0 + kw <= W) {
          // The kw taps are adjacent pixels: one contiguous run of kw*Cin floats.
          std::memcpy(drow, srow + ix0 * Cin, static_cast<size_t>(kw) * run_bytes);
        } else {
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= W)
              std::memset(drow + kx * Cin, 0, run_bytes);
            else
              std::memcpy(drow + kx * Cin, srow + ix * Cin, run_bytes);
          }
        }
      }
    }
    gemm_epilogue(col.get(), wr.get(), true, out + m0 * Cout, rows, Cout, K, bias, Act::None, nullptr);
  }
}

void conv_transpose2x2_nhwc(const float* x, const float* w, const float* bias, float* out, int64_t B,
                            int64_t H, int64_t W, int64_t Cin, int64_t Cout) {
  const int64_t M = B * H * W, N = Cout * 4;
  if (M == 0 || Cout == 0) return;
  // Each input pixel produces a 2x2 block of output pixels independently (stride == kernel):
  // Y[M, Cout*4] = X[M, Cin] @ Wt[Cin, Cout*4], Wt being the PyTorch weight as stored, column
  // index co*4 + ky*2 + kx. Then scatter Y into the 2x2 blocks, adding the bias.
  Buffer y = alloc_floats(M * N);
  gemm_epilogue(x, w, false, y.get(), M, N, Cin, nullptr, Act::None, nullptr);
  const int64_t Wo = 2 * W;
#pragma omp parallel for schedule(static) if (M * N > 32768)
  for (int64_t m = 0; m < M; ++m) {
    const int64_t ix = m % W, iy = (m / W) % H, b = m / (W * H);
    const float* ym = y.get() + m * N;
    for (int64_t ky = 0; ky < 2; ++ky)
      for (int64_t kx = 0; kx < 2; ++kx) {
        float* o = out + ((b * 2 * H + 2 * iy + ky) * Wo + 2 * ix + kx) * Cout;
        const float* src = ym + ky * 2 + kx;
        for (int64_t co = 0; co < Cout; ++co) o[co] = src[co * 4] + (bias ? bias[co] : 0.f);
      }
  }
}

}  // namespace vitrt::cpu
