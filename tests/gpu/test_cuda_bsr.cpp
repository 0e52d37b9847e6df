// The bf16 tensor-core block-sparse linear (ops/cuda/bsr_gemm.h) against the CPU reference on the
// bf16-rounded inputs: every block size, ragged block-rows (empty, full, single), odd token counts,
// with and without bias / GELU. Relative Frobenius error <= 1e-2 (bf16 output rounding).
// Skips without the CUDA backend or a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/bsr_gemm.h"
#include "vitrt/bsr.h"

#ifdef VITRT_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/runtime.h"
#endif

namespace vitrt {
namespace {

#ifdef VITRT_HAVE_CUDA
// Host bf16 tensor rounded from random normals, and its exact f32 value.
Tensor random_bf16(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor t = Tensor::empty(shape, DType::BF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(d(rng));
  return t;
}

// Zeroes blocks so block-rows cycle through empty, full, one block, ~30% random.
void make_ragged(Tensor& w, int b, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t rows = w.size(0), cols = w.size(1);
  for (int64_t br = 0; br < rows / b; ++br)
    for (int64_t bc = 0; bc < cols / b; ++bc) {
      const int kind = static_cast<int>(br % 4);
      if (kind == 1 || (kind == 2 && bc == br % (cols / b)) || (kind == 3 && rng() % 10 < 3)) continue;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < b; ++j) w.data<uint16_t>()[(br * b + i) * cols + bc * b + j] = 0;
    }
}

Tensor upload(const Tensor& t) { return t.to(Device::CUDA); }
#endif

TEST(CudaBsr, MatchesCpuReference) {
#ifndef VITRT_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (int b : {16, 32, 64}) {
    const int64_t N = 8 * b, K = 5 * b;
    Tensor w = random_bf16({N, K}, 1);
    make_ragged(w, b, 2);
    const BsrMatrix m = bsr_from_dense(w, b);
    const Tensor bias = random_bf16({N}, 3);
    const Tensor bias32 = bias.to_f32();
    const Tensor row_ptr = upload(m.row_ptr), col_idx = upload(m.col_idx), values = upload(m.values),
                 bias_dev = upload(bias);
    cuda::BsrDeviceView view{m.rows, m.cols, m.block, row_ptr.data<int32_t>(), col_idx.data<int32_t>(),
                             values.raw()};
    for (int64_t M : {1, 7, 63, 64, 65, 197, 394}) {
      const Tensor x = random_bf16({M, K}, static_cast<uint32_t>(M));
      const Tensor x32 = x.to_f32(), x_dev = upload(x);
      for (bool with_bias : {false, true})
        for (bool gelu : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "block " << b << " M " << M << " bias " << with_bias << " gelu " << gelu);
          Tensor y_dev = Tensor::empty({M, N}, DType::BF16, Device::CUDA);
          cuda::bsr_linear_bf16(x_dev.raw(), M, view, with_bias ? bias_dev.raw() : nullptr, gelu, y_dev.raw());
          const Tensor got = y_dev.to(Device::CPU).to_f32();
          Tensor want = Tensor::empty({M, N});
          cpu::bsr_linear_reference(x32.data<float>(), m, with_bias ? bias32.data<float>() : nullptr,
                                    gelu ? cpu::Act::GELU : cpu::Act::None, want.data<float>(), M);
          double err = 0, ref = 0;
          for (int64_t i = 0; i < want.numel(); ++i) {
            const double d = got.data<float>()[i] - want.data<float>()[i];
            err += d * d;
            ref += static_cast<double>(want.data<float>()[i]) * want.data<float>()[i];
          }
          EXPECT_LE(std::sqrt(err), 1e-2 * std::sqrt(ref) + 1e-6);
        }
    }
  }
#endif
}

}  // namespace
}  // namespace vitrt
