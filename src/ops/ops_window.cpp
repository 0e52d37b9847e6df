// attention_relpos_windowed on the CPU: gather windows with the qkv bias in the padding, attend,
// scatter the real tokens back. The GPU kernel does the same in its addressing.
#include <cstring>

#include "ops/ops.h"
#include "ops/op_profiler.h"
#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/attention.h"
#endif

namespace vitrt::ops {

Tensor attention_relpos_windowed(const Tensor& qkv_grid, const Tensor& qkv_bias, int num_heads, int window,
                                 const Tensor* rel_pos_h, const Tensor* rel_pos_w) {
  VITRT_CHECK(qkv_grid.dim() == 4 && qkv_grid.size(3) % 3 == 0 && window >= 1, InvalidArgument,
              "attention_relpos_windowed: need qkv [B, H, W, 3C] and window >= 1, got ", shape_str(qkv_grid.shape()));
  const int64_t B = qkv_grid.size(0), H = qkv_grid.size(1), W = qkv_grid.size(2), C3 = qkv_grid.size(3), C = C3 / 3;
  qkv_bias.expect_shape({C3}, "attention_relpos_windowed qkv_bias");
#ifdef VITRT_HAVE_CUDA
  if (qkv_grid.is_cuda()) {
    VITRT_PROFILE_OP("attention_relpos windowed ", shape_str(qkv_grid.shape()), " heads ", num_heads, " ws ", window);
    return cuda_impl::attention_relpos_windowed(qkv_grid, qkv_bias, num_heads, window, rel_pos_h, rel_pos_w);
  }
#endif
  VITRT_CHECK(qkv_grid.dtype() == DType::F32 && qkv_bias.dtype() == DType::F32, InvalidArgument,
              "attention_relpos_windowed on the CPU needs float32 tensors");
  const int64_t nh = (H + window - 1) / window, nw = (W + window - 1) / window, ws2 = int64_t{window} * window;
  Tensor windows = Tensor::empty({B * nh * nw, ws2, C3});
  const float* src = qkv_grid.data<float>();
  const float* bias = qkv_bias.data<float>();
  float* dst = windows.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t wy = 0; wy < nh; ++wy)
      for (int64_t wx = 0; wx < nw; ++wx)
        for (int64_t ty = 0; ty < window; ++ty)
          for (int64_t tx = 0; tx < window; ++tx) {
            const int64_t y = wy * window + ty, x = wx * window + tx;
            float* d = dst + (((b * nh + wy) * nw + wx) * ws2 + ty * window + tx) * C3;
            const float* s = (y < H && x < W) ? src + ((b * H + y) * W + x) * C3 : bias;
            std::memcpy(d, s, sizeof(float) * C3);
          }
  Tensor attended = attention_relpos(windows, num_heads, window, window, rel_pos_h, rel_pos_w);  // [nW, ws2, C]
  Tensor out = Tensor::empty({B, H, W, C});
  const float* a = attended.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const int64_t wy = y / window, wx = x / window, ty = y % window, tx = x % window;
        std::memcpy(o + ((b * H + y) * W + x) * C, a + (((b * nh + wy) * nw + wx) * ws2 + ty * window + tx) * C,
                    sizeof(float) * C);
      }
  return out;
}

}  // namespace vitrt::ops
