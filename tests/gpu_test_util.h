// Base fixture of the GPU tests (ctest label gpu): skipped (not passed) where this build has no CUDA
// backend or the machine no GPU; after each test the device is synchronised so that an asynchronous
// kernel fault is reported by the test that caused it.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "ops/ops.h"
#include "vitrt/tensor.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace vitrt::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef VITRT_HAVE_CUDA
    GTEST_SKIP() << "built without the CUDA backend";
#else
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
#endif
  }
  void TearDown() override {
#ifdef VITRT_HAVE_CUDA
    if (!IsSkipped() && cuda::device_count() > 0) cuda::synchronize();
#endif
  }
};

// ||got - want|| / ||want|| (Frobenius, ops::relative_error) of two tensors of one shape.
inline double rel_frobenius(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  return ops::relative_error(got, want);
}

// Bytewise equality of two host tensors of the same dtype.
inline ::testing::AssertionResult identical(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "shape/dtype " << shape_str(got.shape()) << " " << dtype_name(got.dtype())
                                         << " != " << shape_str(want.shape()) << " " << dtype_name(want.dtype());
  const size_t es = dtype_size(got.dtype());
  const auto* a = static_cast<const uint8_t*>(got.raw());
  const auto* b = static_cast<const uint8_t*>(want.raw());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (std::memcmp(a + i * es, b + i * es, es) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  auto value = [&](const uint8_t* p, int64_t i) -> double {
    switch (got.dtype()) {
      case DType::F32: { float f; std::memcpy(&f, p + i * 4, 4); return f; }
      case DType::U8: return p[i];
      case DType::BF16: { uint16_t h; std::memcpy(&h, p + i * 2, 2); return bf16_to_f32(h); }
      default: return 0;
    }
  };
  return ::testing::AssertionFailure() << shape_str(got.shape()) << " " << dtype_name(got.dtype()) << ": " << bad
                                       << " of " << got.numel() << " elements differ; first at flat index " << first
                                       << " (got " << value(a, first) << ", want " << value(b, first) << ")";
}

}  // namespace vitrt::test
