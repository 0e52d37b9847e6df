// Store-pattern micro-benchmark: how fast can the H200 write a block-sparse layer's output in the
// orders our kernels write it? (bench/store_pattern_bench.cu -> bin/store_pattern_bench)
//
// Why: at 90% sparsity the 768 -> 3072 MLP layer (y: M x 3072 bf16, 310 MB at M = 50432) is bound by
// its output stores, yet both BSR kernels reach only ~45% of the copy rate there while the
// 3072 -> 768 layer, which moves the same bytes the other way round, reaches ~75%. These kernels write
// nothing but y (no input, no math), each in one of the kernels' orders, so the time of each pattern
// is the floor of a kernel that writes that way:
//   linear          grid-stride 16-byte stores over the whole buffer (the copy-rate reference)
//   rowmajor        persistent CTAs, one 128-row tile at a time, each warp writing whole rows
//   blockrow-S      persistent CTAs, one 128-row tile at a time, walking the columns in strips of S
//                   bytes per row (S = 128: one 64-wide bf16 block-row, bsr_gemm_xres.cu's order)
//   cta-per-strip   one CTA per (strip, tile), strips fastest (bsr_gemm.cu's grid order)
// Usage: store_pattern_bench [--rows M] [--cols N] [--iters I]
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kTileRows = 128;
constexpr int kThreads = 256;  // 8 warps, 16 rows each

__device__ __forceinline__ uint4 value_of(int64_t i) {
  const uint32_t v = static_cast<uint32_t>(i) * 2654435761u;
  return make_uint4(v, v + 1, v + 2, v + 3);
}

__global__ void linear_kernel(uint4* y, int64_t n16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n16; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = value_of(i);
}

// Tile by tile; within a tile, strips of `strip` bytes per row, left to right; within a strip, each
// warp writes its 16 rows as whole lines (lanes cover rows x 16-byte chunks).
__global__ void tile_strip_kernel(unsigned char* y, int64_t M, int64_t row_bytes, int strip, int tiles) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = strip / 16;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = static_cast<int64_t>(tile) * kTileRows + warp * 16;
    for (int64_t c0 = 0; c0 < row_bytes; c0 += strip) {
      for (int q = lane; q < 16 * chunks; q += 32) {
        const int64_t m = r0 + q / chunks;
        if (m < M) {
          const int64_t off = m * row_bytes + c0 + (q % chunks) * 16;
          *reinterpret_cast<uint4*>(y + off) = value_of(off);
        }
      }
    }
  }
}

// One CTA per (strip, tile), strips fastest in the grid.
__global__ void cta_per_strip_kernel(unsigned char* y, int64_t M, int64_t row_bytes, int strip) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = strip / 16;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTileRows + warp * 16;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * strip;
  for (int q = lane; q < 16 * chunks; q += 32) {
    const int64_t m = r0 + q / chunks;
    if (m < M) {
      const int64_t off = m * row_bytes + c0 + (q % chunks) * 16;
      *reinterpret_cast<uint4*>(y + off) = value_of(off);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t M = 50432, N = 3072;
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") M = std::atoll(argv[i + 1]);
    else if (a == "--cols") N = std::atoll(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const int64_t row_bytes = N * 2, bytes = M * row_bytes;
  if (row_bytes % 512 != 0 || M <= 0 || iters <= 0) { std::fprintf(stderr, "need N %% 256 == 0, M > 0\n"); return 2; }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned char* y = nullptr;
  CHECK(cudaMalloc(&y, bytes));
  const int tiles = static_cast<int>((M + kTileRows - 1) / kTileRows);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  auto time = [&](const char* name, auto launch) {
    for (int i = 0; i < 3; ++i) launch();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) launch();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= iters;
    std::printf("%-28s %8.4f ms %7.2f TB/s\n", name, ms, bytes / (ms * 1e-3) / 1e12);
  };
  std::printf("store patterns: %lld x %lld bf16 (%.1f MB), %d SMs\n", static_cast<long long>(M),
              static_cast<long long>(N), bytes / 1e6, sms);
  time("memset", [&] { CHECK(cudaMemsetAsync(y, 0, bytes)); });
  time("linear", [&] { linear_kernel<<<sms * 8, 256>>>(reinterpret_cast<uint4*>(y), bytes / 16); });
  for (int per_sm : {1, 2}) {
    const int grid = std::min(tiles, sms * per_sm);
    for (int strip : {128, 256, 512, static_cast<int>(row_bytes)}) {
      char name[64];
      if (strip == row_bytes) std::snprintf(name, sizeof name, "rowmajor %d/SM", per_sm);
      else std::snprintf(name, sizeof name, "blockrow-%d %d/SM", strip, per_sm);
      time(name, [&] { tile_strip_kernel<<<grid, kThreads>>>(y, M, row_bytes, strip, tiles); });
    }
  }
  for (int strip : {128, 256}) {
    char name[64];
    std::snprintf(name, sizeof name, "cta-per-strip-%d", strip);
    const dim3 grid(static_cast<unsigned>(row_bytes / strip), static_cast<unsigned>(tiles));
    time(name, [&] { cta_per_strip_kernel<<<grid, kThreads>>>(y, M, row_bytes, strip); });
  }
  CHECK(cudaFree(y));
  return 0;
}
