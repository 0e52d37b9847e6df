// Block-sparse x dense linear kernels (see bsr_gemm.h for the design).
#include "ops/cuda/bsr_gemm.h"

#include <cuda_bf16.h>

#include <mutex>

#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileM = 128;    // tokens per CTA
constexpr int kThreads = 128;  // 4 warps per CTA in both kernels; 4 CTAs fit on an SM (smem, registers)
constexpr int kStages = 2;     // cp.async double buffering

// ---------------------------------------------------------------------------------------------
// PTX helpers (sm_80+)

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
__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
// d += a * b, m16n8k16, bf16 inputs, fp32 accumulators. a: 16x16 row-major fragment; b: 16x8
// "col" fragment, i.e. stored n-major with k contiguous -- exactly a W block's [n][k] layout.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }

// ---------------------------------------------------------------------------------------------
// Shared epilogue: the CTA's fp32 tile (bias and activation already applied) sits in shared
// memory, kTileM rows of B values with row stride LDO floats. Each thread writes 4 consecutive
// outputs at a time (16 bytes fp32 / 8 bytes bf16), a warp covering whole rows, so the stores are
// fully coalesced; the residual is added in fp32 and the sum rounded once.
template <int B, int LDO, class OutT>
__device__ __forceinline__ void store_tile(const float* out_s, int64_t m0, int64_t M, int64_t N, int64_t n0,
                                           const OutT* __restrict__ residual, OutT* __restrict__ y) {
  constexpr int kQuadsPerRow = B / 4;
  constexpr int kQuads = kTileM * kQuadsPerRow;
  static_assert(kQuads % kThreads == 0, "tile quads must split evenly over the CTA");
#pragma unroll 4
  for (int j = 0; j < kQuads / kThreads; ++j) {
    const int q = threadIdx.x + j * kThreads;
    const int r = q / kQuadsPerRow, c = (q % kQuadsPerRow) * 4;
    const int64_t m = m0 + r;
    if (m >= M) break;  // rows grow with j: every later quad of this thread is past M too
    float4 v = *reinterpret_cast<const float4*>(out_s + r * LDO + c);
    const int64_t off = m * N + n0 + c;
    if constexpr (sizeof(OutT) == 4) {
      if (residual) {
        const float4 res = *reinterpret_cast<const float4*>(residual + off);
        v.x += res.x, v.y += res.y, v.z += res.z, v.w += res.w;
      }
      *reinterpret_cast<float4*>(y + off) = v;
    } else {
      if (residual) {
        const uint2 raw = *reinterpret_cast<const uint2*>(residual + off);
        const float2 r01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 r23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        v.x += r01.x, v.y += r01.y, v.z += r23.x, v.w += r23.y;
      }
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 out;
      out.x = *reinterpret_cast<const unsigned*>(&lo);
      out.y = *reinterpret_cast<const unsigned*>(&hi);
      *reinterpret_cast<uint2*>(y + off) = out;
    }
  }
}

// Which block-row this CTA computes and for which tokens. Block-row fastest: see bsr_gemm.h.
struct CtaWork {
  int64_t m0;
  int row;
};
__device__ __forceinline__ CtaWork cta_work(int block_rows, const int32_t* __restrict__ row_order) {
  const int slot = static_cast<int>(blockIdx.x % static_cast<unsigned>(block_rows));
  CtaWork w;
  w.m0 = static_cast<int64_t>(blockIdx.x / static_cast<unsigned>(block_rows)) * kTileM;
  w.row = row_order ? row_order[slot] : slot;
  return w;
}

struct KernelArgs {
  const void* x;
  int64_t M, K, N;
  int block_rows;
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const void* values;
  const int32_t* row_order;
  const void* bias;
  bool gelu;
  const void* residual;
  void* y;
};

// ---------------------------------------------------------------------------------------------
// bf16 tensor-core kernel.
//
// Warp layout: B = 64 and 32: 2 x 2 warps of 64 x B/2; B = 16: 4 x 1 warps of 32 x 16. Every warp
// tile is a whole number of m16 x (2 x n8) mma pairs, so B fragments load with one ldmatrix.x4
// per pair of n8 tiles.
template <int B>
struct TcShape {
  static constexpr int kWarpsM = B == 16 ? 4 : 2, kWarpsN = B == 16 ? 1 : 2;
  static_assert(kWarpsM * kWarpsN * 32 == kThreads, "warp grid must cover the CTA");
  static constexpr int kWarpM = kTileM / kWarpsM, kWarpN = B / kWarpsN;
  static constexpr int kMt = kWarpM / 16, kNt = kWarpN / 8;  // mma tiles per warp
  static_assert(kNt % 2 == 0, "n8 tiles are loaded in pairs");
  static constexpr int kLds = B + 8;  // bf16 row stride: +16 bytes keeps ldmatrix conflict-free
  static constexpr int kStageElems = (kTileM + B) * kLds;  // x tile, then the W block
  static constexpr int kLdo = B + 8;  // fp32 staging row stride (conflict-free float2 writes)
  static constexpr size_t kSmemBytes =
      kStages * kStageElems * sizeof(bf16) > size_t{kTileM} * kLdo * sizeof(float)
          ? kStages * kStageElems * sizeof(bf16)
          : size_t{kTileM} * kLdo * sizeof(float);
};

