// Inline PTX used by the tensor-core kernels (attention.cu, bsr_gemm.cu): cp.async, ldmatrix and
// the m16n8k16 bf16 mma.sync (sm_80+). Device code only; include from .cu files.
#pragma once
#include <cuda_bf16.h>
#include <vector_types.h>

namespace vitrt::cuda::ptx {

// Asks for the 128-byte line holding `p` to be brought into L2 (no register written, never faults
// on the addresses the callers pass: they guard them as their loads do).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// Eight 4-byte streaming loads ("evict first") at p, p + 16 B, ..., p + 112 B: the words a thread
// holds of a row's 64 bf16 columns in the mma / wgmma fragment layout. One address and immediate
// offsets (volatile: kept where written, before stores that may alias them). Loaded one asm per word,
// each from its own 64-bit address, they took ~8 integer instructions per word (ncu, the fused MLP's
// residual, 2026-12-06).
__device__ __forceinline__ void ld_cs_b32x8(const void* p, unsigned (&v)[8]) {
  asm volatile(
      "ld.global.cs.b32 %0, [%8];\n"
      "ld.global.cs.b32 %1, [%8+16];\n"
      "ld.global.cs.b32 %2, [%8+32];\n"
      "ld.global.cs.b32 %3, [%8+48];\n"
      "ld.global.cs.b32 %4, [%8+64];\n"
      "ld.global.cs.b32 %5, [%8+80];\n"
      "ld.global.cs.b32 %6, [%8+96];\n"
      "ld.global.cs.b32 %7, [%8+112];\n"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7])
      : "l"(p));
}
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 16-byte async global -> shared copy (L2 only); src_bytes == 0 zero-fills (src is not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Two floats from a read-only table in shared memory (written before a __syncthreads, never after): not
// volatile, so the compiler may merge or move the loads like those of lds_u16.
__device__ __forceinline__ float2 lds_f32x2_ro(unsigned addr) {
  float2 v;
  asm("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
// A u16 from shared memory, zero-extended into a 32-bit register (a plain uint16_t load is kept as
// 16 bits and widened by extra PRMT / LOP3 instructions at each use).
__device__ __forceinline__ unsigned lds_u16(const void* p) {
  unsigned v;
  asm("ld.shared.u16 %0, [%1];\n" : "=r"(v) : "r"(smem_u32(p)));  // (read-only tables: may move)
  return v;
}
__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
// Stores four 8x8 bf16 matrices whose fragments are in mma accumulator order (thread t holds row
// t / 4, columns 2 (t % 4) and + 1 of each, as a bf16 pair); lanes 8 i .. 8 i + 7 give the
// addresses of matrix i's 8 rows (16 bytes each), at a shared-memory address (smem_u32), which
// loops keep in a register. sm_90.
__device__ __forceinline__ void stsm_x4_at(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}
// 16 bytes from a shared-memory address (smem_u32).
__device__ __forceinline__ uint4 lds_v4_at(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// Two matrices (lanes 0-15 give the row addresses); as stsm_x4_at otherwise.
__device__ __forceinline__ void stsm_x2(void* p, unsigned r0, unsigned r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(smem_u32(p)), "r"(r0), "r"(r1)
               : "memory");
}
// d += a * b, m16n8k16, bf16 inputs, fp32 accumulators. a: 16x16 row-major fragment; b: 16x8
// "col" fragment, i.e. stored n-major with k contiguous (a weight's [n][k] layout, or K rows).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Moves registers between warpgroups (sm_90): every warp of the warpgroup executes it. A CTA keeps
// what it was launched with: .inc waits for registers freed by .dec, so the totals must balance.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace vitrt::cuda::ptx
