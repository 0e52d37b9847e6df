// CPU block-sparse linear (see bsr_gemm.h): AVX2 and AVX-512 register-tile micro-kernels over
// transposed weight panels; OpenMP tasks over 48-row tiles of x (times groups of block-rows of
// equal cost when there are few tiles).
#include "ops/cpu/bsr_gemm.h"
#include "ops/cpu/avx512_region.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/attention_avx512.h"  // avx512::available()
#include "ops/cpu/elementwise.h"

namespace vitrt::cpu {
namespace {

// One register-tile micro-kernel: y[rows, P] = bias + sum over a block-row's blocks of
// x[rows, block cols] * panel. x points at the tile's first row (leading dim K); panel at the
// block-row's first block, offset to the panel (column start * block); y at the tile's first
// output (leading dim N).
using TileFn = void (*)(const float* x, int64_t K, const float* panel, const int32_t* cols, int64_t nblocks,
                        int64_t b, const float* bias, float* y, int64_t N);
struct KernelSet {
  int64_t panel_cols;  // P: output columns per tile, a divisor of the block size
  int64_t tile_rows;   // rows per full tile; fns[r] handles r = 1 .. tile_rows rows
  const TileFn* fns;
};
// The AVX-512 set for a block size (defined at the end of this file, compiled for AVX-512).
KernelSet avx512_kernels(int block);

// AVX2 register tile: 6 rows x 16 columns (12 ymm accumulators). 16 divides every block size.
constexpr int kTileRows = 6;
constexpr int kTileCols = 16;

// Blocks transposed into P-column panels (P = the micro-kernel's width, 16 or 32):
// vt[k][i / P][j][i % P] = W block k [i][j], so that the inner loop broadcasts x[m, j] and loads
// the P outputs' weights of one panel from one contiguous stream. Done once per call (one pass
// over the stored weights, nothing next to the M-fold reuse) and widens BF16 to F32 on the way.
std::vector<float> transpose_blocks(const BsrMatrix& w, int64_t panel) {
  const int64_t b = w.block, bb = b * b, nnz = w.nnz_blocks();
  std::vector<float> vt(static_cast<size_t>(nnz * bb));
  const bool bf16 = w.values.dtype() == DType::BF16;
  const float* f = bf16 ? nullptr : w.values.data<float>();
  const uint16_t* h = bf16 ? w.values.data<uint16_t>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nnz; ++k)
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) {
        const int64_t s = k * bb + i * b + j;
        vt[k * bb + (i / panel) * panel * b + j * panel + i % panel] = bf16 ? bf16_to_f32(h[s]) : f[s];
      }
  return vt;
}

