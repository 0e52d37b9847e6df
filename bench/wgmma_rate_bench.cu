// wgmma rate micro-benchmark: the tensor-core rate one SM reaches with the wgmma shapes the Hopper
// attention kernels issue (bench/wgmma_rate_bench.cu -> bin/wgmma_rate_bench).
//
// Why: ncu put the global attention kernel (attention_wgmma.cu: m64n64k16 for Q K^T and P V, A from
// registers) at 41% of the tensor pipe's peak, yet a P V wgmma 12.5% wider (m64n72) made the whole
// kernel 7% slower (BENCHMARKS.md, 2026-12-03 22:29 session): its time follows the tensor work as if
// those shapes could not run much faster than they do. This measures, per shape, the rate of nothing
// but back-to-back wgmmas: each warpgroup of a CTA (one CTA per SM) issues groups of 4 k16 steps into
// one accumulator, keeping two groups in flight (wait_group 1), A from registers (rs) or from shared
// memory (ss), B (K-major, no swizzle: the attention kernels' K layout) from shared memory. Operand
// values are fixed pseudo-random bf16 (not zeros: power, hence clocks, depends on the data).
// Output: per shape, mode and warpgroups per SM, TFLOP/s and the dense FLOPs per SM clock (clock64
// inside each CTA) against the 4096 of the H100/H200 spec sheet (989 TFLOP/s at 1830 MHz x 132 SMs).
// Result (H200, 2026-12-04, BENCHMARKS.md): every shape, mode and warpgroup count at 4096 FLOP/clk/SM
// (100%); 860-938 TFLOP/s of wall rate at the clock this load runs at. The shapes are not the limit.
// Usage: wgmma_rate_bench [--iters I] [--ctas-per-sm C]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/cuda/wgmma.cuh"

#include "cuda_check.h"

