// Base fixture of the GPU tests (ctest label gpu): skipped (not passed) where this build has no CUDA
// backend or the machine no GPU; after each test the device is synchronised so that an asynchronous
// kernel fault is reported by the test that caused it.
#pragma once
#include <gtest/gtest.h>

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

}  // namespace vitrt::test
