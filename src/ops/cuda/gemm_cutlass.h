// CUTLASS (3.x, sm_90a) GEMMs for the encoder's products, an A/B against cuBLASLt. First motive: the
// MLP's first linear, bias + GELU in bf16, runs at 571 TFLOP/s on cuBLASLt against ~695 for the same
// GEMM with a bias only (vit_b bs32, BENCHMARKS.md 2026-12-03). CUTLASS's warp-specialised kernels
// overlap a tile's epilogue with the mainloop (ping-pong: of the other warpgroup's tile), and the GELU
// is the exact-erf form of fast_erf.h (cuBLASLt's is the tanh form). Opt-in
// (VITRT_GEMM_CUTLASS=1 | cooperative | pingpong) until a GPU run has measured it: gemm() calls these
// and falls back to cuBLASLt when they decline.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vitrt::cuda {

// CUTLASS's two warp-specialised schedules: both consumer warpgroups on one 128 x 256 tile
// (cooperative), or each on its own 128 x 128 tile, one's epilogue overlapping the other's mainloop
// (ping-pong).
enum class CutlassSchedule { Cooperative, Pingpong };

// Whether this build has the CUTLASS kernels (CMake found the CUTLASS headers).
bool cutlass_gemm_built();

// D[M, N] = A[M, K] @ W[N, K]^T + bias[N], then GELU if `gelu`; all bf16 (row-major, packed), fp32
// accumulation. (Without the GELU: qkv and the other bias-only products, for the A/B.)
// Returns false, having enqueued nothing, when it does not apply: not built, not an sm_90 device,
// K or N not a multiple of 8, a pointer not 16-byte aligned, or a workspace larger than
// `workspace_bytes`. Enqueues on `stream`; no allocation, so it can be captured in a CUDA graph.
bool cutlass_gemm_bias_bf16(const void* a, const void* w, const void* bias, void* d, int64_t M, int64_t N, int64_t K,
                            bool gelu, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            CutlassSchedule schedule = CutlassSchedule::Cooperative);

// D[M, N] = A[M, K] @ W[N, K]^T + bias[N] + C[M, N] with A, W bf16 and bias, C, D fp32 (the encoder's
// residual adds into its fp32 stream: proj and the MLP's second linear). C may be D (in place). Declines
// as above.
bool cutlass_gemm_bias_residual_f32(const void* a, const void* w, const void* bias, const void* c, void* d, int64_t M,
                                    int64_t N, int64_t K, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                    CutlassSchedule schedule = CutlassSchedule::Cooperative);

}  // namespace vitrt::cuda
