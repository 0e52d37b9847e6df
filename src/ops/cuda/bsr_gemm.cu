// Block-sparse x dense linear kernels (see bsr_gemm.h for the design).
#include "ops/cuda/bsr_gemm.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <utility>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/fast_erf.h"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"

// Compile-time tables (WarpGrid, TcVariant) carry members not every instantiation reads.
#pragma nv_diag_suppress 177

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

// fp32 kernel (the bf16 kernel takes these from its variant's template arguments).
constexpr int kTileM = 128;    // tokens per CTA
constexpr int kThreads = 128;  // 4 warps per CTA; 4 CTAs fit on an SM (smem, registers)
constexpr int kStages = 2;     // cp.async double buffering

// PTX helpers: ops/cuda/ptx.cuh
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldsm_x4;
using ptx::ldsm_x4_t;
using ptx::mma_bf16;
using ptx::smem_u32;

using dev::gelu_erf;  // ops/cuda/elementwise.h

// The bf16 kernel's GELU: erff when the output stays fp32; for a bf16 output the tanh form with
// the hardware tanh (what cuBLASLt's GELU epilogue computes for the dense bf16 model, so sparse and
// dense bf16 models agree; <= 1e-3 absolute from the erf form). Six instructions and one MUFU,
// against ~17 and two for fast_erf.h's erf: at 90% sparsity the 768 -> 3072 layer has ~1.2 stored
// blocks per block-row, and its epilogue (bias + GELU of 155 M outputs at ViT-B batch 256) took
// longer than its mma work (call S: 0.49 ms in the model against 0.22 ms without the epilogue).
__device__ __forceinline__ float gelu_out(float v, bool out_f32) {
  return out_f32 ? gelu_erf(v) : dev::gelu_tanh_approx(v);
}

__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }

// ---------------------------------------------------------------------------------------------
// Shared epilogue: the CTA's fp32 tile (bias and activation already applied) sits in shared
// memory, TM rows of B values with row stride LDO floats. Each thread writes 4 consecutive
// outputs at a time (16 bytes fp32 / 8 bytes bf16), a warp covering whole rows, so the stores are
// fully coalesced; the residual is added in fp32 and the sum rounded once.
template <int B, int LDO, int TM, int NT, class OutT>
__device__ __forceinline__ void store_tile(const float* out_s, int64_t m0, int64_t M, int64_t N, int64_t n0,
                                           const OutT* __restrict__ residual, OutT* __restrict__ y) {
  constexpr int kQuadsPerRow = B / 4;
  constexpr int kQuads = TM * kQuadsPerRow;
  static_assert(kQuads % NT == 0, "tile quads must split evenly over the CTA");
#pragma unroll 4
  for (int j = 0; j < kQuads / NT; ++j) {
    const int q = threadIdx.x + j * NT;
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

// Which block-row the fp32 kernel's CTA computes and for which tokens (block-row fastest).
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
  // bf16 variants only
  bool out_f32;   // y / residual are fp32 (else bf16)
  int bc_n;       // K / block
  int groups;     // ceil(block_rows / rows_per_cta)
  int items;      // token tiles * groups
};

// The x rows a thread copies: rows r0, r0 + kRowStep, ... of the tile, one 16-byte chunk each,
// starting at column c0 of the block-column. Fixed for a work item; only the block-column changes.
struct XCopyPlan {
  const void* row0;  // x + (m0 + r0) * K + c0 (only dereferenced while in range)
  int64_t step;      // kRowStep * K elements
  int rows_left;     // M - m0 - r0: row r0 + j * kRowStep exists iff j * kRowStep < rows_left
  int tile_left;     // TM - r0: chunk j lies inside the tile iff j * kRowStep < tile_left
  int smem_off;      // r0 * LDS + c0
};

// Copies the x tile of block-column col0 through the plan (rows past M zero-filled). The empty asm
// makes the row pointer opaque after each step, so the compiler advances one pointer instead of
// keeping a precomputed 64-bit pointer per row alive across the whole block loop (that cost ~60
// registers). kGuard: the tile has fewer chunks than the CTA has threads.
template <class T, int kChunksPerThread, int kRowStep, int LDS, bool kGuard>
__device__ __forceinline__ void copy_x_tile(T* xs, const XCopyPlan& plan, int64_t col0, const T* x) {
  const T* src = static_cast<const T*>(plan.row0) + col0;
#pragma unroll
  for (int j = 0; j < kChunksPerThread; ++j) {
    if (!kGuard || j * kRowStep < plan.tile_left) {
      const bool in = j * kRowStep < plan.rows_left;
      cp_async16(xs + plan.smem_off + j * kRowStep * LDS, in ? src : x, in ? 16 : 0);
    }
    src += plan.step;
    asm volatile("" : "+l"(src));
  }
}

// kCols columns of the B rows of a W block (row-major, row stride B) starting at wblk, into ws.
template <class T, int B, int kCols, int LDS, int NT>
__device__ __forceinline__ void copy_w_block(T* ws, const T* __restrict__ wblk) {
  constexpr int kVec = kCols * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunks = B * kVec;
#pragma unroll
  for (int j = 0; j < (kChunks + NT - 1) / NT; ++j) {
    const int i = threadIdx.x + j * NT;
    if (kChunks % NT == 0 || i < kChunks) {
      const int r = i / kVec, c = (i % kVec) * kElems;
      cp_async16(ws + r * LDS + c, wblk + r * B + c, 16);
    }
  }
}

template <class T, int kCols, int LDS, int TM, int NT>
__device__ __forceinline__ XCopyPlan make_x_plan(const T* x, int64_t M, int64_t K, int64_t m0) {
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  constexpr int kVec = kCols / kElems;
  static_assert(NT % kVec == 0, "a thread's chunks must stay in one column");
  const int r0 = threadIdx.x / kVec, c0 = (threadIdx.x % kVec) * kElems;
  XCopyPlan p;
  const int64_t left = M - m0 - r0;
  p.tile_left = TM - r0;
  p.rows_left = left > TM ? TM : static_cast<int>(left);
  p.row0 = p.rows_left > 0 ? x + (m0 + r0) * K + c0 : x;
  p.step = (NT / kVec) * K;
  p.smem_off = r0 * LDS + c0;
  return p;
}

// ---------------------------------------------------------------------------------------------
// bf16 tensor-core kernel, one instantiation per variant (BsrTcConfig).
//
// Work item = (token tile of TM rows, group of R block-rows), numbered group fastest so the items
// in flight at one time share a few token tiles (x served from L2). Group g holds the block-rows
// row_order[g * R .. g * R + R) (the last group may be short). A step of an item is one
// block-column c of the group's union: it loads the x tile x[m0 .. m0 + TM, c * B .. c * B + B]
// and, for each of the R rows that stores block c, that W block; the warps of the rows that do not
// skip their mma work for the step.
//
// Warp grid: kWarpsM x kWarpsN warps, each an kWarpM x kWarpN tile inside ONE block-row (kWarpN
// divides B), picked at compile time as the squarest such tile with <= 128 fp32 accumulators per
// thread (fewest ldmatrix bytes per mma). B fragments load with one ldmatrix.x4 per pair of n8 tiles.
template <int B, int TM, int R, int W>
struct WarpGrid {
  static constexpr int kBad = 1 << 30;
  static constexpr int score(int wn) {
    if (W % wn != 0 || (R * B) % wn != 0) return kBad;
    const int wm = W / wn, wn_cols = R * B / wn;
    if (wn_cols > B || B % wn_cols != 0 || wn_cols % 16 != 0) return kBad;
    if (TM % wm != 0 || (TM / wm) % 16 != 0) return kBad;
    if ((TM / wm) * wn_cols / 32 > 128) return kBad;
    return TM / wm + wn_cols;
  }
  static constexpr int pick() {
    int best = 0, best_score = kBad;
    for (int wn = 1; wn <= W; wn *= 2)
      if (score(wn) < best_score) best_score = score(wn), best = wn;
    return best;
  }
  static constexpr int kWarpsN = pick();
  static constexpr bool kValid = kWarpsN > 0;
  static constexpr int kWarpsM = kValid ? W / kWarpsN : 1;
  static constexpr int kWarpN = kValid ? R * B / kWarpsN : 16;
  static constexpr int kWarpM = kValid ? TM / kWarpsM : 16;
};

constexpr size_t kMaxSmemPerCta = 227 * 1024;  // sm_90 opt-in limit (sm_80: 163 KiB, checked at launch)
constexpr int kMaxUnionCols = 4096;            // R > 1: K / B limit of the merge tables

template <int B, int TM, int R, int ST, int W, bool P>
struct TcVariant {
  using G = WarpGrid<B, TM, R, W>;
  static constexpr int kT = 32 * W;
  static constexpr int kMt = G::kWarpM / 16, kNt = G::kWarpN / 8;  // mma tiles per warp
  static constexpr int kLds = B + 8;  // bf16 row stride: +16 bytes keeps ldmatrix conflict-free
  static constexpr int kStageElems = (TM + R * B) * kLds;  // x tile, then R W blocks
  static constexpr int kLdo = B + 8;  // fp32 staging row stride (conflict-free float2 writes)
  static constexpr size_t kStageBytes = size_t{ST} * kStageElems * 2;
  static constexpr size_t kOutBytes = P ? 0 : size_t{TM} * kLdo * 4;  // persistent: no staging
  static constexpr size_t kBaseBytes = ((kStageBytes > kOutBytes ? kStageBytes : kOutBytes) + 15) / 16 * 16;
  static constexpr int kAcc = kMt * kNt * 4;
  // Registers per thread the launch bounds leave room for: accumulators + fragments/addressing
  // (persistent: + the next item's state).
  static constexpr int kRegsEst = (kAcc + (P ? 96 : 64) > 96 ? kAcc + (P ? 96 : 64) : 96);
  static constexpr int kBlocksByRegs = 65536 / (kT * kRegsEst);
  static constexpr int kBlocksBySmem = int((228 * 1024) / (kBaseBytes + 2048));
  static constexpr int kMinBlocksRaw = kBlocksByRegs < kBlocksBySmem ? kBlocksByRegs : kBlocksBySmem;
  static constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 4 ? 4 : kMinBlocksRaw);
  // Persistent variants with 128 accumulators per thread spill (the next item's state on top).
  static constexpr bool kValid =
      G::kValid && kBaseBytes + 1024 <= kMaxSmemPerCta && kNt % 2 == 0 && (!P || kAcc <= 64);
};