// y[R rows, 16 cols] = bias + sum over the block-row's blocks of x[R, block cols] * vt[., 16 cols].
// x points at the tile's first row (leading dim K); vt at the block-row's first block, offset by
// the panel (chunk * 16 * block); y at the tile's first output (leading dim N). The twelve accumulators are
// named variables, not an array: GCC spills an array of __m256 to the stack on every iteration.
template <int R>
void tile_kernel(const float* x, int64_t K, const float* vt, const int32_t* cols, int64_t nblocks, int64_t b,
                 const float* bias, float* y, int64_t N) {
  const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
  __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
  const int64_t bb = b * b;
  for (int64_t k = 0; k < nblocks; ++k) {
    const float* xk = x + int64_t{cols[k]} * b;
    const float* v = vt + k * bb;
    for (int64_t j = 0; j < b; ++j) {
      const __m256 w0 = _mm256_loadu_ps(v + j * kTileCols), w1 = _mm256_loadu_ps(v + j * kTileCols + 8);
      const float* xj = xk + j;
#define VITRT_BSR_ROW(r)                                         \
  if constexpr (R > r) {                                         \
    const __m256 a = _mm256_broadcast_ss(xj + r * K);            \
    c##r##0 = _mm256_fmadd_ps(a, w0, c##r##0);                   \
    c##r##1 = _mm256_fmadd_ps(a, w1, c##r##1);                   \
  }
      VITRT_BSR_ROW(0)
      VITRT_BSR_ROW(1)
      VITRT_BSR_ROW(2)
      VITRT_BSR_ROW(3)
      VITRT_BSR_ROW(4)
      VITRT_BSR_ROW(5)
#undef VITRT_BSR_ROW
    }
  }
#define VITRT_BSR_STORE(r)                          \
  if constexpr (R > r) {                            \
    _mm256_storeu_ps(y + r * N, c##r##0);           \
    _mm256_storeu_ps(y + r * N + 8, c##r##1);       \
  }
  VITRT_BSR_STORE(0)
  VITRT_BSR_STORE(1)
  VITRT_BSR_STORE(2)
  VITRT_BSR_STORE(3)
  VITRT_BSR_STORE(4)
  VITRT_BSR_STORE(5)
#undef VITRT_BSR_STORE
}

constexpr TileFn kAvx2Fns[kTileRows + 1] = {nullptr,        tile_kernel<1>, tile_kernel<2>, tile_kernel<3>,
                                            tile_kernel<4>, tile_kernel<5>, tile_kernel<6>};

// Rows [m_begin, m_end) of x against block-rows [br_begin, br_end) of W.
struct Task {
  int64_t m_begin, m_end, br_begin, br_end;
};

// Rows of x per task: a multiple of both register tiles (6 and 12), small enough that the task's
// x rows (kTaskRows x K floats, 576 KB at K = 3072) stay in L2 while every block-row reads them.
constexpr int64_t kTaskRows = 48;

}  // namespace

void bsr_linear(const float* x, const BsrMatrix& w, const float* bias, Act act, float* y, int64_t M, BsrIsa isa) {
  const int64_t N = w.rows, K = w.cols, b = w.block, br_n = w.block_rows();
  if (M == 0 || N == 0) return;
  const bool use_avx512 = isa == BsrIsa::Best && avx512::available();
  const KernelSet ks = use_avx512 ? avx512_kernels(w.block) : KernelSet{kTileCols, kTileRows, kAvx2Fns};
  const std::vector<float> vt = transpose_blocks(w, ks.panel_cols);
  const int32_t* rp = w.row_ptr.data<int32_t>();
  const int32_t* ci = w.col_idx.data<int32_t>();

  // Load balance. A task covering every block-row costs the same for every M-tile however
  // ragged the densities are, so at ViT token counts tasks are just M-tiles (and x stays in L2
  // across block-rows). With few M-tiles the block-rows are also split, into contiguous groups of
  // about equal stored-block count (+1 per block-row for its epilogue), enough for 4 tasks per
  // thread; dynamic scheduling absorbs the rest.
  const int64_t threads = omp_get_max_threads();
  const int64_t m_tiles = (M + kTaskRows - 1) / kTaskRows;
  const int64_t groups = std::clamp<int64_t>((4 * threads + m_tiles - 1) / m_tiles, 1, br_n);
  std::vector<int64_t> group_begin = {0};
  const int64_t total_cost = rp[br_n] + br_n;
  for (int64_t br = 0, cost = 0; br < br_n; ++br) {
    cost += rp[br + 1] - rp[br] + 1;
    const int64_t g = static_cast<int64_t>(group_begin.size());
    if (g < groups && br + 1 < br_n && cost * groups >= g * total_cost) group_begin.push_back(br + 1);
  }
  group_begin.push_back(br_n);
  std::vector<Task> tasks;
  for (int64_t m0 = 0; m0 < M; m0 += kTaskRows)
    for (size_t g = 0; g + 1 < group_begin.size(); ++g)
      tasks.push_back({m0, std::min(M, m0 + kTaskRows), group_begin[g], group_begin[g + 1]});

#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < static_cast<int64_t>(tasks.size()); ++t) {
    const Task& task = tasks[t];
    for (int64_t br = task.br_begin; br < task.br_end; ++br) {
      const int64_t k0 = rp[br], nblocks = rp[br + 1] - k0;
      const float* vrow = vt.data() + k0 * b * b;
      // Panel outer, register tile inner: one panel of the block-row's weights (nblocks x block x
      // panel floats) stays in L1/L2 while the task's rows stream past it.
      for (int64_t c = 0; c < b; c += ks.panel_cols) {
        const int64_t n = br * b + c;
        for (int64_t m = task.m_begin; m < task.m_end; m += ks.tile_rows) {
          const int rows = static_cast<int>(std::min<int64_t>(ks.tile_rows, task.m_end - m));
          ks.fns[rows](x + m * K, K, vrow + c * b, ci + k0, nblocks, b, bias ? bias + n : nullptr, y + m * N + n,
                       N);
        }
      }
    }
  }
  // Activation as one vectorised pass over y (oneDNN's exact-erf GELU, multi-threaded).
  if (act == Act::GELU) gelu(y, M * N);
  if (act == Act::ReLU) relu(y, M * N);
}

