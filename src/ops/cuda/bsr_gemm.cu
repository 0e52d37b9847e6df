#include "ops/cuda/bsr_gemm.h"

#include <cuda_bf16.h>

#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

constexpr int kTileM = 64;      // rows of x per CTA: 4 warps x 16 rows
constexpr int kWarps = kTileM / 16;
constexpr int kPad = 8;         // bf16 elements of padding per shared row: keeps 32-bit pairs aligned
                                // and spreads rows over banks

// D (16x8, fp32) += A (16x16, bf16, row-major) * B (16x8, bf16, "col": stored n-major = W's layout).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ uint32_t pair_at(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Copies a rows x B bf16 tile (global row stride ld elements, columns col0 .. col0+B) into shared
// memory with row stride B + kPad, 16 bytes per thread-step; rows at or past `valid_rows` are zero.
template <int B>
__device__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t ld, int64_t col0, int rows,
                          int64_t valid_rows) {
  constexpr int kVecPerRow = B / 8;
  for (int v = threadIdx.x; v < rows * kVecPerRow; v += blockDim.x) {
    const int r = v / kVecPerRow, c = (v % kVecPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < valid_rows) val = *reinterpret_cast<const uint4*>(src + r * ld + col0 + c);
    *reinterpret_cast<uint4*>(dst + r * (B + kPad) + c) = val;
  }
}

template <int B>
__global__ void __launch_bounds__(kWarps * 32)
    bsr_linear_bf16_kernel(const __nv_bfloat16* __restrict__ x, int64_t M, int64_t K, int64_t N,
                           const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx,
                           const __nv_bfloat16* __restrict__ values, const __nv_bfloat16* __restrict__ bias,
                           bool gelu, __nv_bfloat16* __restrict__ y) {
  __shared__ __align__(16) __nv_bfloat16 xs[kTileM * (B + kPad)];
  __shared__ __align__(16) __nv_bfloat16 ws[B * (B + kPad)];
  const int block_row = blockIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, tid = lane % 4;
  constexpr int kNTiles = B / 8;
  float acc[kNTiles][4];
#pragma unroll
  for (int t = 0; t < kNTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;

  const int k_begin = row_ptr[block_row], k_end = row_ptr[block_row + 1];
  for (int k = k_begin; k < k_end; ++k) {
    const int64_t col0 = static_cast<int64_t>(col_idx[k]) * B;
    __syncthreads();  // the previous block's tiles are no longer read
    load_tile<B>(xs, x + m0 * K, K, col0, kTileM, M - m0);
    load_tile<B>(ws, values + static_cast<int64_t>(k) * B * B, B, 0, B, B);
    __syncthreads();
    const __nv_bfloat16* xw = xs + warp * 16 * (B + kPad);
#pragma unroll
    for (int kk = 0; kk < B; kk += 16) {
      uint32_t a[4];
      a[0] = pair_at(xw + group * (B + kPad) + kk + tid * 2);
      a[1] = pair_at(xw + (group + 8) * (B + kPad) + kk + tid * 2);
      a[2] = pair_at(xw + group * (B + kPad) + kk + tid * 2 + 8);
      a[3] = pair_at(xw + (group + 8) * (B + kPad) + kk + tid * 2 + 8);
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
        // B fragment: k = tid*2 (+1) and tid*2+8 (+1), n = group; ws is [n][k], so pairs are contiguous.
        const __nv_bfloat16* wn = ws + (t * 8 + group) * (B + kPad) + kk + tid * 2;
        const uint32_t b[2] = {pair_at(wn), pair_at(wn + 8)};
        mma_bf16_16816(acc[t], a, b);
      }
    }
  }

  // Epilogue: bias, exact GELU, bf16 store. C fragment: rows group / group+8, cols tid*2 (+1).
#pragma unroll
  for (int t = 0; t < kNTiles; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t m = m0 + warp * 16 + group + half * 8;
      if (m >= M) continue;
      const int64_t n = static_cast<int64_t>(block_row) * B + t * 8 + tid * 2;
      float v0 = acc[t][half * 2], v1 = acc[t][half * 2 + 1];
      if (bias) v0 += __bfloat162float(bias[n]), v1 += __bfloat162float(bias[n + 1]);
      if (gelu) {
        v0 = 0.5f * v0 * (1.f + erff(v0 * 0.70710678118654752f));
        v1 = 0.5f * v1 * (1.f + erff(v1 * 0.70710678118654752f));
      }
      *reinterpret_cast<__nv_bfloat162*>(y + m * N + n) = __floats2bfloat162_rn(v0, v1);
    }
}

template <int B>
void launch(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y) {
  const dim3 grid(static_cast<unsigned>(w.rows / B), static_cast<unsigned>((M + kTileM - 1) / kTileM));
  bsr_linear_bf16_kernel<B><<<grid, kWarps * 32, 0, current_stream()>>>(
      static_cast<const __nv_bfloat16*>(x), M, w.cols, w.rows, w.row_ptr, w.col_idx,
      static_cast<const __nv_bfloat16*>(w.values), static_cast<const __nv_bfloat16*>(bias), gelu,
      static_cast<__nv_bfloat16*>(y));
  VITRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y) {
  if (M == 0 || w.rows == 0) return;
  VITRT_CHECK((M + kTileM - 1) / kTileM < 65536, InvalidArgument, "cuda bsr_linear_bf16: M = ", M,
              " is too large for one launch (grid.y limit)");
  VITRT_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0 && w.cols % 8 == 0, InvalidArgument,
              "cuda bsr_linear_bf16: x must be 16-byte aligned with rows a multiple of 8 elements");
  switch (w.block) {
    case 16: return launch<16>(x, M, w, bias, gelu, y);
    case 32: return launch<32>(x, M, w, bias, gelu, y);
    case 64: return launch<64>(x, M, w, bias, gelu, y);
  }
  throw InvalidArgument(detail::concat("cuda bsr_linear_bf16: block size ", w.block, " is not supported"));
}

}  // namespace vitrt::cuda