// Shared memory after the stages ("meta", ints): [0, 2) the persistent next-item slots, [2] the
// union length, [4, 4 + 3R) rows / first block / end block of the group's rows, then (R > 1) the
// union bitmap and its per-word prefix counts (nwords each), ucol [bc_n] (the union's
// block-columns, increasing) and uslot [bc_n][R] (block index of (union step, row), -1 absent).
inline size_t tc_meta_bytes(int R, int bc_n) {
  if (R == 1) return 16 + 16;
  const size_t nwords = (static_cast<size_t>(bc_n) + 31) / 32;
  const size_t ints = 4 + 3 * static_cast<size_t>(R) + 2 * nwords + static_cast<size_t>(bc_n) * (R + 1);
  return (ints * 4 + 15) / 16 * 16;
}

// Persistent variants: [0] items handed out past the first gridDim.x, [1] CTAs that have run dry;
// the last CTA to run dry resets both, so every launch starts from zero (and graph replays work).
__device__ unsigned g_tc_persist_state[2];

template <int B, int TM, int R, int ST, int W, bool P>
__global__ void __launch_bounds__(32 * W, TcVariant<B, TM, R, ST, W, P>::kMinBlocks)
    bsr_tc_kernel(const KernelArgs p) {
  using V = TcVariant<B, TM, R, ST, W, P>;
  using G = typename V::G;
  constexpr int NT = V::kT;
  constexpr int kLds = V::kLds;
  constexpr int kXVec = B / 8;                        // 16-byte chunks per x tile row
  constexpr int kXChunks = TM * kXVec;
  constexpr bool kXGuard = kXChunks < NT;
  constexpr int kXPerThread = kXGuard ? 1 : kXChunks / NT;
  constexpr int kXRowStep = NT / kXVec;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stage_base = reinterpret_cast<bf16*>(smem);
  int* meta = reinterpret_cast<int*>(smem + V::kBaseBytes);
  int* info = meta + 4;  // rows [R], kb [R], ke [R]
  const int nwords = (p.bc_n + 31) / 32;
  unsigned* bitmap = reinterpret_cast<unsigned*>(info + 3 * R);
  int* wprefix = reinterpret_cast<int*>(bitmap + nwords);
  int* ucol = wprefix + nwords;
  int* uslot = ucol + p.bc_n;

  const bf16* __restrict__ x = static_cast<const bf16*>(p.x);
  const bf16* __restrict__ values = static_cast<const bf16*>(p.values);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / G::kWarpsN, wn = warp % G::kWarpsN;
  const int slot = (wn * G::kWarpN) / B;  // which of the group's rows this warp computes
  const int n_in = (wn * G::kWarpN) % B;  // its first column inside that block-row
  // ldmatrix lane addressing. A (x, row-major): lanes 0-15 rows 0-15 at k, lanes 16-31 the same
  // rows at k + 8 -> registers a0..a3 of m16n8k16. B (W block, [n][k]): lanes 0-7 n 0-7 at k,
  // 8-15 n 0-7 at k + 8, 16-23 n 8-15 at k, 24-31 n 8-15 at k + 8 -> b0, b1 of two n8 tiles.
  const int a_off = (wm * G::kWarpM + lane % 16) * kLds + (lane / 16) * 8;
  const int b_off = (TM + slot * B + n_in + lane % 8 + (lane / 16) * 8) * kLds + ((lane / 8) % 2) * 8;

  float acc[V::kMt][V::kNt][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int mt = 0; mt < V::kMt; ++mt)
#pragma unroll
      for (int nt = 0; nt < V::kNt; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
  };
  zero_acc();

  // Item state.
  int64_t m0 = 0;
  int nsteps = 0;
  int kb0 = 0;        // R == 1: first block of the row
  int rows[R];        // the group's block-rows (-1: past the last block-row)
  XCopyPlan plan;

  // Decodes an item; R > 1 also merges the rows' block-columns into ucol / uslot. Ends with a
  // barrier when R > 1 (callers make sure nobody still reads the previous item's tables).
  auto setup = [&](int item) {
    const int tile = item / p.groups, g = item % p.groups;
    m0 = static_cast<int64_t>(tile) * TM;
    if constexpr (R == 1) {
      rows[0] = p.row_order ? p.row_order[g] : g;
      kb0 = p.row_ptr[rows[0]];
      nsteps = p.row_ptr[rows[0] + 1] - kb0;
    } else {
      for (int i = tid; i < nwords; i += NT) bitmap[i] = 0u;
      for (int i = tid; i < p.bc_n * R; i += NT) uslot[i] = -1;
      if (tid < R) {
        const int idx = g * R + tid;
        int row = -1, kb = 0, ke = 0;
        if (idx < p.block_rows) {
          row = p.row_order ? p.row_order[idx] : idx;
          kb = p.row_ptr[row];
          ke = p.row_ptr[row + 1];
        }
        info[tid] = row, info[R + tid] = kb, info[2 * R + tid] = ke;
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < R; ++r)
        for (int k = info[R + r] + tid; k < info[2 * R + r]; k += NT) {
          const int c = p.col_idx[k];
          atomicOr(&bitmap[c >> 5], 1u << (c & 31));
        }
      __syncthreads();
      if (warp == 0) {
        int running = 0;
        for (int base = 0; base < nwords; base += 32) {
          const int w = base + lane;
          const int cnt = w < nwords ? __popc(bitmap[w]) : 0;
          int incl = cnt;
#pragma unroll
          for (int o = 1; o < 32; o *= 2) {
            const int v = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += v;
          }
          if (w < nwords) wprefix[w] = running + incl - cnt;
          running += __shfl_sync(0xffffffffu, incl, 31);
        }
        if (lane == 0) meta[2] = running;
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < R; ++r)
        for (int k = info[R + r] + tid; k < info[2 * R + r]; k += NT) {
          const int c = p.col_idx[k];
          const int u = wprefix[c >> 5] + __popc(bitmap[c >> 5] & ((1u << (c & 31)) - 1u));
          ucol[u] = c;
          uslot[u * R + r] = k;
        }
      __syncthreads();
      nsteps = meta[2];
#pragma unroll
      for (int r = 0; r < R; ++r) rows[r] = info[r];
    }
    plan = make_x_plan<bf16, B, kLds, TM, NT>(x, p.M, p.K, m0);
  };

  auto load = [&](int u) {
    bf16* xs = stage_base + (u % ST) * V::kStageElems;
    bf16* ws = xs + TM * kLds;
    if constexpr (R == 1) {
      const int k = kb0 + u;
      copy_x_tile<bf16, kXPerThread, kXRowStep, kLds, kXGuard>(xs, plan, int64_t{p.col_idx[k]} * B, x);
      copy_w_block<bf16, B, B, kLds, NT>(ws, values + static_cast<int64_t>(k) * B * B);
    } else {
      copy_x_tile<bf16, kXPerThread, kXRowStep, kLds, kXGuard>(xs, plan, int64_t{ucol[u]} * B, x);
      constexpr int kChunks = R * B * kXVec;  // 16-byte chunks of R W blocks
#pragma unroll
      for (int j = 0; j < (kChunks + NT - 1) / NT; ++j) {
        const int i = tid + j * NT;
        if (kChunks % NT != 0 && i >= kChunks) break;
        const int r = i / (B * kXVec), rr = (i / kXVec) % B, c = (i % kXVec) * 8;
        const int k = uslot[u * R + r];
        if (k >= 0) cp_async16(ws + (r * B + rr) * kLds + c, values + static_cast<int64_t>(k) * B * B + rr * B + c, 16);
      }
    }
  };

  auto compute = [&](int i) {
    if constexpr (R > 1) {
      if (uslot[i * R + slot] < 0) return;  // warp-uniform: this warp's row has no block here
    }
    const bf16* xs = stage_base + (i % ST) * V::kStageElems;
#pragma unroll
    for (int kk = 0; kk < B; kk += 16) {
      unsigned b[V::kNt][2];
#pragma unroll
      for (int np = 0; np < V::kNt / 2; ++np)
        ldsm_x4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1], xs + b_off + np * 16 * kLds + kk);
#pragma unroll
      for (int mt = 0; mt < V::kMt; ++mt) {
        unsigned a[4];
        ldsm_x4(a[0], a[1], a[2], a[3], xs + a_off + mt * 16 * kLds + kk);
#pragma unroll
        for (int nt = 0; nt < V::kNt; ++nt) mma_bf16(acc[mt][nt], a, b[nt][0], b[nt][1]);
      }
    }
  };

  auto prologue = [&] {
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) {
      if (s < nsteps) load(s);
      cp_async_commit();
    }
  };

  // ST-stage pipeline, one barrier per step: the barrier of step i also releases the stage that
  // step i - 1 read, which is the one refilled (with step i + ST - 1) right after it.
  auto main_loop = [&] {
    for (int i = 0; i < nsteps; ++i) {
      cp_async_wait<ST - 2>();
      __syncthreads();
      if (i + ST - 1 < nsteps) load(i + ST - 1);
      cp_async_commit();
      compute(i);
    }
    cp_async_wait<0>();
    __syncthreads();  // every stage (and, R > 1, the merge tables) free again
  };

  const int group = lane / 4, tq = lane % 4;
  const bf16* bias = static_cast<const bf16*>(p.bias);

  if constexpr (!P) {
    setup(static_cast<int>(blockIdx.x));
    // R == 1: this warp's bias values, requested now so that their latency hides behind the main
    // loop (an item is only a few block steps at high sparsity, so a load at the epilogue was
    // exposed). R > 1 loads them at the epilogue (held across the loop they made r2 variants spill).
    float bias_r[V::kNt][2];
    if constexpr (R == 1) {
#pragma unroll
      for (int nt = 0; nt < V::kNt; ++nt) {
        const int64_t n = static_cast<int64_t>(rows[0]) * B + n_in + nt * 8 + tq * 2;
        bias_r[nt][0] = bias && rows[0] >= 0 ? to_float(bias[n]) : 0.f;
        bias_r[nt][1] = bias && rows[0] >= 0 ? to_float(bias[n + 1]) : 0.f;
      }
    }
    prologue();
    main_loop();
    // Epilogue, one block-row of the group at a time through shared memory. C fragment: rows
    // group / group + 8, columns 2 * (lane % 4) (+1).
    float* out_s = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (rows[r] < 0) continue;  // uniform over the CTA
      const int64_t n0 = static_cast<int64_t>(rows[r]) * B;
      if (slot == r) {
#pragma unroll
        for (int nt = 0; nt < V::kNt; ++nt) {
          const int col = n_in + nt * 8 + tq * 2;
          float b0 = 0.f, b1 = 0.f;
          if constexpr (R == 1) b0 = bias_r[nt][0], b1 = bias_r[nt][1];
          else if (bias) b0 = to_float(bias[n0 + col]), b1 = to_float(bias[n0 + col + 1]);
#pragma unroll
          for (int mt = 0; mt < V::kMt; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              float v0 = acc[mt][nt][half * 2] + b0, v1 = acc[mt][nt][half * 2 + 1] + b1;
              if (p.gelu) v0 = gelu_out(v0, p.out_f32), v1 = gelu_out(v1, p.out_f32);
              const int row = wm * G::kWarpM + mt * 16 + group + half * 8;
              *reinterpret_cast<float2*>(out_s + row * V::kLdo + col) = make_float2(v0, v1);
            }
        }
      }
      __syncthreads();
      if (p.out_f32)
        store_tile<B, V::kLdo, TM, NT>(out_s, m0, p.M, p.N, n0, static_cast<const float*>(p.residual),
                                       static_cast<float*>(p.y));
      else
        store_tile<B, V::kLdo, TM, NT>(out_s, m0, p.M, p.N, n0, static_cast<const bf16*>(p.residual),
                                       static_cast<bf16*>(p.y));
      if (r + 1 < R) __syncthreads();
    }
  } else {
    // Persistent: items from the atomic counter; the next item's first ST - 1 steps load while this
    // item's epilogue stores straight from the accumulators (8 / 4 bytes per lane, 32-byte sectors).
    int item = static_cast<int>(blockIdx.x), parity = 0;
    setup(item);
    prologue();
    while (true) {
      if (tid == 0) {
        const unsigned got = gridDim.x + atomicAdd(&g_tc_persist_state[0], 1u);
        const int next = got >= static_cast<unsigned>(p.items) ? p.items : static_cast<int>(got);
        meta[parity] = next;
        if (next >= p.items) {
          __threadfence();
          if (atomicAdd(&g_tc_persist_state[1], 1u) == gridDim.x - 1) {
            atomicExch(&g_tc_persist_state[0], 0u);
            atomicExch(&g_tc_persist_state[1], 0u);
          }
        }
      }
      main_loop();  // its barriers publish meta[parity]
      const int next = meta[parity];
      parity ^= 1;
      const int64_t em0 = m0;
      int erows[R];
#pragma unroll
      for (int r = 0; r < R; ++r) erows[r] = rows[r];
      if (next < p.items) {
        setup(next);
        prologue();
      }
      int erow = erows[0];  // erows[slot] without a dynamically indexed (local-memory) array
#pragma unroll
      for (int r = 1; r < R; ++r)
        if (slot == r) erow = erows[r];
      if (erow >= 0) {
        const int64_t n0 = static_cast<int64_t>(erow) * B;
#pragma unroll
        for (int nt = 0; nt < V::kNt; ++nt) {
          const int col = n_in + nt * 8 + tq * 2;
          float b0 = 0.f, b1 = 0.f;
          if (bias) b0 = to_float(bias[n0 + col]), b1 = to_float(bias[n0 + col + 1]);
#pragma unroll
          for (int mt = 0; mt < V::kMt; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int64_t m = em0 + wm * G::kWarpM + mt * 16 + group + half * 8;
              if (m >= p.M) continue;
              float v0 = acc[mt][nt][half * 2] + b0, v1 = acc[mt][nt][half * 2 + 1] + b1;
              if (p.gelu) v0 = gelu_out(v0, p.out_f32), v1 = gelu_out(v1, p.out_f32);
              const int64_t off = m * p.N + n0 + col;
              if (p.out_f32) {
                if (p.residual) {
                  const float2 res = *reinterpret_cast<const float2*>(static_cast<const float*>(p.residual) + off);
                  v0 += res.x, v1 += res.y;
                }
                *reinterpret_cast<float2*>(static_cast<float*>(p.y) + off) = make_float2(v0, v1);
              } else {
                if (p.residual) {
                  const float2 res = __bfloat1622float2(
                      *reinterpret_cast<const __nv_bfloat162*>(static_cast<const bf16*>(p.residual) + off));
                  v0 += res.x, v1 += res.y;
                }
                *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.y) + off) = __floats2bfloat162_rn(v0, v1);
              }
            }
        }
      }
      zero_acc();
      if (next >= p.items) break;
      item = next;
    }
  }
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
    const XCopyPlan plan = make_x_plan<float, S::kKc, S::kLds, kTileM, kThreads>(x, p.M, p.K, work.m0);
    auto load = [&](int s) {
      float* xs = stage_base + (s % kStages) * S::kStageFloats;
      const int k = k_begin + s / S::kChunks, kc = (s % S::kChunks) * S::kKc;
      copy_x_tile<float, kXChunks / kThreads, kThreads / (S::kKc / 4), S::kLds, false>(
          xs, plan, int64_t{p.col_idx[k]} * B + kc, x);
      copy_w_block<float, B, S::kKc, S::kLds, kThreads>(xs + kTileM * S::kLds, values + static_cast<int64_t>(k) * B * B + kc);
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
  store_tile<B, S::kLdo, kTileM, kThreads>(out_s, work.m0, p.M, p.N, n0, static_cast<const float*>(p.residual),
                         static_cast<float*>(p.y));
}