// The x rows a thread copies: rows r0, r0 + kRowStep, ... of the tile, one 16-byte chunk each,
// starting at column c0 of the block-column. Fixed for the CTA; only the block-column changes.
struct XCopyPlan {
  const void* row0;  // x + (m0 + r0) * K + c0 (only dereferenced while in range)
  int64_t step;      // kRowStep * K elements
  int rows_left;     // M - m0 - r0: row r0 + j * kRowStep exists iff j * kRowStep < rows_left
  int smem_off;      // r0 * LDS + c0
};

// Copies the x tile of block-column col0 (kTileM rows) through the plan. The empty asm makes the
// row pointer opaque after each step, so the compiler advances one pointer instead of keeping a
// precomputed 64-bit pointer per row alive across the whole block loop (that cost ~60 registers).
template <class T, int kChunksPerThread, int kRowStep, int LDS>
__device__ __forceinline__ void copy_x_tile(T* xs, const XCopyPlan& plan, int64_t col0, const T* x) {
  const T* src = static_cast<const T*>(plan.row0) + col0;
#pragma unroll
  for (int j = 0; j < kChunksPerThread; ++j) {
    const bool in = j * kRowStep < plan.rows_left;
    cp_async16(xs + plan.smem_off + j * kRowStep * LDS, in ? src : x, in ? 16 : 0);
    src += plan.step;
    asm volatile("" : "+l"(src));
  }
}

// kCols columns of the B rows of a W block (row-major, row stride B) starting at wblk, into ws.
template <class T, int B, int kCols, int LDS>
__device__ __forceinline__ void copy_w_block(T* ws, const T* __restrict__ wblk) {
  constexpr int kVec = kCols * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunks = B * kVec;
#pragma unroll
  for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (kChunks % kThreads == 0 || i < kChunks) {
      const int r = i / kVec, c = (i % kVec) * kElems;
      cp_async16(ws + r * LDS + c, wblk + r * B + c, 16);
    }
  }
}

template <class T, int kCols, int LDS>
__device__ __forceinline__ XCopyPlan make_x_plan(const T* x, int64_t M, int64_t K, int64_t m0) {
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  constexpr int kVec = kCols / kElems;
  static_assert(kThreads % kVec == 0, "a thread's chunks must stay in one column");
  const int r0 = threadIdx.x / kVec, c0 = (threadIdx.x % kVec) * kElems;
  XCopyPlan p;
  const int64_t left = M - m0 - r0;
  p.rows_left = left > kTileM ? kTileM : static_cast<int>(left);
  p.row0 = p.rows_left > 0 ? x + (m0 + r0) * K + c0 : x;
  p.step = (kThreads / kVec) * K;
  p.smem_off = r0 * LDS + c0;
  return p;
}

