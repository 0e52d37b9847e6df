// cuBLASLt GEMM with descriptor/algorithm caching. See gemm.h for the contract.
//
// Layout trick: cuBLASLt is column-major. A row-major [R, C] matrix with row stride ld is the
// column-major [C, R] matrix with leading dimension ld, i.e. its transpose. So the row-major
// product D = A op(B) is computed as the column-major product D^T = op(B)^T A^T:
//   cuBLASLt "A" = our B:  trans_b (B row-major [N, K]) -> col-major [K, N], transa = T
//                          else    (B row-major [K, N]) -> col-major [N, K], transa = N
//   cuBLASLt "B" = our A:  row-major [M, K] -> col-major [K, M], transb = N
//   cuBLASLt "C"/"D"    :  row-major [M, N] -> col-major [N, M]
// so cuBLASLt's m = N, n = M, k = K, and its bias (one value per row of col-major D) is our
// per-column bias [N], which is exactly nn.Linear's bias.
#include "ops/cuda/gemm.h"
#include "ops/cuda/gemm_cutlass.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include <utility>

#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kCandidates = 16;  // heuristic results considered by the autotuner

void check_lt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(detail::concat("cuBLASLt error in ", what, ": ", cublasLtGetStatusName(s), " (",
                             cublasLtGetStatusString(s), ")"));
}
#define LT_CHECK(expr) check_lt((expr), #expr)

// Largest power of two (capped at 256) dividing the address and every byte offset the kernel
// adds to it (row stride, batch stride): cuBLASLt picks kernels by the alignment promised in the
// preference, so this must never overstate it.
uint32_t alignment(const void* p, int64_t ld_bytes, int64_t stride_bytes) {
  uint64_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld_bytes) |
               static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(v & (~v + 1));  // lowest set bit
}