// ---------------------------------------------------------------------------------------------
// Host side

// Opts a kernel into the shared memory it may need (above the 48 KiB default) and asks for the
// largest carveout. Once per kernel per process (single device assumed, as the rest of the backend).
template <class Kernel>
void configure_once(Kernel kernel, size_t smem_bytes, std::once_flag& flag) {
  std::call_once(flag, [&] {
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)));
    VITRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          static_cast<int>(cudaSharedmemCarveoutMaxShared)));
  });
}

// The device's opt-in shared memory per block (227 KiB on sm_90).
size_t smem_optin() {
  static const size_t v = [] {
    int dev = 0, bytes = 0;
    VITRT_CUDA_CHECK(cudaGetDevice(&dev));
    VITRT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return static_cast<size_t>(bytes);
  }();
  return v;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Work items for tiles of tm tokens and groups of r block-rows (0: nothing to do).
int64_t work_items(const char* op, int64_t M, const BsrDeviceView& w, int tm, int r) {
  if (M == 0) return 0;
  const int64_t groups = (w.rows / w.block + r - 1) / r;
  const int64_t items = (M + tm - 1) / tm * groups;
  VITRT_CHECK(items < (int64_t{1} << 31), InvalidArgument, op, ": M = ", M, " tokens x ", w.rows / w.block,
              " block-rows is too large for one launch");
  return items;
}

KernelArgs make_args(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, void* y) {
  KernelArgs a{};
  a.x = x, a.M = M, a.K = w.cols, a.N = w.rows, a.block_rows = static_cast<int>(w.rows / w.block);
  a.row_ptr = w.row_ptr, a.col_idx = w.col_idx, a.values = w.values, a.row_order = w.row_order;
  a.bias = bias, a.gelu = gelu, a.residual = residual, a.y = y;
  a.out_f32 = false, a.bc_n = static_cast<int>(w.cols / w.block), a.groups = 0, a.items = 0;
  return a;
}

// ---- bf16 variant table ----

constexpr int kVarTm[] = {64, 128, 256};
// Rows per CTA 4 is left out: with magnitude-pruned (or random) masks few rows share block-columns,
// and every variant costs compile time (all are instantiated for three block sizes).
constexpr int kVarR[] = {1, 2};
constexpr int kVarSt[] = {2, 3};
constexpr int kVarW[] = {4, 8};
constexpr int kNumR = sizeof(kVarR) / sizeof(kVarR[0]);
constexpr int kNumVariants = 3 * kNumR * 2 * 2 * 2;  // tm x r x stages x warps x persistent

constexpr BsrTcConfig variant_config(int i) {
  BsrTcConfig c{};
  c.tile_m = kVarTm[i % 3];
  c.rows_per_cta = kVarR[(i / 3) % kNumR];
  c.stages = kVarSt[(i / (3 * kNumR)) % 2];
  c.warps = kVarW[(i / (6 * kNumR)) % 2];
  c.persistent = (i / (12 * kNumR)) % 2 != 0;
  return c;
}

int variant_index(const BsrTcConfig& c) {
  for (int i = 0; i < kNumVariants; ++i)
    if (variant_config(i) == c) return i;
  return -1;
}

using TcLaunchFn = void (*)(const KernelArgs&);
struct TcEntry {
  TcLaunchFn launch = nullptr;  // null: not compiled for this block size
  size_t base_smem = 0;         // shared memory before the meta tables
};

template <int B, int TM, int R, int ST, int W, bool P>
void launch_tc_variant(const KernelArgs& a) {
  using V = TcVariant<B, TM, R, ST, W, P>;
  auto kernel = bsr_tc_kernel<B, TM, R, ST, W, P>;
  static std::once_flag flag;
  configure_once(kernel, smem_optin(), flag);
  const size_t smem = V::kBaseBytes + tc_meta_bytes(R, a.bc_n);
  VITRT_CHECK(smem <= smem_optin(), InvalidArgument, "cuda bsr_linear_bf16: variant needs ", smem,
              " bytes of shared memory, the device has ", smem_optin());
  int64_t grid = a.items;
  if constexpr (P) {
    int per_sm = 0;
    VITRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, V::kT, smem));
    grid = std::min<int64_t>(grid, static_cast<int64_t>(std::max(per_sm, 1)) * sm_count());
  }
  kernel<<<static_cast<unsigned>(grid), V::kT, smem, current_stream()>>>(a);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