template <int B, class OutT>
__global__ void __launch_bounds__(kThreads, 4) bsr_tc_kernel(const KernelArgs p) {
  using S = TcShape<B>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stage_base = reinterpret_cast<bf16*>(smem);
  const bf16* __restrict__ x = static_cast<const bf16*>(p.x);
  const bf16* __restrict__ values = static_cast<const bf16*>(p.values);
  const CtaWork work = cta_work(p.block_rows, p.row_order);
  const int k_begin = p.row_ptr[work.row], nblk = p.row_ptr[work.row + 1] - k_begin;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / S::kWarpsN, wn = warp % S::kWarpsN;
  float acc[S::kMt][S::kNt][4];
#pragma unroll
  for (int mt = 0; mt < S::kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < S::kNt; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;

  if (nblk > 0) {
    constexpr int kXChunks = kTileM * B / 8;  // 16-byte chunks of an x tile
    static_assert(kXChunks % kThreads == 0, "x tile chunks must split evenly");
    const XCopyPlan plan = make_x_plan<bf16, B, S::kLds>(x, p.M, p.K, work.m0);
    auto load = [&](int i) {
      bf16* xs = stage_base + (i % kStages) * S::kStageElems;
      const int k = k_begin + i;
      copy_x_tile<bf16, kXChunks / kThreads, kThreads / (B / 8), S::kLds>(xs, plan, int64_t{p.col_idx[k]} * B, x);
      copy_w_block<bf16, B, B, S::kLds>(xs + kTileM * S::kLds, values + static_cast<int64_t>(k) * B * B);
      cp_async_commit();
    };
    load(0);
    // ldmatrix lane addressing. A (x, row-major): lanes 0-15 rows 0-15 at k, lanes 16-31 the same
    // rows at k + 8 -> registers a0..a3 of m16n8k16. B (W block, [n][k]): lanes 0-7 n 0-7 at k,
    // 8-15 n 0-7 at k + 8, 16-23 n 8-15 at k, 24-31 n 8-15 at k + 8 -> b0, b1 of two n8 tiles.
    const int a_off = (wm * S::kWarpM + lane % 16) * S::kLds + (lane / 16) * 8;
    const int b_off = (wn * S::kWarpN + lane % 8 + (lane / 16) * 8) * S::kLds + ((lane / 8) % 2) * 8;
    for (int i = 0; i < nblk; ++i) {
      if (i + 1 < nblk) {
        load(i + 1);  // into the other stage, released by the trailing barrier of iteration i - 1
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const bf16* xs = stage_base + (i % kStages) * S::kStageElems;
      const bf16* ws = xs + kTileM * S::kLds;
#pragma unroll
      for (int kk = 0; kk < B; kk += 16) {
        unsigned b[S::kNt][2];
#pragma unroll
        for (int np = 0; np < S::kNt / 2; ++np)
          ldsm_x4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1],
                  ws + b_off + np * 16 * S::kLds + kk);
#pragma unroll
        for (int mt = 0; mt < S::kMt; ++mt) {
          unsigned a[4];
          ldsm_x4(a[0], a[1], a[2], a[3], xs + a_off + mt * 16 * S::kLds + kk);
#pragma unroll
          for (int nt = 0; nt < S::kNt; ++nt) mma_bf16(acc[mt][nt], a, b[nt][0], b[nt][1]);
        }
      }
      __syncthreads();  // this stage is refilled by iteration i + 1's load
    }
  }

  // Epilogue. C fragment: rows group / group + 8, columns 2 * (lane % 4) (+1).
  float* out_s = reinterpret_cast<float*>(smem);  // the stages are free (last barrier above)
  const int group = lane / 4, tq = lane % 4;
  const int64_t n0 = static_cast<int64_t>(work.row) * B;
  const bf16* bias = static_cast<const bf16*>(p.bias);
#pragma unroll
  for (int nt = 0; nt < S::kNt; ++nt) {
    const int col = wn * S::kWarpN + nt * 8 + tq * 2;
    float b0 = 0.f, b1 = 0.f;
    if (bias) b0 = to_float(bias[n0 + col]), b1 = to_float(bias[n0 + col + 1]);
#pragma unroll
    for (int mt = 0; mt < S::kMt; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float v0 = acc[mt][nt][half * 2] + b0, v1 = acc[mt][nt][half * 2 + 1] + b1;
        if (p.gelu) v0 = gelu_erf(v0), v1 = gelu_erf(v1);
        const int row = wm * S::kWarpM + mt * 16 + group + half * 8;
        *reinterpret_cast<float2*>(out_s + row * S::kLdo + col) = make_float2(v0, v1);
      }
  }
  __syncthreads();
  store_tile<B, S::kLdo>(out_s, work.m0, p.M, p.N, n0, static_cast<const OutT*>(p.residual),
                         static_cast<OutT*>(p.y));
}

// ---------------------------------------------------------------------------------------------
// fp32 CUDA-core kernel.
//
// Threads form a 16 (m) x 8 (n) grid; thread (tm, tn) owns rows tm + 16 i (i < 8) and columns
// tn + 8 j (j < B / 8) of the tile, strided so that the 8 lanes of a quarter-warp read one x row
// (broadcast) and 8 consecutive W rows (distinct banks with the +4 padding). Blocks are consumed
// in k chunks of 32 (16 for B = 16), both operands stored k-contiguous and read as float4, 4
// k-steps per read: each thread does 32 * B / 8 FMAs per 8 + B / 8 LDS.128.
template <int B>
struct SimtShape {
  static constexpr int kRm = kTileM / 16, kRn = B / 8;
  static constexpr int kKc = B == 16 ? 16 : 32;  // k chunk
  static constexpr int kChunks = B / kKc;
  static constexpr int kLds = kKc + 4;  // float row stride: +16 bytes, conflict-free float4 reads
  static constexpr int kStageFloats = (kTileM + B) * kLds;
  static constexpr int kLdo = B + 8;
  static constexpr size_t kSmemBytes = kStages * kStageFloats * sizeof(float) > size_t{kTileM} * kLdo * sizeof(float)
                                           ? kStages * kStageFloats * sizeof(float)
                                           : size_t{kTileM} * kLdo * sizeof(float);
};

