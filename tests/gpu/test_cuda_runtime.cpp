// GPU tests skip themselves (reported as skipped, not passed) where no CUDA device is present.
#include <gtest/gtest.h>

#include <vector>

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

TEST(CudaRuntime, VectorAddMatchesCpu) {
#ifndef VITRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  if (vitrt::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::printf("device: %s\n", vitrt::cuda::device_description(0).c_str());
  const int n = 1000;
  std::vector<float> a(n), b(n), out(n, -1.f);
  for (int i = 0; i < n; ++i) a[i] = 0.5f * i, b[i] = 3.0f - i;
  vitrt::cuda::vector_add(a.data(), b.data(), out.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], a[i] + b[i]) << i;
#endif
}