template <int B, int I>
constexpr TcEntry tc_entry() {
  constexpr BsrTcConfig c = variant_config(I);
  using V = TcVariant<B, c.tile_m, c.rows_per_cta, c.stages, c.warps, c.persistent>;
  if constexpr (V::kValid)
    return TcEntry{&launch_tc_variant<B, c.tile_m, c.rows_per_cta, c.stages, c.warps, c.persistent>, V::kBaseBytes};
  else
    return TcEntry{};
}

template <int B, size_t... I>
constexpr std::array<TcEntry, kNumVariants> tc_table(std::index_sequence<I...>) {
  return {tc_entry<B, static_cast<int>(I)>()...};
}

const TcEntry& tc_lookup(int block, int index) {
  static const std::array<TcEntry, kNumVariants> t16 = tc_table<16>(std::make_index_sequence<kNumVariants>{});
  static const std::array<TcEntry, kNumVariants> t32 = tc_table<32>(std::make_index_sequence<kNumVariants>{});
  static const std::array<TcEntry, kNumVariants> t64 = tc_table<64>(std::make_index_sequence<kNumVariants>{});
  return block == 16 ? t16[index] : block == 32 ? t32[index] : t64[index];
}

bool supported_impl(const BsrTcConfig& c, int block, int64_t K) {
  if (block != 16 && block != 32 && block != 64) return false;
  const int i = variant_index(c);
  if (i < 0) return false;
  const TcEntry& e = tc_lookup(block, i);
  if (!e.launch) return false;
  const int64_t bc_n = K > 0 ? K / block : 0;
  if (c.rows_per_cta > 1 && bc_n > kMaxUnionCols) return false;
  return e.base_smem + tc_meta_bytes(c.rows_per_cta, static_cast<int>(std::min<int64_t>(bc_n, kMaxUnionCols))) <=
         kMaxSmemPerCta;
}

