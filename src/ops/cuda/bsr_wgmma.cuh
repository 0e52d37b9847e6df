// Pieces shared by the Hopper block-sparse kernels (bsr_gemm_xres.cu, bsr_gemm_stream.cu,
// bsr_mlp_fused.cu): one k16 step of a B x B block on wgmma, and the per-warp staging that turns
// the accumulators' fragment layout into whole 128-byte lines of y (fragment_lines.cuh does it with
// shuffles instead). Device code for sm_90a only where marked.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "ops/cuda/fragment_lines.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/wgmma.cuh"
#include "vitrt/error.h"

namespace vitrt::cuda::bsr_wgmma {

// One 16-byte piece of an output line: a plain store, or a streaming (evict-first) one, which keeps
// a kernel's large output from pushing what other CTAs read again (the weights) out of L2.
// (The plain store in PTX too: from C++, ptxas split it into four 4-byte stores where the value came
// from inline-assembly loads.)
__device__ __forceinline__ void store_line(void* dst, uint4 v, int streaming) {
  if (streaming) __stcs(reinterpret_cast<uint4*>(dst), v);
  else
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

#if VITRT_WGMMA_ENABLED
// acc[64 x B] += x tile (64 x 16, descriptor da) * W block rows (16 x B, descriptor db).
template <int B>
__device__ __forceinline__ void block_k16(float (&acc)[B / 2], uint64_t da, uint64_t db) {
  if constexpr (B == 64) wgmma::wgmma_m64n64k16_ss(acc, da, db);
  else if constexpr (B == 32) wgmma::wgmma_m64n32k16_ss(acc, da, db);
  else wgmma::wgmma_m64n16k16_ss(acc, da, db);
}
// A shared-memory wgmma descriptor as its two 32-bit words. The kernels move only its start address
// (the low 14 bits, 16-byte units), and shared memory below 256 KB keeps that from carrying into the
// other fields, so they add offsets to the low word alone and keep the high word apart. The low word
// is opaque to the compiler: otherwise it rebuilt the descriptor from the shared-memory base with
// 64-bit adds at every block (~40 of ~90 SASS instructions per block in the streamed kernel; ncu,
// H100, 2026-12-06). (bsr_gemm_yres.cu passes opaque = false: ptxas kept its words in registers
// without the barrier, and adding it would change that kernel's measured schedule.)
struct DescWords {
  uint32_t lo, hi;
  __device__ __forceinline__ explicit DescWords(uint64_t desc, bool opaque = true)
      : lo(static_cast<uint32_t>(desc)), hi(static_cast<uint32_t>(desc >> 32)) {
    if (opaque) asm volatile("" : "+r"(lo));
  }
  // The descriptor whose low word is `low` (lo plus an offset).
  __device__ __forceinline__ uint64_t with_low(uint32_t low) const { return (static_cast<uint64_t>(hi) << 32) | low; }
};
__device__ __forceinline__ unsigned pack_bf16x2(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned*>(&v);
}
#endif

// A warp's 16 x B output tile, written in two passes of 8 rows (pass 0: the rows g of the
// accumulator fragments, pass 1: rows g + 8) through an 8-row staging buffer: stage() puts the
// thread's B / 8 bf16 pairs there with stmatrix; then each lane reads 16-byte chunks (`load`, i *
// kRowsPerStore rows further on for the i-th) and stores them, so that the warp covers whole rows
// (the kernels keep that loop themselves: their measured code, stores of their own kind). Rows are
// kStageRow bytes apart (+16 over the data: stmatrix and the chunk loads are conflict-free). The
// caller orders the passes with __syncwarp (a pass's loads before the next pass's stage()).
template <int B>
struct WarpTileStore {
  static constexpr int kChunks = B / 8;               // 16-byte chunks per row of the tile
  static constexpr int kStageRow = 2 * B + 16;        // bytes per staged row
  static constexpr int kStageBytes = 8 * kStageRow;   // the warp's staging buffer
  static constexpr int kRowsPerStore = 32 / kChunks;  // rows one store instruction of the warp covers
  // Store instructions per pass of 8 rows: one at B = 16, where 32 lanes of 2 chunks would cover 16
  // rows and lanes 16-31 stay idle (has_row), 8 / kRowsPerStore otherwise.
  static constexpr int kStoresPerPass = kRowsPerStore >= 8 ? 1 : 8 / kRowsPerStore;
  const unsigned char* load;  // this lane's chunk: row lane / kChunks, chunk lane % kChunks
  unsigned char* matrix;      // this lane's stmatrix row address
  int row;                    // lane / kChunks: the first tile row this lane writes in a pass

  __device__ __forceinline__ WarpTileStore(unsigned char* stage, int lane)
      : load(stage + (lane / kChunks) * kStageRow + (lane % kChunks) * 16),
        matrix(stage + (lane % 8) * kStageRow + (lane / 8) * 16),
        row(lane / kChunks) {}
  // Whether this lane has a row of the pass to store (every lane but at B = 16).
  __device__ __forceinline__ bool has_row() const { return kRowsPerStore <= 8 || row < 8; }
  // Byte offset of this lane's first chunk in y's row (add to the tile's column 0).
  __device__ __forceinline__ static int chunk_column(int lane) { return (lane % kChunks) * 8; }

  __device__ __forceinline__ void stage(const unsigned (&v)[B / 8]) const {
    static_assert(B == 16 || B % 32 == 0, "a row of the tile is whole 8x8 matrices, two or a multiple of four");
    if constexpr (B == 16) {
      ptx::stsm_x2(matrix, v[0], v[1]);  // (B / 32 = 0 x4 stores would leave the staging unwritten)
      __syncwarp();
    } else {
      stage_at(ptx::smem_u32(matrix), v);
    }
  }
  // stage() at this lane's stmatrix address given as a shared-memory address (ptx::smem_u32 of
  // `matrix`), for a kernel that keeps it in a register across its loop.
  __device__ __forceinline__ static void stage_at(unsigned matrix_addr, const unsigned (&v)[B / 8]) {
    static_assert(B % 32 == 0, "whole groups of four 8x8 matrices per row");
#pragma unroll
    for (int q = 0; q < B / 32; ++q) ptx::stsm_x4_at(matrix_addr + q * 64, v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    __syncwarp();
  }
};

// Raises `kernel`'s dynamic shared-memory limit to `bytes` once per process (host).
template <class Kernel>
void allow_dynamic_smem_once(Kernel kernel, size_t bytes, std::once_flag& flag) {
  std::call_once(flag, [&] {
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  });
}

// Launches Kernel (dynamic shared memory `smem`) on the current stream, its dynamic shared-memory
// limit raised to `smem_limit` at its first launch (host; one flag per kernel instantiation).
template <auto Kernel, class Args>
void launch(const Args& args, int grid, int threads, size_t smem, size_t smem_limit) {
  static std::once_flag flag;
  allow_dynamic_smem_once(Kernel, smem_limit, flag);
  Kernel<<<grid, threads, smem, current_stream()>>>(args);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

// Kernels that hand registers from a producer warpgroup to their consumers (setmaxnreg) add up only
// when ptxas compiled them at exactly the launch count `want` (65536 / threads, rounded down to 8):
// at fewer, a consumer's setmaxnreg.inc would wait forever for registers nobody released. Checked
// once per kernel, so that another toolchain gives a clear error instead of a hang; `fallback` says
// what the user can do instead.
template <auto Kernel>
void check_launch_registers(int want, const char* op, const char* fallback) {
  static const int regs = [] {
    cudaFuncAttributes attr{};
    VITRT_CUDA_CHECK(cudaFuncGetAttributes(&attr, Kernel));
    return attr.numRegs;
  }();
  VITRT_CHECK(regs == want, Error, op, ": compiled at ", regs, " registers per thread, but its register hand-over "
              "assumes ", want, " (a different ptxas?); ", fallback);
}

}  // namespace vitrt::cuda::bsr_wgmma