namespace {

constexpr int kK = 64;              // K per group: 4 k16 steps (the attention kernels' head dim 64)
constexpr int kSmemBytes = 160 << 10;  // > half of the SM's shared memory: one CTA per SM

#if VITRT_WGMMA_ENABLED
// Generated wrappers (one asm operand per accumulator register), m64nNk16, bf16 -> f32, scale-d 1,
// B K-major; A from registers (rs) or K-major shared memory (ss).
__device__ __forceinline__ void mma_rs_n64(float (&d)[32], const unsigned (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_rs_n72(float (&d)[36], const unsigned (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, {%36, %37, %38, %39}, %40, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_rs_n80(float (&d)[40], const unsigned (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, {%40, %41, %42, %43}, %44, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_rs_n128(float (&d)[64], const unsigned (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_ss_n64(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_ss_n128(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}
__device__ __forceinline__ void mma_ss_n256(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

template <int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t b) {
  if constexpr (N == 64) mma_rs_n64(d, a, b);
  else if constexpr (N == 72) mma_rs_n72(d, a, b);
  else if constexpr (N == 80) mma_rs_n80(d, a, b);
  else mma_rs_n128(d, a, b);
}
template <int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t a, uint64_t b) {
  if constexpr (N == 16) vitrt::cuda::wgmma::wgmma_m64n16k16_ss(d, a, b);
  else if constexpr (N == 32) vitrt::cuda::wgmma::wgmma_m64n32k16_ss(d, a, b);
  else if constexpr (N == 64) mma_ss_n64(d, a, b);
  else if constexpr (N == 128) mma_ss_n128(d, a, b);
  else mma_ss_n256(d, a, b);
}
#endif

// (Unreferenced in the sm_80 pass, whose kernel bodies are compiled out.)
#pragma nv_diag_suppress 177
// One pseudo-random bf16 pair per index (magnitudes ~0.01 - 1: no overflow over the run).
__host__ __device__ inline unsigned pair_of(uint32_t i) {
  uint32_t h = i * 2654435761u ^ (i >> 7);
  const unsigned lo = 0x3C00u + (h & 0x3FFu), hi = 0x3C00u + ((h >> 10) & 0x3FFu);  // ~[0.0078, 0.0156)
  return (((h >> 20) & 1u) ? 0x8000u : 0u) | lo | ((((h >> 21) & 1u) ? 0x8000u : 0u) | hi) << 16;
}

// STEPS k16 steps per commit group; WAIT: wait_group WAIT after each group (0 or 1), or -G: wait_group
// 0 after every G groups only (the block-sparse kernels' forms: bsr_gemm_xres.cu's Retire modes).
template <int N, bool SS, int STEPS = kK / 16, int WAIT = 1>
__global__ void __launch_bounds__(384, 1) rate_kernel(int iters, float* sink, long long* cycles) {
#if VITRT_WGMMA_ENABLED
  extern __shared__ __align__(128) unsigned char smem[];
  // [B: N rows x kK (K-major core matrices, 8 chunks per row)][A: 64 x kK per warpgroup]
  unsigned* words = reinterpret_cast<unsigned*>(smem);
  const int nwords = (N * kK + 3 * 64 * kK) / 2;
  for (int i = threadIdx.x; i < nwords; i += blockDim.x) words[i] = pair_of(i);
  vitrt::cuda::wgmma::fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint64_t bdesc = vitrt::cuda::wgmma::make_smem_desc(smem, 128, (kK / 8) * 128);
  const uint64_t adesc =
      vitrt::cuda::wgmma::make_smem_desc(smem + (N * kK + wg * 64 * kK) * 2, 128, (kK / 8) * 128);
  unsigned a[kK / 16][4];
#pragma unroll
  for (int s = 0; s < kK / 16; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[s][j] = pair_of(threadIdx.x * 16 + s * 4 + j);
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    vitrt::cuda::wgmma::fence();
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {  // one k16 step = 2 chunks = 256 bytes further along K
      if constexpr (SS) mma_ss<N>(d, adesc + s * 16, bdesc + s * 16);
      else mma_rs<N>(d, a[s], bdesc + s * 16);
    }
    vitrt::cuda::wgmma::commit();
    if constexpr (WAIT >= 0) vitrt::cuda::wgmma::wait<WAIT>();
    else if (it % -WAIT == -WAIT - 1) vitrt::cuda::wgmma::wait<0>();
  }
  vitrt::cuda::wgmma::wait<0>();
  vitrt::cuda::wgmma::fence_operands(d);
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += d[i];
  if (s == 12345.f) sink[threadIdx.x] = s;  // keeps the MMAs (never true in practice)
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
#else
  (void)iters, (void)sink, (void)cycles;
#endif
}

template <int N, bool SS, int STEPS = kK / 16, int WAIT = 1>
void run(int wgs, int iters, int ctas_per_sm, int sms, float* sink, long long* cycles, long long* host_cycles) {
  auto k = rate_kernel<N, SS, STEPS, WAIT>;
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const int grid = sms * ctas_per_sm;
  k<<<grid, 128 * wgs, kSmemBytes>>>(8, sink, cycles);  // warm-up
  CHECK(cudaGetLastError());
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0));
  k<<<grid, 128 * wgs, kSmemBytes>>>(iters, sink, cycles);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaMemcpy(host_cycles, cycles, sizeof(long long) * grid, cudaMemcpyDeviceToHost));
  double cyc = 0;
  for (int i = 0; i < grid; ++i) cyc += static_cast<double>(host_cycles[i]);
  cyc /= grid;
  const double flop_cta = 2.0 * 64 * N * 16 * STEPS * static_cast<double>(iters) * wgs;
  std::printf("m64n%dk16 %s %dwg %.1f TFLOP/s %.0f FLOP/clk/SM %.1f%% of-4096 %.3f ms", N, SS ? "ss" : "rs", wgs,
              flop_cta * grid / (ms * 1e-3) / 1e12, flop_cta / cyc, 100.0 * flop_cta / cyc / 4096.0, ms);
  if (STEPS != kK / 16 || WAIT != 1)  // a block-sparse form: also the SM clocks per group of STEPS k16 steps
    std::printf("  [%d k16 per group, %s%d] %.1f clk per group per SM", STEPS, WAIT >= 0 ? "wait " : "wait 0 every ",
                WAIT >= 0 ? WAIT : -WAIT, cyc / (static_cast<double>(iters) * wgs));
  std::printf("\n");
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20000, ctas_per_sm = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ctas-per-sm")) ctas_per_sm = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--iters I] [--ctas-per-sm C]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, "wgmma_rate_bench: needs an sm_90 GPU (found %s, sm_%d%d)\n", prop.name, prop.major, prop.minor);
    return 1;
  }
  std::printf("%s, %d SMs; %d iterations of 4 wgmmas (K = 64) per warpgroup, %d CTAs per SM in turn\n", prop.name,
              prop.multiProcessorCount, iters, ctas_per_sm);
  const int sms = prop.multiProcessorCount, grid = sms * ctas_per_sm;
  float* sink = nullptr;
  long long* cycles = nullptr;
  CHECK(cudaMalloc(&sink, 384 * sizeof(float)));
  CHECK(cudaMalloc(&cycles, grid * sizeof(long long)));
  long long* host_cycles = static_cast<long long*>(std::malloc(grid * sizeof(long long)));
  for (int wgs = 1; wgs <= 3; ++wgs) {
    run<64, false>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<72, false>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<80, false>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<128, false>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<64, true>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<128, true>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
    run<256, true>(wgs, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  }
  // The block-sparse kernels' pattern (bsr_gemm_xres.cu, two consumer warpgroups): one stored block
  // per commit group (B / 16 k16 steps of m64nBk16, both operands in shared memory), retired one by
  // one (wait 0), one behind (wait 1) or a chunk at a time: the tensor side's cost per block,
  // without the kernels' barriers, loads and epilogues.
  std::printf("block-sparse forms: 2 warpgroups per CTA\n");
  run<16, true, 1, 0>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<16, true, 1, 1>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<16, true, 1, -8>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<32, true, 2, 0>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<32, true, 2, 1>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<32, true, 2, -4>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<64, true, 4, 0>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  run<64, true, 4, 1>(2, iters, ctas_per_sm, sms, sink, cycles, host_cycles);
  std::free(host_cycles);
  CHECK(cudaFree(sink));
  CHECK(cudaFree(cycles));
  return 0;
}
