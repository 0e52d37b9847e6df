// CUTLASS (3.x, sm_90a) GEMMs for the encoder's products, an A/B against cuBLASLt. First motive: the
// MLP's first linear, bias + GELU in bf16, runs at ~565 TFLOP/s on cuBLASLt against ~685 for the same
// GEMM with a bias only (vit_b bs32, BENCHMARKS.md). CUTLASS's warp-specialised kernels overlap a
// tile's epilogue with the mainloop (ping-pong: of the other warpgroup's tile). The GELU is the tanh
// form with the hardware tanh, as cuBLASLt's GELU epilogue and the bf16 block-sparse kernels (within
// 1e-3 of the exact GELU; the exact-erf form of the first version cost ~20% of the GEMM's time).
// Opt-in (VITRT_GEMM_CUTLASS, gemm.cpp): gemm() calls these and falls back to cuBLASLt when they
// decline. The kernels live in three files (gemm_cutlass_{gelu,bias,residual}.cu, one family of
// instantiations each, so that they compile in parallel); this header is their public face.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace vitrt::cuda {

// CUTLASS's two warp-specialised schedules: both consumer warpgroups on one 128 x 256 tile
// (cooperative), or each on its own 128 x 128 tile, one's epilogue overlapping the other's mainloop
// (ping-pong).
enum class CutlassSchedule { Cooperative, Pingpong };

// A kernel: its schedule, and how many CTAs along M form a cluster (1 or 2). With 2, the two CTAs
// share each weight tile (one TMA load multicast to both), which halves the L2 -> SM traffic of the
// weights: at K = 768 a 128 x 128 tile's operands come in at ~10 TB/s from L2 at the GEMM's rate.
struct CutlassConfig {
  CutlassSchedule schedule = CutlassSchedule::Cooperative;
  int cluster_m = 1;
};
// "cooperative", "pingpong", "cooperative-c2", "pingpong-c2" ("1" = "cooperative"); parse returns
// false for anything else.
bool parse_cutlass_config(const std::string& s, CutlassConfig* out);
std::string to_string(const CutlassConfig& c);

// Whether this build has the CUTLASS kernels (CMake found the CUTLASS headers).
bool cutlass_gemm_built();

// D[M, N] = A[M, K] @ W[N, K]^T + bias[N], then GELU (tanh form) if `gelu`; all bf16 (row-major,
// packed), fp32 accumulation. (Without the GELU: qkv and the other bias-only products.)
// Returns false, having enqueued nothing, when it does not apply: not built, not an sm_90 device,
// K or N not a multiple of 8, a pointer not 16-byte aligned, or a workspace larger than
// `workspace_bytes`. Enqueues on `stream`; no allocation, so it can be captured in a CUDA graph.
bool cutlass_gemm_bias_bf16(const void* a, const void* w, const void* bias, void* d, int64_t M, int64_t N, int64_t K,
                            bool gelu, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            CutlassConfig config = {});

// D[M, N] = A[M, K] @ W[N, K]^T + bias[N] + C[M, N] with A, W bf16 and bias, C, D fp32 (the encoder's
// residual adds into its fp32 stream: proj and the MLP's second linear). C may be D (in place). Declines
// as above, and for a cluster of 2 (not instantiated: this epilogue measured slower than cuBLASLt's).
bool cutlass_gemm_bias_residual_f32(const void* a, const void* w, const void* bias, const void* c, void* d, int64_t M,
                                    int64_t N, int64_t K, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                    CutlassConfig config = {});

}  // namespace vitrt::cuda