void bsr_linear_reference(const float* x, const BsrMatrix& w, const float* bias, Act act, float* y, int64_t M) {
  const Tensor dense = bsr_to_dense(w).to_f32();
  gemm_epilogue(x, dense.data<float>(), true, y, M, w.rows, w.cols, bias, act, nullptr);
}

}  // namespace vitrt::cpu

// ---- AVX-512 micro-kernels: R rows x (16 V) columns, up to 12 x 32 (24 zmm accumulators).
// Everything below is compiled for AVX-512 and only reached when avx512::available() says so.
// Only internal-linkage code and intrinsics live here: an AVX-512 instantiation of a library
// template could otherwise be picked by the linker for the whole program.
VITRT_AVX512_REGION_BEGIN
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace vitrt::cpu {
namespace {

template <int R, int V>
void tile512(const float* x, int64_t K, const float* panel, const int32_t* cols, int64_t nblocks, int64_t b,
             const float* bias, float* y, int64_t N) {
  constexpr int64_t P = 16 * V;
  const __m512 bias0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 bias1 = (bias && V > 1) ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
  __m512 c0_0 = bias0, c0_1 = bias1;
  __m512 c1_0 = bias0, c1_1 = bias1;
  __m512 c2_0 = bias0, c2_1 = bias1;
  __m512 c3_0 = bias0, c3_1 = bias1;
  __m512 c4_0 = bias0, c4_1 = bias1;
  __m512 c5_0 = bias0, c5_1 = bias1;
  __m512 c6_0 = bias0, c6_1 = bias1;
  __m512 c7_0 = bias0, c7_1 = bias1;
  __m512 c8_0 = bias0, c8_1 = bias1;
  __m512 c9_0 = bias0, c9_1 = bias1;
  __m512 c10_0 = bias0, c10_1 = bias1;
  __m512 c11_0 = bias0, c11_1 = bias1;
  const int64_t bb = b * b;
  for (int64_t k = 0; k < nblocks; ++k) {
    const float* xk = x + int64_t{cols[k]} * b;
    const float* v = panel + k * bb;
    for (int64_t j = 0; j < b; ++j) {
      const __m512 w0 = _mm512_loadu_ps(v + j * P);
      const __m512 w1 = V > 1 ? _mm512_loadu_ps(v + j * P + 16) : w0;
      const float* xj = xk + j;
      if constexpr (R > 0) {
        const __m512 a = _mm512_set1_ps(xj[0 * K]);
        c0_0 = _mm512_fmadd_ps(a, w0, c0_0);
        if constexpr (V > 1) c0_1 = _mm512_fmadd_ps(a, w1, c0_1);
      }
      if constexpr (R > 1) {
        const __m512 a = _mm512_set1_ps(xj[1 * K]);
        c1_0 = _mm512_fmadd_ps(a, w0, c1_0);
        if constexpr (V > 1) c1_1 = _mm512_fmadd_ps(a, w1, c1_1);
      }
      if constexpr (R > 2) {
        const __m512 a = _mm512_set1_ps(xj[2 * K]);
        c2_0 = _mm512_fmadd_ps(a, w0, c2_0);
        if constexpr (V > 1) c2_1 = _mm512_fmadd_ps(a, w1, c2_1);
      }
      if constexpr (R > 3) {
        const __m512 a = _mm512_set1_ps(xj[3 * K]);
        c3_0 = _mm512_fmadd_ps(a, w0, c3_0);
        if constexpr (V > 1) c3_1 = _mm512_fmadd_ps(a, w1, c3_1);
      }
      if constexpr (R > 4) {
        const __m512 a = _mm512_set1_ps(xj[4 * K]);
        c4_0 = _mm512_fmadd_ps(a, w0, c4_0);
        if constexpr (V > 1) c4_1 = _mm512_fmadd_ps(a, w1, c4_1);
      }
      if constexpr (R > 5) {
        const __m512 a = _mm512_set1_ps(xj[5 * K]);
        c5_0 = _mm512_fmadd_ps(a, w0, c5_0);
        if constexpr (V > 1) c5_1 = _mm512_fmadd_ps(a, w1, c5_1);
      }
      if constexpr (R > 6) {
        const __m512 a = _mm512_set1_ps(xj[6 * K]);
        c6_0 = _mm512_fmadd_ps(a, w0, c6_0);
        if constexpr (V > 1) c6_1 = _mm512_fmadd_ps(a, w1, c6_1);
      }
      if constexpr (R > 7) {
        const __m512 a = _mm512_set1_ps(xj[7 * K]);
        c7_0 = _mm512_fmadd_ps(a, w0, c7_0);
        if constexpr (V > 1) c7_1 = _mm512_fmadd_ps(a, w1, c7_1);
      }
      if constexpr (R > 8) {
        const __m512 a = _mm512_set1_ps(xj[8 * K]);
        c8_0 = _mm512_fmadd_ps(a, w0, c8_0);
        if constexpr (V > 1) c8_1 = _mm512_fmadd_ps(a, w1, c8_1);
      }
      if constexpr (R > 9) {
        const __m512 a = _mm512_set1_ps(xj[9 * K]);
        c9_0 = _mm512_fmadd_ps(a, w0, c9_0);
        if constexpr (V > 1) c9_1 = _mm512_fmadd_ps(a, w1, c9_1);
      }
      if constexpr (R > 10) {
        const __m512 a = _mm512_set1_ps(xj[10 * K]);
        c10_0 = _mm512_fmadd_ps(a, w0, c10_0);
        if constexpr (V > 1) c10_1 = _mm512_fmadd_ps(a, w1, c10_1);
      }
      if constexpr (R > 11) {
        const __m512 a = _mm512_set1_ps(xj[11 * K]);
        c11_0 = _mm512_fmadd_ps(a, w0, c11_0);
        if constexpr (V > 1) c11_1 = _mm512_fmadd_ps(a, w1, c11_1);
      }
    }
  }
  if constexpr (R > 0) {
    _mm512_storeu_ps(y + 0 * N, c0_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 0 * N + 16, c0_1);
  }
  if constexpr (R > 1) {
    _mm512_storeu_ps(y + 1 * N, c1_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 1 * N + 16, c1_1);
  }
  if constexpr (R > 2) {
    _mm512_storeu_ps(y + 2 * N, c2_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 2 * N + 16, c2_1);
  }
  if constexpr (R > 3) {
    _mm512_storeu_ps(y + 3 * N, c3_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 3 * N + 16, c3_1);
  }
  if constexpr (R > 4) {
    _mm512_storeu_ps(y + 4 * N, c4_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 4 * N + 16, c4_1);
  }
  if constexpr (R > 5) {
    _mm512_storeu_ps(y + 5 * N, c5_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 5 * N + 16, c5_1);
  }
  if constexpr (R > 6) {
    _mm512_storeu_ps(y + 6 * N, c6_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 6 * N + 16, c6_1);
  }
  if constexpr (R > 7) {
    _mm512_storeu_ps(y + 7 * N, c7_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 7 * N + 16, c7_1);
  }
  if constexpr (R > 8) {
    _mm512_storeu_ps(y + 8 * N, c8_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 8 * N + 16, c8_1);
  }
  if constexpr (R > 9) {
    _mm512_storeu_ps(y + 9 * N, c9_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 9 * N + 16, c9_1);
  }
  if constexpr (R > 10) {
    _mm512_storeu_ps(y + 10 * N, c10_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 10 * N + 16, c10_1);
  }
  if constexpr (R > 11) {
    _mm512_storeu_ps(y + 11 * N, c11_0);
    if constexpr (V > 1) _mm512_storeu_ps(y + 11 * N + 16, c11_1);
  }
}

constexpr TileFn kAvx512Fns16[13] = {
    nullptr,          tile512<1, 1>,  tile512<2, 1>,  tile512<3, 1>, tile512<4, 1>, tile512<5, 1>, tile512<6, 1>,
    tile512<7, 1>,   tile512<8, 1>,  tile512<9, 1>,  tile512<10, 1>, tile512<11, 1>, tile512<12, 1>};
constexpr TileFn kAvx512Fns32[13] = {
    nullptr,          tile512<1, 2>,  tile512<2, 2>,  tile512<3, 2>, tile512<4, 2>, tile512<5, 2>, tile512<6, 2>,
    tile512<7, 2>,   tile512<8, 2>,  tile512<9, 2>,  tile512<10, 2>, tile512<11, 2>, tile512<12, 2>};

KernelSet avx512_kernels(int block) {
  // 32-column panels (two zmm per row) where the block allows: two weight loads feed 24 FMAs.
  return block >= 32 ? KernelSet{32, 12, kAvx512Fns32} : KernelSet{16, 12, kAvx512Fns16};
}

}  // namespace
}  // namespace vitrt::cpu
#pragma GCC diagnostic pop
VITRT_AVX512_REGION_END
