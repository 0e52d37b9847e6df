// Base fixture of the GPU tests (ctest label gpu): skipped (not passed) where this build has no CUDA
// backend or the machine no GPU; after each test the device is synchronised so that an asynchronous
// kernel fault is reported by the test that caused it.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

// ||got - want|| / ||want|| (Frobenius) of two host tensors of any floating dtype and one shape.
inline double rel_frobenius(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const Tensor g = got.to_f32(), w = want.to_f32();
  double err = 0, ref = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double d = static_cast<double>(g.data<float>()[i]) - w.data<float>()[i];
    err += d * d;
    ref += static_cast<double>(w.data<float>()[i]) * w.data<float>()[i];
  }
  return std::sqrt(err) / std::max(std::sqrt(ref), 1e-30);
}

}  // namespace vitrt::test