struct Key {
  int device;
  int dtype, d_dtype;  // A/B, and C/D/bias
  int64_t M, N, K, lda, ldb, ldd, batch, sa, sb, sd, sc;
  bool trans_b, has_c, has_bias, relu, gelu;
  uint32_t al_a, al_b, al_c, al_d, al_bias;
  auto tie() const {
    return std::tie(device, dtype, d_dtype, M, N, K, lda, ldb, ldd, batch, sa, sb, sd, sc, trans_b, has_c, has_bias, relu,
                    gelu, al_a, al_b, al_c, al_d, al_bias);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Plan {
  bool fallback = false;  // cuBLASLt offered nothing: run gemm_simple
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;  // cuBLASLt's A, B, C/D
  cublasLtMatrixLayout_t lc = nullptr;  // C's own, when its batch stride differs from D's
  cublasLtMatrixLayout_t c_layout() const { return lc ? lc : ld; }
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // The heuristic's usable algorithms, best-ranked first; cleared once the plan is autotuned.
  struct Candidate {
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
  };
  std::vector<Candidate> candidates;
  bool tuned = false;
};

struct State {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  // Plans live for the whole process (SAM uses a few dozen shapes); never destroyed, so no
  // destruction order problem with the CUDA runtime at exit.
  std::map<Key, Plan> plans;
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;
  int64_t fallback_calls = 0;
  int64_t autotuned_plans = 0;
};

State& state() {
  static State* s = new State;  // leaked on purpose (see above)
  return *s;
}

cublasLtMatrixLayout_t make_layout(cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  LT_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

std::string describe(const GemmArgs& g) {
  const bool mixed = g.out_dtype() != g.dtype;
  return detail::concat(dtype_name(g.dtype), mixed ? "->" : "", mixed ? dtype_name(g.out_dtype()) : "", " M=", g.M,
                        " N=", g.N, " K=", g.K, g.trans_b ? " (B^T)" : "",
                        " batch=", g.batch, " lda=", g.lda, " ldb=", g.ldb, " ldd=", g.ldd, g.bias ? " +bias" : "",
                        g.c ? " +C" : "", g.relu ? " relu" : "", g.gelu_tanh ? " gelu" : "");
}

// t: A and B; td: C, D and bias.
Plan make_plan(State& st, const Key& k, const GemmArgs& g, cudaDataType t, cudaDataType td) {
  Plan p;
  LT_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t opa = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opb = CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
  uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.bias) epi = g.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : g.gelu_tanh ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (g.relu) epi = CUBLASLT_EPILOGUE_RELU;
  else if (g.gelu_tanh) epi = CUBLASLT_EPILOGUE_GELU;
  LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (g.bias) {
    // The bias has D's type: cuBLASLt allows no other for non-fp8/int8 kernels
    // (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), so bf16 x bf16 -> fp32 takes an fp32 bias.
    const int32_t bt = td;
    LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    // The heuristic reads the bias pointer's alignment; the key includes it, so the first
    // call's pointer stands for every later one.
    LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  // cuBLASLt A = our B, cuBLASLt B = our A, C/D transposed (see the file comment).
  if (g.trans_b)
    p.la = make_layout(t, g.K, g.N, k.ldb, g.batch, g.stride_b);
  else
    p.la = make_layout(t, g.N, g.K, k.ldb, g.batch, g.stride_b);
  p.lb = make_layout(t, g.K, g.M, k.lda, g.batch, g.stride_a);
  p.ld = make_layout(td, g.N, g.M, k.ldd, g.batch, g.stride_d);
  if (k.has_c && k.sc != k.sd) p.lc = make_layout(td, g.N, g.M, k.ldd, g.batch, k.sc);

  cublasLtMatmulPreference_t pref = nullptr;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = kWorkspaceBytes;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Split-K partial sums only in fp32 (the compute type): the INPLACE and OUTPUT_TYPE schemes
  // would round them to the output type, i.e. to bf16, between chunks.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                sizeof(reduction)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k.al_b, sizeof(uint32_t)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k.al_a, sizeof(uint32_t)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k.al_c, sizeof(uint32_t)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k.al_d, sizeof(uint32_t)));
  cublasLtMatmulHeuristicResult_t res[kCandidates] = {};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(st.handle, p.desc, p.la, p.lb, p.c_layout(), p.ld, pref, kCandidates, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (hs == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= kWorkspaceBytes)
        p.candidates.push_back({res[i].algo, res[i].workspaceSize});
  if (p.candidates.empty()) {
    // No cuBLASLt kernel for this shape/alignment: remember to use the simple kernel.
    std::fprintf(stderr, "vitrt: cuBLASLt has no algorithm for GEMM %s (alignments a/b/c/d %u/%u/%u/%u, heuristic %s, %d results); using the CUDA-core fallback kernel\n",
                 describe(g).c_str(), k.al_a, k.al_b, k.al_c, k.al_d, cublasLtGetStatusName(hs), found);
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.ld);
    if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.desc);
    Plan f;
    f.fallback = true;
    return f;
  }
  p.algo = p.candidates.front().algo;  // the heuristic's first; autotune() may replace it
  p.workspace = p.candidates.front().workspace;
  return p;
}

// ---- Autotuning ----------------------------------------------------------------------------
// cuBLASLt's heuristic ranks algorithms by a model, not by measurement; on the H200 its first
// choice is not always the fastest for SAM's skinny-K and odd-N shapes. So the first call of a
// large GEMM (outside graph capture) times each usable candidate on the real operands and keeps
// the fastest (the heuristic's first unless another is >= 2% faster, so noise does not flip it).
// VITRT_GEMM_AUTOTUNE=0 turns this off; VITRT_GEMM_AUTOTUNE_LOG=1 prints each decision.
constexpr double kAutotuneMinFlops = 2e9;  // below this the call is too short to matter

bool env_flag(const char* name, bool fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  return std::strcmp(e, "0") != 0;
}

// Bytes [lo, hi) a strided row-major operand can touch (rows x cols, row stride ld, batch stride).
struct Extent {
  uintptr_t lo, hi;
  bool overlaps(const Extent& o) const { return lo < o.hi && o.lo < hi; }
};
Extent extent(const void* p, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride, int64_t es) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const int64_t last = (batch > 1 ? (batch - 1) * stride : 0) + (rows - 1) * ld + cols;
  return {lo, lo + static_cast<uintptr_t>(last * es)};
}

// Times the plan's candidates and keeps the fastest. D is written by the trials, which is harmless
// (the real call that follows overwrites it) unless D overlaps an input -- the in-place residual
// D = A B + D -- in which case the trials write a scratch copy of D's extent instead.
void autotune(State& st, Plan& p, const Key& k, const GemmArgs& g, void* ws, cudaStream_t stream) {
  std::vector<Plan::Candidate> cands;
  cands.swap(p.candidates);
  p.tuned = true;
  if (cands.size() < 2 || 2.0 * g.M * g.N * g.K * g.batch < kAutotuneMinFlops) return;
  const int64_t es = static_cast<int64_t>(dtype_size(g.dtype)), esd = static_cast<int64_t>(dtype_size(g.out_dtype()));
  const Extent d = extent(g.d, g.M, g.N, k.ldd, g.batch, k.sd, esd);
  const Extent a = extent(g.a, g.M, g.K, k.lda, g.batch, k.sa, es);
  const Extent b = g.trans_b ? extent(g.b, g.N, g.K, k.ldb, g.batch, k.sb, es) : extent(g.b, g.K, g.N, k.ldb, g.batch, k.sb, es);
  const bool alias = d.overlaps(a) || d.overlaps(b) ||
                     (g.c && d.overlaps(extent(g.c, g.M, g.N, k.ldd, g.batch, k.sc, esd)));
  void* scratch = nullptr;
  if (alias && cudaMalloc(&scratch, d.hi - d.lo) != cudaSuccess) {
    (void)cudaGetLastError();  // no room for the trials: keep the heuristic's choice
    return;
  }
  void* dst = alias ? scratch : g.d;
  const float alpha = g.alpha, beta = g.c ? 1.f : 0.f;
  const void* c = g.c ? g.c : dst;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  VITRT_CUDA_CHECK(cudaEventCreate(&e0));
  VITRT_CUDA_CHECK(cudaEventCreate(&e1));
  constexpr int kReps = 3;
  float first_ms = -1.f, best_ms = 0.f;
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    auto run = [&] {
      return cublasLtMatmul(st.handle, p.desc, &alpha, g.b, p.la, g.a, p.lb, &beta, c, p.c_layout(), dst, p.ld,
                            &cands[i].algo, ws, cands[i].workspace, stream);
    };
    bool ok = run() == CUBLAS_STATUS_SUCCESS;  // warm-up (and the check that it runs at all)
    VITRT_CUDA_CHECK(cudaEventRecord(e0, stream));
    for (int r = 0; ok && r < kReps; ++r) ok = run() == CUBLAS_STATUS_SUCCESS;
    VITRT_CUDA_CHECK(cudaEventRecord(e1, stream));
    VITRT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.f;
    if (!ok || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    ms /= kReps;
    if (i == 0) first_ms = ms;
    if (best < 0 || ms < best_ms) best = static_cast<int>(i), best_ms = ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (scratch) VITRT_CUDA_CHECK(cudaFree(scratch));
  if (best > 0 && first_ms > 0.f && best_ms > 0.98f * first_ms) best = 0;
  if (best >= 0) p.algo = cands[best].algo, p.workspace = cands[best].workspace;
  ++st.autotuned_plans;
  if (env_flag("VITRT_GEMM_AUTOTUNE_LOG", false))
    std::fprintf(stderr, "vitrt: GEMM autotune %s: %zu candidates, heuristic's first %.4f ms, kept #%d %.4f ms\n",
                 describe(g).c_str(), cands.size(), first_ms, best, best >= 0 ? (best == 0 ? first_ms : best_ms) : -1.f);
}

}  // namespace

int64_t gemm_autotuned_plans() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.autotuned_plans;
}

