// Whole 128-byte lines of output from registers, without shared memory: for the kernels whose
// accumulators are in the mma / wgmma fragment layout and that have no room (or no wish) for a
// staging buffer. Device code.
#pragma once

namespace vitrt::cuda {

// A warp's 8 rows x 64 columns of bf16 in the accumulator fragments' layout (lane: row lane / 4, the
// pairs v[j] at columns 8 j + 2 (lane % 4)) turned into whole 128-byte lines without shared memory:
// afterwards lanes 8 k .. 8 k + 7 hold row 2 k's 16-byte chunk lane % 8 in a and row 2 k + 1's in b,
// so one 16-byte store per lane of a, then of b, writes 4 whole lines each. Why: how wide each store
// instruction's row segments are decides these write-bound kernels' speed (4-byte pairs per lane and
// 64-byte half lines cost 12-55% against whole lines in bsr_gemm_xres.cu, BENCHMARKS.md 2026-12-05).
// Two steps: a 4 x 4 transpose across each quad for columns 0-31 and for 32-63 (the 2 x 2 sub-blocks
// through lane ^ 1, then the off-diagonal blocks through lane ^ 2: lane t of quad g then holds row
// g's chunks t and 4 + t), then quads 2 k and 2 k + 1 swap halves (lane ^ 4). Every lane must take
// part (full-warp shuffles).
__device__ __forceinline__ void quad_transpose(unsigned (&a)[4], int lane) {
  const bool odd = (lane & 1) != 0, hi = (lane & 2) != 0;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? a[2 * q] : a[2 * q + 1], 1);
    if (odd) a[2 * q] = got;
    else a[2 * q + 1] = got;
  }
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const unsigned got = __shfl_xor_sync(0xffffffffu, hi ? a[q] : a[2 + q], 2);
    if (hi) a[q] = got;
    else a[2 + q] = got;
  }
}
__device__ __forceinline__ void rows_to_lines(const unsigned (&v)[8], int lane, unsigned (&a)[4], unsigned (&b)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = v[i], b[i] = v[4 + i];
  quad_transpose(a, lane);
  quad_transpose(b, lane);
  const bool odd = (lane & 4) != 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? a[i] : b[i], 4);
    if (odd) a[i] = got;
    else b[i] = got;
  }
}

}  // namespace vitrt::cuda