template <int B>
__global__ void __launch_bounds__(kThreads, 4) bsr_simt_kernel(const KernelArgs p) {
  using S = SimtShape<B>;
  extern __shared__ __align__(16) unsigned char smem[];
  float* stage_base = reinterpret_cast<float*>(smem);
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ values = static_cast<const float*>(p.values);
  const CtaWork work = cta_work(p.block_rows, p.row_order);
  const int k_begin = p.row_ptr[work.row];
  const int steps = (p.row_ptr[work.row + 1] - k_begin) * S::kChunks;  // (block, k chunk) pairs
  const int tm = threadIdx.x / 8, tn = threadIdx.x % 8;

  float acc[S::kRm][S::kRn];
#pragma unroll
  for (int i = 0; i < S::kRm; ++i)
#pragma unroll
    for (int j = 0; j < S::kRn; ++j) acc[i][j] = 0.f;

  if (steps > 0) {
    constexpr int kXChunks = kTileM * S::kKc / 4;  // 16-byte chunks of an x tile
    static_assert(kXChunks % kThreads == 0, "x tile chunks must split evenly");
    const XCopyPlan plan = make_x_plan<float, S::kKc, S::kLds>(x, p.M, p.K, work.m0);
    auto load = [&](int s) {
      float* xs = stage_base + (s % kStages) * S::kStageFloats;
      const int k = k_begin + s / S::kChunks, kc = (s % S::kChunks) * S::kKc;
      copy_x_tile<float, kXChunks / kThreads, kThreads / (S::kKc / 4), S::kLds>(
          xs, plan, int64_t{p.col_idx[k]} * B + kc, x);
      copy_w_block<float, B, S::kKc, S::kLds>(xs + kTileM * S::kLds, values + static_cast<int64_t>(k) * B * B + kc);
      cp_async_commit();
    };
    load(0);
    for (int s = 0; s < steps; ++s) {
      if (s + 1 < steps) {
        load(s + 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const float* xs = stage_base + (s % kStages) * S::kStageFloats;
      const float* ws = xs + kTileM * S::kLds;
#pragma unroll 1  // one k-step's x values live at a time (full unrolling hoists them all: spills)
      for (int k = 0; k < S::kKc; k += 4) {
        float4 xv[S::kRm];
#pragma unroll
        for (int i = 0; i < S::kRm; ++i) xv[i] = *reinterpret_cast<const float4*>(xs + (tm + 16 * i) * S::kLds + k);
#pragma unroll
        for (int j = 0; j < S::kRn; ++j) {
          const float4 wv = *reinterpret_cast<const float4*>(ws + (tn + 8 * j) * S::kLds + k);
#pragma unroll
          for (int i = 0; i < S::kRm; ++i) {
            float a = acc[i][j];
            a = fmaf(xv[i].x, wv.x, a);
            a = fmaf(xv[i].y, wv.y, a);
            a = fmaf(xv[i].z, wv.z, a);
            a = fmaf(xv[i].w, wv.w, a);
            acc[i][j] = a;
          }
        }
      }
      __syncthreads();
    }
  }

  float* out_s = reinterpret_cast<float*>(smem);
  const int64_t n0 = static_cast<int64_t>(work.row) * B;
  const float* bias = static_cast<const float*>(p.bias);
#pragma unroll
  for (int j = 0; j < S::kRn; ++j) {
    const int col = tn + 8 * j;
    const float bj = bias ? bias[n0 + col] : 0.f;
#pragma unroll
    for (int i = 0; i < S::kRm; ++i) {
      float v = acc[i][j] + bj;
      if (p.gelu) v = gelu_erf(v);
      out_s[(tm + 16 * i) * S::kLdo + col] = v;
    }
  }
  __syncthreads();
  store_tile<B, S::kLdo>(out_s, work.m0, p.M, p.N, n0, static_cast<const float*>(p.residual),
                         static_cast<float*>(p.y));
}

// ---------------------------------------------------------------------------------------------
// Host side

// Opts a kernel into the shared memory it needs (above the 48 KiB default) and asks for the
// largest carveout, so 4 CTAs fit per SM. Once per kernel per process (single device assumed, as
// the rest of the backend).
template <class Kernel>
void configure_once(Kernel kernel, size_t smem_bytes, std::once_flag& flag) {
  std::call_once(flag, [&] {
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)));
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          static_cast<int>(cudaSharedmemCarveoutMaxShared)));
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Common argument checks; returns the grid size (0: nothing to do).
int64_t check_and_grid(const char* op, const void* x, int64_t M, const BsrDeviceView& w, const void* residual,
                       const void* y) {
  VITRT_CHECK(M >= 0, InvalidArgument, op, ": negative token count ", M);
  VITRT_CHECK(w.block == 16 || w.block == 32 || w.block == 64, InvalidArgument, op, ": block size ", w.block,
              " is not supported (expected 16, 32 or 64)");
  VITRT_CHECK(w.rows > 0 && w.cols > 0 && w.rows % w.block == 0 && w.cols % w.block == 0, InvalidArgument, op,
              ": weight [", w.rows, ", ", w.cols, "] is not a positive multiple of the block size ", w.block);
  VITRT_CHECK(w.row_ptr, InvalidArgument, op, ": the BSR matrix has no device row_ptr (not uploaded)");
  VITRT_CHECK(w.rows / w.block < (int64_t{1} << 30), InvalidArgument, op, ": too many block-rows");
  if (M == 0) return 0;
  VITRT_CHECK(x && y && aligned16(x) && aligned16(y) && (!residual || aligned16(residual)) && aligned16(w.values),
              InvalidArgument, op, ": x, y, the residual and the BSR values must be 16-byte aligned device pointers");
  const int64_t grid = (M + kTileM - 1) / kTileM * (w.rows / w.block);
  VITRT_CHECK(grid < (int64_t{1} << 31), InvalidArgument, op, ": M = ", M, " tokens x ", w.rows / w.block,
              " block-rows is too large for one launch");
  return grid;
}