// VITRT_BSR_TC_CONFIG, parsed once (empty: unset or invalid, warned about once).
const BsrTcConfig* env_config() {
  static const std::pair<bool, BsrTcConfig> v = []() -> std::pair<bool, BsrTcConfig> {
    const char* s = std::getenv("VITRT_BSR_TC_CONFIG");
    if (!s || !*s) return {false, {}};
    try {
      return {true, parse_bsr_tc_config(s)};
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vitrt: ignoring VITRT_BSR_TC_CONFIG: %s\n", e.what());
      return {false, {}};
    }
  }();
  return v.first ? &v.second : nullptr;
}

template <int B>
void launch_simt(const KernelArgs& a, int64_t grid) {
  static std::once_flag flag;
  constexpr size_t smem = SimtShape<B>::kSmemBytes;
  configure_once(bsr_simt_kernel<B>, smem, flag);
  bsr_simt_kernel<B><<<static_cast<unsigned>(grid), kThreads, smem, current_stream()>>>(a);
  VITRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void check_bsr_linear_args(const char* op, const void* x, int64_t M, const BsrDeviceView& w, const void* residual,
                           const void* y) {
  VITRT_CHECK(M >= 0, InvalidArgument, op, ": negative token count ", M);
  VITRT_CHECK(w.block == 16 || w.block == 32 || w.block == 64, InvalidArgument, op, ": block size ", w.block,
              " is not supported (expected 16, 32 or 64)");
  VITRT_CHECK(w.rows > 0 && w.cols > 0 && w.rows % w.block == 0 && w.cols % w.block == 0, InvalidArgument, op,
              ": weight [", w.rows, ", ", w.cols, "] is not a positive multiple of the block size ", w.block);
  VITRT_CHECK(w.row_ptr, InvalidArgument, op, ": the BSR matrix has no device row_ptr (not uploaded)");
  VITRT_CHECK(w.rows / w.block < (int64_t{1} << 30), InvalidArgument, op, ": too many block-rows");
  if (M == 0) return;
  VITRT_CHECK(x && y && aligned16(x) && aligned16(y) && (!residual || aligned16(residual)) && aligned16(w.values),
              InvalidArgument, op, ": x, y, the residual and the BSR values must be 16-byte aligned device pointers");
}

bool operator==(const BsrTcConfig& a, const BsrTcConfig& b) {
  return a.tile_m == b.tile_m && a.rows_per_cta == b.rows_per_cta && a.stages == b.stages && a.warps == b.warps &&
         a.persistent == b.persistent;
}

std::string to_string(const BsrTcConfig& c) {
  std::string s = "tm" + std::to_string(c.tile_m) + ".r" + std::to_string(c.rows_per_cta) + ".s" +
                  std::to_string(c.stages) + ".w" + std::to_string(c.warps);
  if (c.persistent) s += ".p";
  return s;
}

BsrTcConfig parse_bsr_tc_config(const std::string& text) {
  BsrTcConfig c;
  bool seen[5] = {false, false, false, false, false};
  std::string s = text;
  for (char& ch : s)
    if (ch == ',' || ch == ' ') ch = '.';
  std::stringstream ss(s);
  std::string item;
  auto bad = [&](const std::string& why) {
    return InvalidArgument("bsr tc config '" + text + "': " + why +
                           " (expected e.g. tm128.r1.s2.w4[.p] or tm=128,r=1,s=2,w=4,p=0)");
  };
  while (std::getline(ss, item, '.')) {
    if (item.empty()) continue;
    std::string key, val;
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      key = item.substr(0, eq), val = item.substr(eq + 1);
    } else {
      size_t d = 0;
      while (d < item.size() && !std::isdigit(static_cast<unsigned char>(item[d]))) ++d;
      key = item.substr(0, d), val = item.substr(d);
    }
    if (key == "p" && val.empty()) val = "1";
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(val, &used);
      if (used != val.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw bad("bad value in '" + item + "'");
    }
    int slot = -1;
    if (key == "tm") c.tile_m = v, slot = 0;
    else if (key == "r") c.rows_per_cta = v, slot = 1;
    else if (key == "s") c.stages = v, slot = 2;
    else if (key == "w") c.warps = v, slot = 3;
    else if (key == "p") c.persistent = v != 0, slot = 4;
    else throw bad("unknown key '" + key + "'");
    if (seen[slot]) throw bad("key '" + key + "' given twice");
    seen[slot] = true;
  }
  if (variant_index(c) < 0) throw bad("no such variant (tm 64/128/256, r 1/2/4, s 2/3, w 4/8)");
  return c;
}

