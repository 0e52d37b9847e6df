// Block-sparse x dense linear on the GPU:
//   y[M, N] = act(x[M, K] W^T + bias[N]) + residual[M, N]
// W an [N, K] BSR matrix (vitrt/bsr.h layout: row_ptr, col_idx, [nnz, b, b] row-major blocks,
// b = 16, 32 or 64), i.e. PyTorch's nn.Linear weight with most b x b blocks pruned.
//
// (The bf16 kernel generalises this split -- token tile, block-rows per CTA, pipeline depth, warps,
// persistence -- into run-time-selected variants: BsrTcConfig below. The description here is the
// fp32 kernel and the bf16 variant tm128.r1.s2.w4.)
// Work split (both kernels): one CTA per (tile of 128 tokens, block-row of W). A block-row of W is
// one b-wide slice of output features, so the CTA owns a 128 x b tile of y outright: it walks the
// stored blocks of its block-row (row_ptr[r] .. row_ptr[r+1]), each time multiplying the x tile
// x[m0 .. m0+128, col*b .. col*b+b] by the b x b block, accumulates in registers and writes its
// tile once -- no atomics, no split-K, no zero-init pass. An empty block-row writes act(bias)
// (+ residual) without reading x at all.
//   - Tiles come in through a two-stage cp.async pipeline (the next block's x tile and W block load
//     while the current one is multiplied); rows past M are zero-filled, never read.
//   - CTAs are numbered (token tile, block-row) with the block-row fastest, so the CTAs resident
//     at one time share a few token tiles and each x tile is read from HBM about once and then
//     served from L2 to every block-row that has a block in its column. Within a token tile the
//     block-rows go in `row_order` (most stored blocks first, computed at upload) so the long
//     CTAs start early and the short ones fill the tail.
//   - The epilogue adds the bias, applies exact-erf GELU, stages the fp32 tile in shared memory
//     and writes it (plus the residual, rounded once) with coalesced 8/16-byte stores.
// bf16: tensor cores (mma.sync m16n8k16, ldmatrix from +16-byte-padded rows), fp32 accumulation,
//       bf16 or fp32 output.
// fp32: CUDA cores, exact fp32 FMA in k order within each block (no TF32), 8x(b/8) register tiles.
// Everything is enqueued on cuda::current_stream(); nothing allocates, so calls can be captured
// into a CUDA graph.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vitrt/bsr.h"
#include "vitrt/tensor.h"

namespace vitrt::cuda {

// Device pointers of a BSR matrix that passed validate() on the host before it was uploaded.
struct BsrDeviceView {
  int64_t rows = 0, cols = 0;        // N, K
  int block = 0;                     // 16, 32 or 64
  const int32_t* row_ptr = nullptr;  // [rows / block + 1]
  const int32_t* col_idx = nullptr;  // [nnz]
  const void* values = nullptr;      // [nnz, block, block], each block row-major; bf16 or fp32 (per kernel)
  // [rows / block]: a permutation of the block-rows, the order in which they are scheduled within
  // a token tile (most stored blocks first); null = natural order.
  const int32_t* row_order = nullptr;
  int64_t nnz = -1;  // stored blocks (only for the default-variant heuristic); < 0: unknown
  // BF16 block 32 / 64: the values with each block in wgmma's core-matrix order
  // (bsr_core_matrix_order), for the Hopper kernel's bulk copies; null: it copies `values`.
  const void* values_core_matrix = nullptr;
};
// The view of a matrix whose device copies bsr_to_cuda made (its `cuda` part), in its row order.
BsrDeviceView device_view(const BsrMatrix& w);

// The checks every block-sparse entry point makes (throws InvalidArgument): M >= 0, a supported
// block dividing the weight, an uploaded matrix, and (M > 0) 16-byte aligned x, y, residual, values.
void check_bsr_linear_args(const char* op, const void* x, int64_t M, const BsrDeviceView& w, const void* residual,
                           const void* y);

// ---- bf16 kernel variants (compile-time instantiations selected at run time) ----
//
// tile_m        tokens per work item: 64, 128 or 256.
// rows_per_cta  R = 1, 2 or 4 block-rows per work item: the CTA owns a tile_m x (R * block) output
//               tile and walks the UNION of the R block-rows' stored block-columns (merged in shared
//               memory at the start of each item), loading each x tile once for all R rows; W blocks
//               absent from a row are neither loaded nor multiplied (warp-uniform skip). The R rows
//               of an item are R consecutive entries of row_order (similar lengths), so they need not
//               be adjacent. R > 1 needs K / block <= 4096 (shared-memory merge tables).
// stages        cp.async pipeline depth, 2 or 3 (one barrier per step).
// warps         4 or 8 warps per CTA (the warp grid is picked at compile time: the squarest warp tile
//               within one block-row, <= 128 fp32 accumulators per thread).
// persistent    grid = resident CTAs; items are taken from a global atomic counter (self-resetting
//               at the end of each launch) and the next item's first tiles are loaded while the
//               current item's epilogue runs (epilogue stored straight from registers). Persistent
//               launches must not run concurrently on two streams (they share the counter).
// Not every combination exists for every block size (register / shared-memory limits):
// bsr_tc_config_supported() says which.
struct BsrTcConfig {
  int tile_m = 128;
  int rows_per_cta = 1;
  int stages = 2;
  int warps = 4;
  bool persistent = false;
};
bool operator==(const BsrTcConfig& a, const BsrTcConfig& b);
// "tm128.r1.s2.w4" (+ ".p" when persistent); parse_bsr_tc_config() reads the same form (also
// "tm=128,r=1,s=2,w=4,p=1") and throws InvalidArgument on anything else.
std::string to_string(const BsrTcConfig& c);
BsrTcConfig parse_bsr_tc_config(const std::string& s);
// Whether the variant is compiled for `block` and fits a problem with K input features.
bool bsr_tc_config_supported(const BsrTcConfig& c, int block, int64_t K);
// Every compiled variant for `block` (any K up to 4096 * block).
std::vector<BsrTcConfig> bsr_tc_variants(int block);
// The heuristic default for y[M, N] = x[M, K] W^T with W in `block` blocks at `density` (stored
// fraction; < 0 unknown). Always supported.
BsrTcConfig choose_bsr_tc_config(int64_t M, int64_t N, int64_t K, int block, double density);

// bf16 tensor-core kernel. x: bf16 [M, K] row-major (K = w.cols), 16-byte aligned; w.values bf16;
// bias: bf16 [N] or null; residual: [M, N] of out_dtype or null; y: [M, N] of out_dtype (BF16 or
// F32), 16-byte aligned (residual too). config: the variant; null = the environment variable
// VITRT_BSR_TC_CONFIG when set (parse_bsr_tc_config form, read once), else
// choose_bsr_tc_config(M, N, K, block, nnz density). Throws InvalidArgument on unsupported
// arguments or an unsupported config.
void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, DType out_dtype, void* y, const BsrTcConfig* config = nullptr);

