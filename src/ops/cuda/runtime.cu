#include <cuda_runtime.h>

#include <vector>

#include "ops/cuda/runtime.h"
#include "vitrt/error.h"

namespace vitrt::cuda {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(detail::concat("CUDA error in ", what, ": ", cudaGetErrorString(e)));
}

__global__ void vector_add_kernel(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_description(int index) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  return detail::concat(p.name, ", sm_", p.major, p.minor, ", ", p.totalGlobalMem >> 30, " GiB");
}

void vector_add(const float* a, const float* b, float* out, int n) {
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  check(cudaMalloc(&da, bytes), "cudaMalloc");
  check(cudaMalloc(&db, bytes), "cudaMalloc");
  check(cudaMalloc(&dc, bytes), "cudaMalloc");
  check(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  vector_add_kernel<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  check(cudaGetLastError(), "vector_add launch");
  check(cudaMemcpy(out, dc, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

}  // namespace vitrt::cuda