int64_t gemm_fallback_calls() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.fallback_calls;
}

void gemm(const GemmArgs& g) {
  VITRT_CHECK(g.dtype == DType::F32 || g.dtype == DType::BF16, InvalidArgument, "cuda::gemm: dtype ",
              dtype_name(g.dtype), " is not supported (float32 or bfloat16)");
  VITRT_CHECK(g.out_dtype() == g.dtype || (g.dtype == DType::BF16 && g.out_dtype() == DType::F32), InvalidArgument,
              "cuda::gemm: ", dtype_name(g.dtype), " inputs with ", dtype_name(g.out_dtype()),
              " output are not supported (same dtype, or bfloat16 -> float32)");
  VITRT_CHECK(g.M >= 0 && g.N >= 0 && g.K >= 0 && g.batch >= 1, InvalidArgument, "cuda::gemm: bad sizes ",
              describe(g));
  VITRT_CHECK(g.bias == nullptr || g.batch == 1, InvalidArgument, "cuda::gemm: bias with a batch is not supported");
  VITRT_CHECK(!g.gelu_tanh || (!g.relu && !g.c), InvalidArgument, "cuda::gemm: the GELU epilogue excludes ReLU and C");
  VITRT_CHECK(g.batch <= INT32_MAX, InvalidArgument, "cuda::gemm: batch too large");
  if (g.M == 0 || g.N == 0) return;
  VITRT_CHECK(g.K > 0, InvalidArgument, "cuda::gemm: K = 0 is not supported (", describe(g), ")");
  VITRT_CHECK(g.a && g.b && g.d, InvalidArgument, "cuda::gemm: null operand in ", describe(g));

  const cudaDataType t = g.dtype == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
  const cudaDataType td = g.out_dtype() == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
  const int64_t es = static_cast<int64_t>(dtype_size(g.dtype));         // A, B
  const int64_t esd = static_cast<int64_t>(dtype_size(g.out_dtype()));  // C, D
  Key k{};
  VITRT_CUDA_CHECK(cudaGetDevice(&k.device));
  k.dtype = static_cast<int>(g.dtype);
  k.d_dtype = static_cast<int>(g.out_dtype());
  k.M = g.M, k.N = g.N, k.K = g.K;
  k.lda = g.lda ? g.lda : g.K;
  k.ldb = g.ldb ? g.ldb : (g.trans_b ? g.K : g.N);
  k.ldd = g.ldd ? g.ldd : g.N;
  VITRT_CHECK(k.lda >= g.K && k.ldb >= (g.trans_b ? g.K : g.N) && k.ldd >= g.N, InvalidArgument,
              "cuda::gemm: leading dimension too small in ", describe(g));
  k.batch = g.batch;
  const bool batched = g.batch > 1;
  k.sa = batched ? g.stride_a : 0, k.sb = batched ? g.stride_b : 0, k.sd = batched ? g.stride_d : 0;
  k.sc = g.c && batched ? (g.stride_c < 0 ? g.stride_d : g.stride_c) : k.sd;
  k.trans_b = g.trans_b, k.has_c = g.c != nullptr, k.has_bias = g.bias != nullptr, k.relu = g.relu, k.gelu = g.gelu_tanh;
  k.al_a = alignment(g.a, k.lda * es, k.sa * es);
  k.al_b = alignment(g.b, k.ldb * es, k.sb * es);
  k.al_d = alignment(g.d, k.ldd * esd, k.sd * esd);
  k.al_c = g.c ? alignment(g.c, k.ldd * esd, k.sc * esd) : k.al_d;
  k.al_bias = g.bias ? alignment(g.bias, 0, 0) : 0;

  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (!st.handle) LT_CHECK(cublasLtCreate(&st.handle));
  cudaStream_t stream = current_stream();
  void*& ws = st.workspaces[{k.device, stream}];
  if (!ws) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    VITRT_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
    VITRT_CHECK(cap == cudaStreamCaptureStatusNone, Error,
                "cuda::gemm: first GEMM on this stream is inside a CUDA graph capture; run one GEMM on the stream "
                "before capturing (its cuBLASLt workspace is allocated then)");
    void* p = nullptr;
    VITRT_CUDA_CHECK(cudaMalloc(&p, kWorkspaceBytes));
    ws = p;
  }
  // Bias (+ GELU) products in bf16 go to CUTLASS's ping-pong kernel with clusters of 2 (gemm_cutlass.h)
  // by default when M >= kCutlassMinRows: on the encoder's MLP and qkv products it measured 12% (GELU)
  // and 7% (bias only) faster than cuBLASLt (vit_b / vit_h bs32, BENCHMARKS.md 2026-12-04). Smaller
  // products (the decoder's, batch-1 windows) stay on cuBLASLt, whose cached plans launch with less
  // host work; that regime is unmeasured. VITRT_GEMM_CUTLASS=<config> (cooperative, pingpong, either
  // with -c2) takes CUTLASS for every size with that config, =0 never. Bias + residual into fp32
  // measured slower than cuBLASLt's and is opt-in apart (VITRT_GEMM_CUTLASS_RESIDUAL=1). The kernels
  // decline (and cuBLASLt runs) for anything but packed, aligned, sm_90 products.
  struct CutlassChoice {
    bool on = true, forced = false;
    CutlassConfig config{CutlassSchedule::Pingpong, 2};
  };
  static const CutlassChoice cutlass_choice = [] {
    CutlassChoice c;
    const char* e = std::getenv("VITRT_GEMM_CUTLASS");
    const std::string v = e ? e : "";
    if (v == "0") c.on = false;
    else if (!v.empty()) {
      VITRT_CHECK(parse_cutlass_config(v, &c.config), InvalidArgument,
                  "VITRT_GEMM_CUTLASS=" + v + ": expected 0, cooperative, pingpong, cooperative-c2 or pingpong-c2");
      c.forced = true;
    }
    return c;
  }();
  constexpr int64_t kCutlassMinRows = 16384;
  static const bool cutlass_residual = env_flag("VITRT_GEMM_CUTLASS_RESIDUAL", false);
  if (cutlass_choice.on && (cutlass_choice.forced || g.M >= kCutlassMinRows) && g.bias && !g.relu &&
      g.dtype == DType::BF16 && g.trans_b && g.batch == 1 && g.alpha == 1.f && k.lda == g.K && k.ldb == g.K &&
      k.ldd == g.N) {
    const CutlassConfig& cutlass_config = cutlass_choice.config;
    if (!g.c && g.out_dtype() == DType::BF16 &&
        cutlass_gemm_bias_bf16(g.a, g.b, g.bias, g.d, g.M, g.N, g.K, g.gelu_tanh, ws, kWorkspaceBytes, stream,
                               cutlass_config))
      return;
    if (cutlass_residual && g.c && g.out_dtype() == DType::F32 &&
        cutlass_gemm_bias_residual_f32(g.a, g.b, g.bias, g.c, g.d, g.M, g.N, g.K, ws, kWorkspaceBytes, stream,
                                       cutlass_config))
      return;
  }
  auto it = st.plans.find(k);
  if (it == st.plans.end()) it = st.plans.emplace(k, make_plan(st, k, g, t, td)).first;
  Plan& p = it->second;
  if (p.fallback) {
    ++st.fallback_calls;
    gemm_simple(g);
    return;
  }
  if (g.bias)
    LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  if (!p.tuned) {
    static const bool autotune_on = env_flag("VITRT_GEMM_AUTOTUNE", true);
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    VITRT_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
    if (!autotune_on) p.tuned = true, p.candidates.clear();
    else if (cap == cudaStreamCaptureStatusNone) autotune(st, p, k, g, ws, stream);  // else: at a later eager call
  }
  const float alpha = g.alpha, beta = g.c ? 1.f : 0.f;
  const void* c = g.c ? g.c : g.d;  // beta = 0: C is not read, but must be a valid pointer
  const cublasStatus_t s = cublasLtMatmul(st.handle, p.desc, &alpha, g.b, p.la, g.a, p.lb, &beta, c, p.c_layout(), g.d, p.ld,
                                          &p.algo, ws, p.workspace, stream);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) {
    // Refused before anything was enqueued: this shape runs on the simple kernel from now on.
    std::fprintf(stderr, "vitrt: cuBLASLt refused GEMM %s (%s); using the CUDA-core fallback kernel\n",
                 describe(g).c_str(), cublasLtGetStatusName(s));
    p.fallback = true;
    ++st.fallback_calls;
    gemm_simple(g);
    return;
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(detail::concat("cuBLASLt matmul failed for GEMM ", describe(g), ": ", cublasLtGetStatusName(s), " (",
                               cublasLtGetStatusString(s), ")"));
}

}  // namespace vitrt::cuda