// ---- Hopper kernel for short K (bsr_gemm_xres.cu) ----
// A persistent CTA keeps 128 tokens' x rows (K <= 768) in shared memory (TMA, slab by slab, the
// next tile's slabs loaded as the current tile releases them) and streams the stored W blocks past
// them (one producer thread, bulk copies of `values_core_matrix`; two consumer warpgroups, wgmma):
// x is read once and y written in whole lines, which is what the 768 -> 3072 MLP layer at high
// sparsity is bound by.
// bsr_xres_supported: sm_90, block 16, 32 or 64, K <= 768, bf16 output, no residual, and the view
// has `values_core_matrix` (bsr_to_cuda makes it for bf16 values) or no blocks.
// bsr_xres_selected: whether bsr_linear_bf16 (without an explicit config or VITRT_BSR_TC_CONFIG)
// takes it: by default (VITRT_BSR_XRES unset or "auto") for block 16 with a block-row count
// divisible by 4, block 32 with an even one, and on cards of 4 TB/s or more block 64, when supported
// and there are at least as many 128-token tiles as SMs (measured faster than the other kernels
// there, see BENCHMARKS.md);
// VITRT_BSR_XRES=1 whenever supported; =0 never.
bool bsr_xres_supported(const BsrDeviceView& w, const void* residual, DType out_dtype);
bool bsr_xres_selected(int64_t M, const BsrDeviceView& w, const void* residual, DType out_dtype);
// bsr_xres_pairs: the pairs of consumer warpgroups its launch for w takes: 2 where asked for
// (VITRT_BSR_XRES_PAIRS=2, or unset at blocks 16 / 32) and they fit (blocks 16 / 32 in groups), else 1.
int bsr_xres_pairs(const BsrDeviceView& w);
// y[M, N] = act(x W^T + bias), bf16; max_ctas > 0 caps the persistent grid (tests: several tiles
// per CTA). Throws InvalidArgument where not supported.
void bsr_linear_bf16_xres(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu, void* y,
                          int max_ctas = 0);

// ---- Hopper kernel for any K (bsr_gemm_stream.cu) ----
// bsr_gemm.cu's work split (one CTA per 128-token tile and block-row, persistent) with the x tiles
// and W blocks brought in by TMA / bulk copies (one producer thread, an mbarrier ring) and
// multiplied with wgmma by two consumer warpgroups; bias, GELU and a bf16 residual in the epilogue.
// bsr_stream_supported: sm_90, block 32 or 64, bf16 output, and the view has `values_core_matrix`
// (or no blocks). bsr_stream_selected: whether bsr_linear_bf16 takes it when the x-resident kernel
// does not: VITRT_BSR_STREAM=1 whenever supported, =0 never; unset ("auto") when supported and
// there are at least 4 work items per CTA slot.
bool bsr_stream_supported(const BsrDeviceView& w, DType out_dtype);
bool bsr_stream_selected(int64_t M, const BsrDeviceView& w, DType out_dtype);
// y[M, N] = act(x W^T + bias) + residual, bf16 (residual may be y itself); max_ctas > 0 caps the
// persistent grid (tests: several items per CTA). Throws InvalidArgument where not supported.
void bsr_linear_bf16_stream(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                            const void* residual, void* y, int max_ctas = 0);