bool bsr_tc_config_supported(const BsrTcConfig& c, int block, int64_t K) { return supported_impl(c, block, K); }

std::vector<BsrTcConfig> bsr_tc_variants(int block) {
  std::vector<BsrTcConfig> out;
  if (block != 16 && block != 32 && block != 64) return out;
  for (int i = 0; i < kNumVariants; ++i)
    if (tc_lookup(block, i).launch) out.push_back(variant_config(i));
  return out;
}

// The sweep's winners (bsr_gemm_bench --sweep, H200, 2026-12-02; ViT-B MLP shapes, 50432 tokens):
// 4 warps won every case (8-warp CTAs lost 2-20%); block 64: 128-token tiles, 2 stages
// (tm128.r1.s2.w4: 2.51x / 1.69x at 90% vs 2.45x / 1.61x for the old tm256.r1.s2.w8); block 32:
// 256-token tiles, 3 stages for the long-K (3072) shape, 2 for K = 768 (1.48x / 1.31x at 90% vs
// 1.47x / 1.08x). Block 16 keeps 128-token tiles. The tile is shrunk until there are >= 2 items
// per SM (132 SMs assumed) so small batches still fill the GPU.
BsrDeviceView device_view(const BsrMatrix& w) {
  BsrDeviceView v;
  v.rows = w.rows, v.cols = w.cols, v.block = w.block;
  v.row_ptr = w.cuda.row_ptr.data<int32_t>();
  v.col_idx = w.cuda.col_idx.data<int32_t>();
  v.values = w.cuda.values.raw();
  v.row_order = w.cuda.row_order.data<int32_t>();
  v.nnz = w.cuda.col_idx.numel();
  v.values_core_matrix = w.cuda.values_core_matrix.defined() ? w.cuda.values_core_matrix.raw() : nullptr;
  return v;
}

