// Shared-memory mbarriers (sm_90) for the warp-specialised kernels: producers publish a buffer on a
// "full" barrier, consumers hand it back on an "empty" one. Device code for sm_90a only: callers
// guard with VITRT_WGMMA_ENABLED (wgmma.cuh).
#pragma once
#include <cstdint>

#include "ops/cuda/ptx.cuh"

namespace vitrt::cuda::mbar {

__device__ __forceinline__ void init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::smem_u32(bar)), "r"(count) : "memory");
}
// arrive / wait on a barrier given by its shared-memory address (ptx::smem_u32): for loops that keep
// a ring's base address in a register and add 8 * slot, where the pointer forms below let the
// compiler rebuild each address from the thread index and the shared-memory base at every use.
__device__ __forceinline__ void arrive_at(uint32_t bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}
// Blocks until the phase of parity `parity` has completed.
__device__ __forceinline__ void wait_at(uint32_t bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void arrive(uint64_t* bar) { arrive_at(ptx::smem_u32(bar)); }
__device__ __forceinline__ void wait(uint64_t* bar, unsigned parity) { wait_at(ptx::smem_u32(bar), parity); }
// Whether the phase of parity `parity` has completed, without waiting.
__device__ __forceinline__ bool test(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(ptx::smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Arrives on `bar` and adds `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(ptx::smem_u32(bar)), "r"(bytes)
               : "memory");
}
// Bulk copy (async proxy) of `bytes` (a multiple of 16, both addresses 16-byte aligned) from global
// to shared memory, counted against `bar`'s transaction bytes when it lands.
__device__ __forceinline__ void bulk_copy_to_smem(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   ptx::smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(ptx::smem_u32(bar))
               : "memory");
}

// TMA load of one box of a 2-D tensor map (tensor_map: the address of a __grid_constant__ kernel
// parameter) at element coordinates (c0 along the contiguous dimension, c1 along the other),
// counted against `bar`'s transaction bytes (the whole box, out-of-bounds parts zero-filled).
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tensor_map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          ptx::smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(ptx::smem_u32(bar))
      : "memory");
}

}  // namespace vitrt::cuda::mbar