// ---- Hopper kernel for blocks 16 / 32 and any K (bsr_gemm_yres.cu) ----
// A unit is one 128-token tile and 256 output columns (384 at block 32), whose fp32 accumulators stay
// in registers while x's 64-column slabs stream past (TMA, only the slabs the group's blocks read)
// with the group's stored blocks of each slab (bulk copies of `values_core_matrix`): x crosses from
// L2 once per group at any density. bias, GELU and a bf16 residual in the epilogue.
// bsr_yres_supported: sm_90, block 16 or 32, bf16 output, N and K multiples of 64, the
// (group, slab) mask table within shared memory, and `values_core_matrix` (or no blocks).
// bsr_yres_selected: whether bsr_linear_bf16 takes it when the x-resident kernel does not:
// VITRT_BSR_YRES=1 whenever supported, =0 never; unset ("auto"): block 16 where the x-resident kernel
// does not take it (K > 768), block 32 there without a residual (with one the streamed kernel was
// faster: bsr_gemm_yres.cu).
bool bsr_yres_supported(const BsrDeviceView& w, DType out_dtype);
bool bsr_yres_selected(int64_t M, const BsrDeviceView& w, const void* residual, DType out_dtype);
// y[M, N] = act(x W^T + bias) + residual, bf16 (residual may be y itself); max_ctas > 0 caps the
// persistent grid (tests: several units per CTA). Throws InvalidArgument where not supported.
void bsr_linear_bf16_yres(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                          const void* residual, void* y, int max_ctas = 0);

// ---- Hopper fused block-sparse MLP (bsr_mlp_fused.cu) ----
// y[M, N] = fc2(GELU(fc1(x) + b1)) + b2 + residual with fc1 [H, D] and fc2 [N, H] both in 64-blocks,
// the hidden activation kept on chip (never written to memory). `schedule`: the device copy of
// ops::make_bsr_mlp_schedule(fc1, fc2) (ops/bsr_mlp_schedule.h). bsr_mlp_fused_supported: sm_90,
// block 64, D <= 1024 (768 in the resident form), chained shapes, the core-matrix copies present.
struct BsrMlpDeviceSchedule {
  const int32_t* words = nullptr;
  const int32_t* group_begin = nullptr;  // [groups + 1]
  int groups = 0;
  unsigned k_mask = 0;
  int64_t words_count = 0;  // group_begin[groups]
  // group_begin on the host (null: not known); the block-rows' costs for sharing tiles among CTAs
  // (bsr_mlp_units.h), else each CTA takes a contiguous range of units.
  const int32_t* group_begin_host = nullptr;
};
// schedule_words: the schedule's length; the kernel keeps it in shared memory next to its ring (the
// streamed form, the default: ~8.6K words fit) or next to 192 KB of resident x (VITRT_BSR_MLP_STREAM=0:
// at D = 768 about 400 words, ViT-B at 90% sparsity and above).
bool bsr_mlp_fused_supported(const BsrDeviceView& fc1, const BsrDeviceView& fc2, int64_t schedule_words = 0);
// Whether M tokens give every SM of this device a unit of work in the selected form (its persistent grid
// has one CTA per unit up to one per SM: a tile's tokens and one fc2 block-row in the streamed forms, a
// whole tile in the resident one). `groups`: fc2's block-rows.
bool bsr_mlp_fused_fills_gpu(int64_t M, int groups);
// x, residual, y bf16 [M, D], [M, N], [M, N] (residual may be y or null); b1, b2 bf16 or null.
// max_ctas > 0 caps the persistent grid (tests). tile_ctas: -1 the default division of work
// (VITRT_BSR_MLP_TILE_CTAS, or the model's choice: bsr_mlp_units.h), 0 contiguous ranges of units, P
// tiles shared by P CTAs where that fits (tests, A/B). Throws InvalidArgument where not supported.
void bsr_mlp_bf16_fused(const void* x, int64_t M, const BsrDeviceView& fc1, const void* b1, const BsrDeviceView& fc2,
                        const void* b2, const BsrMlpDeviceSchedule& schedule, const void* residual, void* y,
                        int max_ctas = 0, int tile_ctas = -1);
// The CTAs per shared tile that bsr_mlp_bf16_fused takes for M tokens (0: contiguous ranges), as reported by
// benchmarks.
int bsr_mlp_fused_tile_ctas(int64_t M, const BsrMlpDeviceSchedule& schedule, int max_ctas = 0, int tile_ctas = -1);

// fp32 CUDA-core kernel: x fp32 [M, K], w.values fp32, bias fp32 [N] or null, residual fp32 [M, N]
// or null, y fp32 [M, N]; pointers 16-byte aligned.
void bsr_linear_f32(const float* x, int64_t M, const BsrDeviceView& w, const float* bias, bool gelu,
                    const float* residual, float* y);

}  // namespace vitrt::cuda