KernelArgs make_args(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, void* y) {
  return KernelArgs{x,         M,         w.cols,      w.rows, static_cast<int>(w.rows / w.block),
                    w.row_ptr, w.col_idx, w.values,    w.row_order, bias,
                    gelu,      residual,  y};
}

template <int B, class OutT>
void launch_tc(const KernelArgs& a, int64_t grid) {
  static std::once_flag flag;
  constexpr size_t smem = TcShape<B>::kSmemBytes;
  configure_once(bsr_tc_kernel<B, OutT>, smem, flag);
  bsr_tc_kernel<B, OutT><<<static_cast<unsigned>(grid), kThreads, smem, current_stream()>>>(a);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

template <int B>
void launch_simt(const KernelArgs& a, int64_t grid) {
  static std::once_flag flag;
  constexpr size_t smem = SimtShape<B>::kSmemBytes;
  configure_once(bsr_simt_kernel<B>, smem, flag);
  bsr_simt_kernel<B><<<static_cast<unsigned>(grid), kThreads, smem, current_stream()>>>(a);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

template <class OutT>
void dispatch_tc(int block, const KernelArgs& a, int64_t grid) {
  switch (block) {
    case 16: return launch_tc<16, OutT>(a, grid);
    case 32: return launch_tc<32, OutT>(a, grid);
    case 64: return launch_tc<64, OutT>(a, grid);
  }
}

}  // namespace

void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, DType out_dtype, void* y) {
  constexpr const char* kOp = "cuda bsr_linear_bf16";
  VITRT_CHECK(out_dtype == DType::BF16 || out_dtype == DType::F32, InvalidArgument, kOp,
              ": output must be bfloat16 or float32, got ", dtype_name(out_dtype));
  const int64_t grid = check_and_grid(kOp, x, M, w, residual, y);
  if (grid == 0) return;
  const KernelArgs a = make_args(x, M, w, bias, gelu, residual, y);
  if (out_dtype == DType::BF16) dispatch_tc<bf16>(w.block, a, grid);
  else dispatch_tc<float>(w.block, a, grid);
}

void bsr_linear_f32(const float* x, int64_t M, const BsrDeviceView& w, const float* bias, bool gelu,
                    const float* residual, float* y) {
  const int64_t grid = check_and_grid("cuda bsr_linear_f32", x, M, w, residual, y);
  if (grid == 0) return;
  const KernelArgs a = make_args(x, M, w, bias, gelu, residual, y);
  switch (w.block) {
    case 16: return launch_simt<16>(a, grid);
    case 32: return launch_simt<32>(a, grid);
    case 64: return launch_simt<64>(a, grid);
  }
}

}  // namespace vitrt::cuda