BsrTcConfig choose_bsr_tc_config(int64_t M, int64_t N, int64_t K, int block, double density) {
  (void)density;
  BsrTcConfig c;  // tm128.r1.s2.w4
  if (block == 32) c.tile_m = 256, c.stages = K >= 2048 ? 3 : 2;
  // Block 16: 256-token tiles, two block-rows per CTA, three stages: the sweep's best or within 0.5%
  // of it on both ViT-B MLP shapes at 0.86 and 0.9 (H100, 2026-12-05: 10-14% faster than
  // tm128.r1.s2.w4; BENCHMARKS.md).
  if (block == 16) c.tile_m = 256, c.rows_per_cta = 2, c.stages = 3;
  const int64_t block_rows = block > 0 ? N / block : 0;
  const int64_t groups = (block_rows + c.rows_per_cta - 1) / c.rows_per_cta;
  while (c.tile_m > 64 && (M + c.tile_m - 1) / c.tile_m * groups < 2 * 132) c.tile_m /= 2;
  if (!supported_impl(c, block, K)) c.rows_per_cta = 1;  // (two block-rows: K / block <= kMaxUnionCols)
  if (!supported_impl(c, block, K)) c = BsrTcConfig{};
  return c;
}

void bsr_linear_bf16(const void* x, int64_t M, const BsrDeviceView& w, const void* bias, bool gelu,
                     const void* residual, DType out_dtype, void* y, const BsrTcConfig* config) {
  constexpr const char* kOp = "cuda bsr_linear_bf16";
  VITRT_CHECK(out_dtype == DType::BF16 || out_dtype == DType::F32, InvalidArgument, kOp,
              ": output must be bfloat16 or float32, got ", dtype_name(out_dtype));
  check_bsr_linear_args(kOp, x, M, w, residual, y);
  BsrTcConfig c;
  if (config) {
    c = *config;
    VITRT_CHECK(supported_impl(c, w.block, w.cols), InvalidArgument, kOp, ": variant ", to_string(c),
                " is not available for block ", w.block, " and K = ", w.cols);
  } else if (const BsrTcConfig* e = env_config(); e && supported_impl(*e, w.block, w.cols)) {
    c = *e;
  } else if (bsr_xres_selected(M, w, residual, out_dtype)) {
    bsr_linear_bf16_xres(x, M, w, bias, gelu, y);  // Hopper, short K (bsr_gemm_xres.cu)
    return;
  } else if (bsr_yres_selected(M, w, residual, out_dtype)) {
    bsr_linear_bf16_yres(x, M, w, bias, gelu, residual, y);  // Hopper, blocks 16 / 32, any K (bsr_gemm_yres.cu)
    return;
  } else if (out_dtype == DType::BF16 && bsr_stream_selected(M, w, out_dtype)) {
    bsr_linear_bf16_stream(x, M, w, bias, gelu, residual, y);  // Hopper, any K (bsr_gemm_stream.cu)
    return;
  } else {
    const int64_t total = (w.rows / w.block) * (w.cols / w.block);
    const double density = w.nnz >= 0 && total > 0 ? static_cast<double>(w.nnz) / static_cast<double>(total) : -1.0;
    c = choose_bsr_tc_config(M, w.rows, w.cols, w.block, density);
  }
  const int64_t items = work_items(kOp, M, w, c.tile_m, c.rows_per_cta);
  if (items == 0) return;
  KernelArgs a = make_args(x, M, w, bias, gelu, residual, y);
  a.out_f32 = out_dtype == DType::F32;
  a.groups = static_cast<int>((a.block_rows + c.rows_per_cta - 1) / c.rows_per_cta);
  a.items = static_cast<int>(items);
  tc_lookup(w.block, variant_index(c)).launch(a);
}

void bsr_linear_f32(const float* x, int64_t M, const BsrDeviceView& w, const float* bias, bool gelu,
                    const float* residual, float* y) {
  constexpr const char* kOp = "cuda bsr_linear_f32";
  check_bsr_linear_args(kOp, x, M, w, residual, y);
  const int64_t grid = work_items(kOp, M, w, kTileM, 1);
  if (grid == 0) return;
  const KernelArgs a = make_args(x, M, w, bias, gelu, residual, y);
  switch (w.block) {
    case 16: return launch_simt<16>(a, grid);
    case 32: return launch_simt<32>(a, grid);
    case 64: return launch_simt<64>(a, grid);
  }
}

}  // namespace vitrt::cuda
