// Fused attention kernels (see attention.h).
//
// Tensor-core kernel (flash_mma_kernel<MmaCfg<HD, BN, MT>, REL, WIN>), FlashAttention-2 style
// (WIN: windowed addressing, a template argument so dense sequences carry none of its arithmetic):
//  - a CTA of 4 warps owns BM = 64*MT query rows of one (sequence, head); each warp MT m16 tiles,
//    whose Q fragments stay in registers for the whole key loop;
//  - keys come in tiles of BN through a two-stage cp.async pipeline (K and V tiles in shared
//    memory, rows padded by 16 bytes so ldmatrix is conflict-free); out-of-range rows are
//    zero-filled, out-of-range keys masked to -inf, and 16-key chunks wholly past the end skipped;
//  - S = Q K^T and O += P V with mma.sync m16n8k16 (bf16 in, fp32 accumulate); online softmax in
//    the log2 domain, per-thread partial row sums reduced across the quad at the end;
//  - decomposed rel-pos (REL): in a prologue every warp multiplies its Q rows with all 2H-1 + 2W-1
//    table rows on the tensor cores (G = Q T^T, tables streamed through the K/V buffers, hi + lo
//    BF16 parts for F32 tables) and scatters G[i, ih - kh + H - 1] -> rel_h[i][kh] and
//    G[i, Lh + iw - kw + W - 1] -> rel_w[i][kw] into fp32 shared buffers laid out like the mma
//    accumulators (see the kernel). The N x N bias is never formed: per n8 score tile one 16-byte
//    load initialises the accumulators with rel_w / scale and one 8-byte load gives rel_h for the
//    FFMA that applies the scale;
//  - output staged through shared memory, written as 16-byte rows; window padding rows skipped.
// CUDA-core kernel (simt_kernel<T, HDMAX, REL>): same online-softmax structure in fp32 with
// 32 x 32 tiles in shared memory; used for F32 and for BF16 shapes the tensor-core kernel does
// not cover (head_dim not in {16, 32, 64, 80, 128}, rel-pos with odd W or head_dim < 64,
// unaligned rows). Accurate expf, fp32 everywhere.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_kernel.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"

namespace vitrt::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace attn;  // KParams, SeqAddr, fdiv, ex2, pack_bf16, kLog2e (attention_kernel.cuh)

// PTX helpers: ops/cuda/ptx.cuh
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldsm_x4;
using ptx::ldsm_x4_t;
using ptx::mma_bf16;
using ptx::smem_u32;

// ---------------------------------------------------------------------------------------------
// Tensor-core flash kernel

constexpr int kThreads = 128;  // 4 warps

// RES_TILES > 0: resident keys. Sequences of at most RES_TILES key tiles (SAM's 14 x 14 windows:
// 196 keys) keep all of their K / V tiles in shared memory at once: every tile is requested up
// front (most before the rel-pos prologue, whose table scratch is the first two tiles' space), so
// a CTA waits for memory about once instead of once per tile, and the key loop has no barriers.
// STEP (resident keys only): key tiles per softmax step; 2 gives 64-key steps over 32-key tiles
// (twice the independent mma chains for Q K^T and half the per-step reductions and bookkeeping).
// ROUNDS (windows with resident keys only): query row blocks of BM processed one after the other
// by the same CTA over the same resident K / V, so that one CTA holds a whole 196-query window
// (K / V, rel-pos tables and row table loaded once per window and head, not once per 128 rows).
// Q fragments then come straight from global memory (no Q staging) and the output is written
// from the accumulators (the K / V buffer stays busy until the last round).
template <int HD_, int BN_, int MT_, int WARPS_ = 4, int RES_TILES_ = 0, int STEP_ = 1, int ROUNDS_ = 1>
struct MmaCfg {
  static constexpr int HD = HD_, BN = BN_, MT = MT_, WARPS = WARPS_, RES_TILES = RES_TILES_, STEP = STEP_;
  static constexpr int ROUNDS = ROUNDS_;
  static constexpr bool RES = RES_TILES > 0;
  static_assert(STEP == 1 || (RES && STEP == 2), "64-key steps need resident keys");
  static_assert(ROUNDS == 1 || RES, "rounds need resident keys");
  // Resident keys (8 warps): two CTAs per SM (16 warps), at most 128 registers per thread.
  static constexpr int MIN_BLOCKS = RES ? 65536 / (128 * 32 * WARPS_) : 1;
  static constexpr int KV_TILES = RES ? RES_TILES : 2;  // tiles held in shared memory
  static constexpr int THREADS = 32 * WARPS;
  static_assert(HD % 16 == 0, "head_dim must be a multiple of 16");
  static_assert(BN % 16 == 0, "key tile must be a multiple of 16");
  // Query rows per CTA: WARPS warps x MT m16 tiles. More warps per CTA share each K/V tile loaded
  // into shared memory among more query rows (fewer loads per mma).
  static constexpr int BM = WARPS * 16 * MT;  // per round
  static constexpr int BMC = BM * ROUNDS;     // per CTA
  static constexpr int LDS = HD + 8;      // smem row stride (elements): +16 bytes, ldmatrix conflict-free
  static constexpr int CPR = HD / 8;      // 16-byte chunks per row
  static constexpr int KS = HD / 16;      // k-steps of Q K^T; also pairs of n8 tiles of P V
  static constexpr int ND = HD / 8;       // n8 tiles of O
  static constexpr int NCH = BN / 16;     // 16-key chunks per key tile
  static constexpr int NT8 = BN / 8;      // n8 tiles per key tile
  static constexpr int NRG = BMC / 16;    // m16 row groups per CTA
  // Bias layouts (floats), see the kernel comment: per pair of key columns (kw even, kw + 1) a
  // block of NRG x 8 x 4 floats, per key row kh a block of NRG x 8 x 2; +8 floats (32 bytes) of
  // padding each, so the quarter-warps' 16-byte loads fall in distinct banks.
  static constexpr int SW = NRG * 32 + 8;
  static constexpr int SH = NRG * 16 + 8;
  static constexpr int q_elems = ROUNDS == 1 ? BM * LDS : 0;
  // KV_TILES x (K, V): 2 pipeline stages, or every tile (RES); also the prologue's table buffer
  // (the first two tiles' space) and the output staging.
  static constexpr int kv_elems = KV_TILES * 2 * BN * LDS;
  static_assert(ROUNDS > 1 || KV_TILES * 2 * BN >= BM, "output staging needs BM rows of the K/V buffer");
  static_assert(!RES || RES_TILES >= 2, "the prologue's tables use the first two tiles' space");
};

// Dynamic shared memory of flash_mma_kernel(_capped)<Cfg, REL> for a relH x relW grid:
// [Qs | bias (aliased)] [K/V stages] [coords].
template <class Cfg>
__host__ __device__ inline size_t mma_region_a(bool rel, int relH, int relW) {
  size_t a = static_cast<size_t>(Cfg::q_elems) * sizeof(bf16);
  if (rel) {
    const size_t b = (static_cast<size_t>(relW / 2) * Cfg::SW + static_cast<size_t>(relH) * Cfg::SH) * sizeof(float);
    a = b > a ? b : a;
  }
  return (a + 15) / 16 * 16;
}
template <class Cfg>
size_t mma_smem_bytes(bool rel, int relH, int relW) {
  size_t b = mma_region_a<Cfg>(rel, relH, relW) + static_cast<size_t>(Cfg::kv_elems) * sizeof(bf16);
  if (rel) b += Cfg::KV_TILES * (Cfg::BN / 2) * sizeof(int2);
  if (Cfg::RES) b += Cfg::RES_TILES * Cfg::BN * sizeof(long long);  // windowed row table
  return b;
}

// One CTA: BM query rows of one (sequence, head). Warp w owns rows [w*16*MT, (w+1)*16*MT) as MT
// m16 tiles, so every K / V fragment read from shared memory feeds MT mma's.
//
// Rel-pos (REL, rel_W even): bias values live in shared memory in the mma accumulator layout.
// For m16 row group rg, lane (g, tq) and key columns (j, j+1) with j even (so kh(j) == kh(j+1)
// and kw(j+1) == kw(j) + 1):
//   BW[(kw/2)*SW + rg*32 + g*4 + h*2 + e] = rel_w[row rg*16 + h*8 + g][kw + e] / scale
//     -> one 16-byte load is exactly the 4 accumulators (c0..c3) of the n8 tile; S starts from it
//        and the mma adds q.k on top, so (q.k + rel_w/scale) * scale*log2e = the scaled logits;
//   BH[kh*SH + rg*16 + g*2 + h] = rel_h[row rg*16 + h*8 + g][kh] * log2e
//     -> one 8-byte load per n8 tile, added in the FFMA that applies the scale.
// Each key tile has a table coords[j/2] = (kh*SH, (kw/2)*SW) for its even columns.
template <class Cfg, bool REL, bool WIN>
__device__ __forceinline__ void flash_mma_body(const KParams& p) {
  constexpr int kThreads = Cfg::THREADS;  // this configuration's CTA size (shadows the file's default)
  constexpr int HD = Cfg::HD, BN = Cfg::BN, MT = Cfg::MT, BM = Cfg::BM;
  constexpr int LDS = Cfg::LDS, CPR = Cfg::CPR, KS = Cfg::KS, ND = Cfg::ND, NCH = Cfg::NCH, NT8 = Cfg::NT8;
  constexpr int SW = Cfg::SW, SH = Cfg::SH;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const size_t region_a = mma_region_a<Cfg>(REL, p.relH, p.relW);
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  float* BWs = reinterpret_cast<float*>(smem_raw);    // REL, aliases Qs (after the Q fragments are loaded)
  float* BHs = BWs + (p.relW / 2) * SW;               // REL
  bf16* KV = reinterpret_cast<bf16*>(smem_raw + region_a);
  int2* coords = reinterpret_cast<int2*>(KV + Cfg::kv_elems);  // REL: [KV_TILES][BN/2]
  // WIN && RES: the source row of each of the window's tokens (-1: padding cell; -2: past the
  // last key), computed once (queries, keys and values of a window are the same rows), not per
  // 16-byte chunk.
  [[maybe_unused]] long long* rowtab = reinterpret_cast<long long*>(coords + (REL ? Cfg::KV_TILES * (Cfg::BN / 2) : 0));
  constexpr bool ROWTAB = WIN && Cfg::RES;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  const int tile = blockIdx.x % p.num_qtiles;
  const int sh = blockIdx.x / p.num_qtiles;
  const int h = sh % p.heads, s = sh / p.heads;
  constexpr int ROUNDS = Cfg::ROUNDS;
  static_assert(ROUNDS == 1 || (REL && WIN), "rounds are for windows with rel-pos");
  const int m0 = tile * Cfg::BMC;
  SeqAddr sa;
  sa.init(p, s);
  // Query rows that can be real. A window on the grid's bottom edge has only hy < ws real rows of
  // tokens, so its tokens from hy * ws on are padding: needed as keys (their k / v are the qkv
  // bias) but with no output row, so a query tile or warp made only of them does no work (SAM's
  // 64 x 64 grid in 14 x 14 windows: 45 CTAs per image and head instead of 50).
  int nq_out = p.nq;
  if constexpr (WIN) nq_out = min(p.nq, min(p.ws, p.Hg - sa.gy0) * p.ws);
  if (m0 >= nq_out) return;  // the whole CTA (uniform: before any barrier)
  // Warps without such rows skip the rel-pos prologue's table GEMM and the key loop (they still
  // load and meet at every barrier).
  const bool active = m0 + warp * 16 * MT * ROUNDS < nq_out;

  const bf16* qb = static_cast<const bf16*>(p.q) + h * HD;
  const bf16* kb = static_cast<const bf16*>(p.k) + h * HD;
  const bf16* vb = static_cast<const bf16*>(p.v) + h * HD;
  const bf16* pq = p.pad_q ? static_cast<const bf16*>(p.pad_q) + h * HD : qb;
  const bf16* pk = p.pad_k ? static_cast<const bf16*>(p.pad_k) + h * HD : kb;
  const bf16* pv = p.pad_v ? static_cast<const bf16*>(p.pad_v) + h * HD : vb;
  if constexpr (ROWTAB) {
    for (int t = tid; t < Cfg::RES_TILES * BN; t += kThreads) rowtab[t] = t < p.nk ? sa.win_row(p, t) : -2;
    __syncthreads();
  }

  // ---- Q tile -> Qs (rows past nq zero-filled); rounds read Q fragments from global memory
#pragma unroll
  for (int it = 0; it < (ROUNDS == 1 ? (BM * CPR + kThreads - 1) / kThreads : 0); ++it) {
    const int i = tid + it * kThreads;
    if ((BM * CPR) % kThreads == 0 || i < BM * CPR) {
      const int r = i / CPR, c = i - r * CPR, t = m0 + r;
      const bf16* src = qb;
      int bytes = 0;
      if (t < p.nq) {
        const long long row = ROWTAB ? rowtab[t] : sa.template qsrc_as<WIN>(p, t);
        src = (row >= 0 ? qb + row * p.ldq : pq) + c * 8;
        bytes = 16;
      }
      cp_async16(Qs + r * LDS + c * 8, src, bytes);
    }
  }
  cp_async_commit();

  // K / V tile kt -> stage. A fully populated tile (every key < nk, the common case) skips the
  // range checks; dense sequences also skip the window arithmetic (WIN is a template argument).
  auto issue_kv = [&](int kt, int stage) {
    bf16* Ks = KV + stage * 2 * BN * LDS;
    bf16* Vs = Ks + BN * LDS;
    const int n0 = kt * BN;
    const bool full = n0 + BN <= p.nk;
#pragma unroll
    for (int it = 0; it < (BN * CPR + kThreads - 1) / kThreads; ++it) {
      const int i = tid + it * kThreads;
      if ((BN * CPR) % kThreads == 0 || i < BN * CPR) {
        const int r = i / CPR, c = i - r * CPR, t = n0 + r;
        const bf16 *ks = kb, *vs = vb;
        int bytes = 0;
        if constexpr (ROWTAB) {  // branch-free: -1 pads with pad_k / pad_v, -2 (past nk) zero-fills
          const long long row = rowtab[t];
          ks = (row >= 0 ? kb + row * p.ldk : pk) + c * 8;
          vs = (row >= 0 ? vb + row * p.ldv : pv) + c * 8;
          bytes = row >= -1 ? 16 : 0;
        } else if (full || t < p.nk) {
          const long long row = sa.template krow_as<WIN>(p, t);
          if (!WIN || row >= 0) {
            ks = kb + row * p.ldk + c * 8;
            vs = vb + row * p.ldv + c * 8;
          } else {
            ks = pk + c * 8;
            vs = pv + c * 8;
          }
          bytes = 16;
        }
        cp_async16(Ks + r * LDS + c * 8, ks, bytes);
        cp_async16(Vs + r * LDS + c * 8, vs, bytes);
      }
    }
    if constexpr (REL) {
      if (tid < BN / 2) {
        const int j = n0 + 2 * tid;
        int2 cd = make_int2(0, 0);
        if (j < p.nk) {
          const int kh = fdiv(j, p.relW, p.inv_relW), kw = j - kh * p.relW;
          cd = make_int2(kh * SH, (kw >> 1) * SW);
        }
        coords[stage * (BN / 2) + tid] = cd;
      }
    }
  };

  unsigned qf[MT][KS][4];
  auto load_qf = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int row = warp * 16 * MT + mt * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      const int col = (lane >> 4) << 3;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        ldsm_x4(qf[mt][ks][0], qf[mt][ks][1], qf[mt][ks][2], qf[mt][ks][3], Qs + row * LDS + ks * 16 + col);
    }
  };

  // Rounds: the A fragments of m16 row group rg (local rows rg*16 ..) straight from global memory
  // (a0 / a2: row g, a1 / a3: row g + 8; columns 2 tq (+ 8) of each k16 step); padding rows read
  // the pad vector, rows past nq are zero.
  [[maybe_unused]] auto load_q_rows = [&](unsigned(&dst)[KS][4], int rg) {
    const unsigned* src[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int t = m0 + rg * 16 + hh * 8 + g;
      const long long row = t < p.nq ? rowtab[t] : -2;
      src[hh] = row == -2 ? nullptr : reinterpret_cast<const unsigned*>((row >= 0 ? qb + row * p.ldq : pq) + 2 * tq);
    }
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      dst[ks][0] = src[0] ? src[0][ks * 8] : 0u;
      dst[ks][1] = src[1] ? src[1][ks * 8] : 0u;
      dst[ks][2] = src[0] ? src[0][ks * 8 + 4] : 0u;
      dst[ks][3] = src[1] ? src[1][ks * 8 + 4] : 0u;
    }
  };

  const int nkt = (p.nk + BN - 1) / BN;  // RES: at most RES_TILES (the plan checks)
  if constexpr (Cfg::RES) {
    // Tiles 2.. now, into their own slots: their loads overlap the prologue's (whose table chunks
    // occupy tiles 0 and 1's space until it ends).
    for (int kt = 2; kt < nkt; ++kt) issue_kv(kt, kt);
    cp_async_commit();
  }

  // ---- rel-pos prologue (attention_kernel.cuh): BH / BW, which overwrite Qs once every warp
  // holds its Q fragments.
  if constexpr (REL) {
    if constexpr (ROUNDS == 1) {
      relpos_prologue<HD, MT, kThreads>(p, m0, active, KV, p.th_lo ? 2 * BN : 4 * BN, BWs, BHs, SW, SH, qf, load_qf);
    } else {  // every round's row groups: rg = warp * MT * ROUNDS + (round * MT + mt)
      unsigned qfa[MT * ROUNDS][KS][4];
      auto load_all = [&]() {
#pragma unroll
        for (int i = 0; i < MT * ROUNDS; ++i) load_q_rows(qfa[i], warp * MT * ROUNDS + i);
      };
      relpos_prologue<HD, MT * ROUNDS, kThreads>(p, m0, active, KV, p.th_lo ? 2 * BN : 4 * BN, BWs, BHs, SW, SH, qfa,
                                                 load_all);
    }
  }

  if constexpr (Cfg::RES) {
    // Tiles 0 and 1 come last (their space held the prologue's tables) and are processed last:
    // the key loop runs 2, 3, ..., nkt - 1, then 0, 1, and waits for them only there.
    for (int kt = 0; kt < nkt && kt < 2; ++kt) issue_kv(kt, kt);
    cp_async_commit();
    if (nkt > 2) cp_async_wait<1>();  // Q and tiles 2.. (already, after a prologue)
    else cp_async_wait<0>();
    __syncthreads();
    if constexpr (!REL) load_qf();
  } else {
    if (nkt > 0) issue_kv(0, 0);
    cp_async_commit();
    if constexpr (!REL) {
      cp_async_wait<1>();  // the Q group
      __syncthreads();
      load_qf();
    }
  }

  // One round of query rows (the only one without rounds); a lambda, so that ROUNDS == 1 compiles
  // to straight-line code.
  auto run_round = [&](const int round) {
  const int rgb = (warp * ROUNDS + round) * MT;  // this round's first m16 row group of the warp
  const bool ractive = ROUNDS == 1 ? active : m0 + rgb * 16 < nq_out;
  if constexpr (ROUNDS > 1) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_q_rows(qf[mt], rgb + mt);
  }
  float o[MT][ND][4];
  float mrow[MT][2], lrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int d = 0; d < ND; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
    mrow[mt][0] = mrow[mt][1] = -INFINITY;
    lrow[mt][0] = lrow[mt][1] = 0.f;
  }

  // Lazy rescaling (FlashAttention-4): the reference maximum m of a row moves only when a tile's
  // row maximum exceeds it by more than kSlack (log2 units), so p stays below 2^kSlack and O's
  // rescaling is skipped by the whole warp for most tiles. The first tile always sets m.
  // Only with resident keys: elsewhere the branch cost registers (and occupancy) that no
  // measurement has shown to pay back.
  constexpr float kSlack = 8.f;
  constexpr bool LAZY = Cfg::RES;
  // Steps of up to STEP tiles. RES with more than 2 tiles: tiles g1 = 2 .. nkt - 1 first, then
  // 0 and 1 (a step never spans the two groups); otherwise 0 .. nkt - 1.
  constexpr int ST = Cfg::STEP;
  const int g1 = (Cfg::RES && nkt > 2) ? 2 : 0;
  int kt = g1;
  for (int done = 0; (Cfg::RES ? done : kt) < nkt;) {  // (without RES, done would equal kt)
    if constexpr (Cfg::RES) {
      if (g1 == 2 && kt == 0) {  // tiles 0 and 1
        cp_async_wait<0>();
        __syncthreads();
      }
    }
    const int cnt = ST == 1 ? 1 : min(ST, (kt < g1 ? g1 : nkt) - kt);  // tiles in this step
    const int stage = Cfg::RES ? kt : kt & 1;  // RES: tile kt + j is in stage kt + j
    if constexpr (!Cfg::RES) {
      if (kt + 1 < nkt) {
        issue_kv(kt + 1, stage ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
    }
    // One step of ST key tiles; instantiated for full and partial steps (each called once, so
    // inlined). Chunk c (16 keys) of the step is chunk c % NCH of tile kt + c / NCH.
    auto process_tile = [&](auto full_tag) {
      constexpr bool FULL = decltype(full_tag)::value;
      constexpr int SCH = ST * NCH, SNT = ST * NT8;  // chunks / n8 tiles per step
      auto k_at = [&](int c) { return KV + (stage + c / NCH) * 2 * BN * LDS + (c % NCH) * 16 * LDS; };
      [[maybe_unused]] auto cd_at = [&](int nt) {  // REL only
        return coords[(stage + nt / NT8) * (BN / 2) + (nt % NT8) * 4 + tq];
      };
      // FULL: every key of the step is real, so the chunk counts and the key mask fold away.
      // (Only the last tile can be partial, and it ends its group: the real keys are a prefix.)
      const int kvalid = FULL ? ST * BN : min(cnt * BN, p.nk - kt * BN);
      const int nch = FULL ? SCH : (kvalid + 15) >> 4;  // 16-key chunks holding real keys

      float sc[MT][SNT][4];
#pragma unroll
      for (int nt = 0; nt < SNT; ++nt) {
        if (nt < 2 * nch) {
          if constexpr (REL) {
            const int off = cd_at(nt).y + g * 4;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const float4 w4 = *reinterpret_cast<const float4*>(BWs + off + (rgb + mt) * 32);
              sc[mt][nt][0] = w4.x;
              sc[mt][nt][1] = w4.y;
              sc[mt][nt][2] = w4.z;
              sc[mt][nt][3] = w4.w;
            }
          } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) sc[mt][nt][0] = sc[mt][nt][1] = sc[mt][nt][2] = sc[mt][nt][3] = 0.f;
          }
        }
      }
#pragma unroll
      for (int c = 0; c < SCH; ++c) {
        if (c < nch) {
          const int krow = (lane & 7) + ((lane >> 4) << 3);
          const int kcol = ((lane >> 3) & 1) << 3;
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3, k_at(c) + krow * LDS + ks * 16 + kcol);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(sc[mt][2 * c], qf[mt][ks], b0, b1);
              mma_bf16(sc[mt][2 * c + 1], qf[mt][ks], b2, b3);
            }
          }
        }
      }

#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Scale (+ rel_h), mask; row maxima.
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < SNT; ++nt) {
          if (nt < 2 * nch) {
            float bh0 = 0.f, bh1 = 0.f;
            if constexpr (REL) {
              const float2 h2 =
                  *reinterpret_cast<const float2*>(BHs + cd_at(nt).x + (rgb + mt) * 16 + g * 2);
              bh0 = h2.x;
              bh1 = h2.y;
            }
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float v0 = fmaf(sc[mt][nt][e], p.scale_log2, bh0);
              float v1 = fmaf(sc[mt][nt][2 + e], p.scale_log2, bh1);
              if (!FULL && nt * 8 + 2 * tq + e >= kvalid) v0 = v1 = -INFINITY;
              sc[mt][nt][e] = v0;
              sc[mt][nt][2 + e] = v1;
              mx0 = fmaxf(mx0, v0);
              mx1 = fmaxf(mx1, v1);
            }
          }
        }
        mx0 = quad_max(mx0);
        mx1 = quad_max(mx1);
        // -inf + kSlack = -inf: a row's first tile with a real key sets m.
        const float mn0 = LAZY ? (mx0 > mrow[mt][0] + kSlack ? mx0 : mrow[mt][0]) : fmaxf(mrow[mt][0], mx0);
        const float mn1 = LAZY ? (mx1 > mrow[mt][1] + kSlack ? mx1 : mrow[mt][1]) : fmaxf(mrow[mt][1], mx1);
        const float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
        const float al0 = ex2(mrow[mt][0] - mu0), al1 = ex2(mrow[mt][1] - mu1);  // 1 when m stays
        mrow[mt][0] = mn0;
        mrow[mt][1] = mn1;
        float ls0 = 0.f, ls1 = 0.f;
#pragma unroll
        for (int nt = 0; nt < SNT; ++nt) {
          if (nt < 2 * nch) {
            sc[mt][nt][0] = ex2(sc[mt][nt][0] - mu0);
            sc[mt][nt][1] = ex2(sc[mt][nt][1] - mu0);
            sc[mt][nt][2] = ex2(sc[mt][nt][2] - mu1);
            sc[mt][nt][3] = ex2(sc[mt][nt][3] - mu1);
            ls0 += sc[mt][nt][0] + sc[mt][nt][1];
            ls1 += sc[mt][nt][2] + sc[mt][nt][3];
          }
        }
        lrow[mt][0] = lrow[mt][0] * al0 + ls0;
        lrow[mt][1] = lrow[mt][1] * al1 + ls1;
        if (!LAZY || __any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {  // warp-uniform
#pragma unroll
          for (int d = 0; d < ND; ++d) {
            o[mt][d][0] *= al0;
            o[mt][d][1] *= al0;
            o[mt][d][2] *= al1;
            o[mt][d][3] *= al1;
          }
        }
      }

      // O += P V
#pragma unroll
      for (int c = 0; c < SCH; ++c) {
        if (c < nch) {
          unsigned a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = pack_bf16(sc[mt][2 * c][0], sc[mt][2 * c][1]);
            a[mt][1] = pack_bf16(sc[mt][2 * c][2], sc[mt][2 * c][3]);
            a[mt][2] = pack_bf16(sc[mt][2 * c + 1][0], sc[mt][2 * c + 1][1]);
            a[mt][3] = pack_bf16(sc[mt][2 * c + 1][2], sc[mt][2 * c + 1][3]);
          }
          const int vrow = (lane & 7) + (((lane >> 3) & 1) << 3);
          const int vcol = (lane >> 4) << 3;
          const bf16* Vc = k_at(c) + BN * LDS;  // V follows K in each tile's slot
#pragma unroll
          for (int dp = 0; dp < KS; ++dp) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(b0, b1, b2, b3, Vc + vrow * LDS + dp * 16 + vcol);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(o[mt][2 * dp], a[mt], b0, b1);
              mma_bf16(o[mt][2 * dp + 1], a[mt], b2, b3);
            }
          }
        }
      }
        };
    if (ractive) {
      if (cnt == ST && (kt + ST) * BN <= p.nk) process_tile(std::true_type{});
      else process_tile(std::false_type{});
    }
    if constexpr (!Cfg::RES) __syncthreads();  // the stage is refilled by the next prefetch
    if constexpr (Cfg::RES) {
      done += cnt;
      kt += cnt;
      if (kt >= nkt) kt = 0;
    } else {
      ++kt;
    }
  }
  bf16* ob = static_cast<bf16*>(p.out) + h * HD;
  if constexpr (ROUNDS > 1) {
    // Rounds: K / V stay resident for the next round; 4-byte stores straight from the accumulators.
    if (ractive) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float l0 = quad_sum(lrow[mt][0]), l1 = quad_sum(lrow[mt][1]);
        const float inv[2] = {l0 > 0.f ? 1.f / l0 : 0.f, l1 > 0.f ? 1.f / l1 : 0.f};
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int t = m0 + (rgb + mt) * 16 + hh * 8 + g;
          const long long row = t < p.nq ? rowtab[t] : -1;
          if (row >= 0) {
            bf16* dst = ob + row * p.ldo + 2 * tq;
#pragma unroll
            for (int d = 0; d < ND; ++d)
              *reinterpret_cast<unsigned*>(dst + d * 8) =
                  pack_bf16(o[mt][d][2 * hh] * inv[hh], o[mt][d][2 * hh + 1] * inv[hh]);
          }
        }
      }
    }
    return;
  }
  if constexpr (Cfg::RES) __syncthreads();  // every warp is done with K / V: KV is free for the output

  // ---- epilogue: normalise, stage this warp's rows in the (now free) K/V buffer, write 16-byte
  // chunks of real rows.
  if (!active) return;
  bf16* St = KV;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float l0 = lrow[mt][0], l1 = lrow[mt][1];
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int r0 = warp * 16 * MT + mt * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int d = 0; d < ND; ++d) {
      *reinterpret_cast<unsigned*>(St + r0 * LDS + d * 8 + 2 * tq) = pack_bf16(o[mt][d][0] * inv0, o[mt][d][1] * inv0);
      *reinterpret_cast<unsigned*>(St + r1 * LDS + d * 8 + 2 * tq) = pack_bf16(o[mt][d][2] * inv1, o[mt][d][3] * inv1);
    }
  }
  __syncwarp();
  for (int i = lane; i < 16 * MT * CPR; i += 32) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + warp * 16 * MT + r;
    if (t < p.nq) {
      const long long row = ROWTAB ? rowtab[t] : sa.template qrow_as<WIN>(p, t);
      if (!WIN || row >= 0)
        *reinterpret_cast<uint4*>(ob + row * p.ldo + c * 8) =
            *reinterpret_cast<const uint4*>(St + (warp * 16 * MT + r) * LDS + c * 8);
    }
  }
  };  // run_round
  if constexpr (ROUNDS == 1) {
    run_round(0);
  } else {
    for (int round = 0; round < ROUNDS; ++round) run_round(round);
  }
}

// The kernel, with and without a register cap: __launch_bounds__ with a minimum of one block
// per SM is not the same as none (ptxas then allows itself more registers per thread).
template <class Cfg, bool REL, bool WIN>
__global__ void __launch_bounds__(Cfg::THREADS) flash_mma_kernel(const KParams p) {
  flash_mma_body<Cfg, REL, WIN>(p);
}
template <class Cfg, bool REL, bool WIN>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS) flash_mma_kernel_capped(const KParams p) {
  flash_mma_body<Cfg, REL, WIN>(p);
}

// ---------------------------------------------------------------------------------------------
// CUDA-core kernel (fp32 compute), T = float or bf16 storage.

constexpr int sBM = 32, sBN = 32;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

template <int HDMAX>
size_t simt_smem_bytes(bool rel, int relH, int relW) {
  size_t f = static_cast<size_t>(sBM) * (HDMAX + 1) + static_cast<size_t>(sBN) * (HDMAX + 1) +
             static_cast<size_t>(sBN) * HDMAX + static_cast<size_t>(sBM) * (sBN + 1);
  if (rel) f += static_cast<size_t>(sBM) * ((relH + relW) | 1) + sBN;
  return f * sizeof(float);
}

template <class T, int HDMAX, bool REL>
__global__ void __launch_bounds__(kThreads) simt_kernel(const KParams p) {
  constexpr int QST = HDMAX + 1, J = HDMAX / 16, PST = sBN + 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* Qs = reinterpret_cast<float*>(smem_raw);
  float* Ks = Qs + sBM * QST;
  float* Vs = Ks + sBN * QST;
  float* Ps = Vs + sBN * HDMAX;
  float* bias_s = Ps + sBM * PST;
  const int BST = (p.relH + p.relW) | 1;
  int* coords = reinterpret_cast<int*>(bias_s + sBM * BST);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ty = tid >> 4, tx = tid & 15;  // rows ty*4 + i, keys tx + 16*j, O columns tx + 16*jj
  const int hd = p.hd;

  const int tile = blockIdx.x % p.num_qtiles;
  const int sh = blockIdx.x / p.num_qtiles;
  const int h = sh % p.heads, s = sh / p.heads;
  const int m0 = tile * sBM;
  SeqAddr sa;
  sa.init(p, s);

  const T* qb = static_cast<const T*>(p.q) + h * hd;
  const T* kb = static_cast<const T*>(p.k) + h * hd;
  const T* vb = static_cast<const T*>(p.v) + h * hd;
  const T* pq = p.pad_q ? static_cast<const T*>(p.pad_q) + h * hd : qb;
  const T* pk = p.pad_k ? static_cast<const T*>(p.pad_k) + h * hd : kb;
  const T* pv = p.pad_v ? static_cast<const T*>(p.pad_v) + h * hd : vb;

  // Q tile (zeros past nq)
  for (int r = warp; r < sBM; r += kThreads / 32) {
    const int t = m0 + r;
    const T* src = nullptr;
    if (t < p.nq) {
      const long long row = sa.qsrc(p, t);
      src = row >= 0 ? qb + row * p.ldq : pq;
    }
    for (int c = lane; c < hd; c += 32) Qs[r * QST + c] = src ? to_f(src[c]) : 0.f;
  }
  __syncthreads();

  if constexpr (REL) {
    const int relH = p.relH, relW = p.relW, HW = relH + relW;
    const float* th = static_cast<const float*>(p.th);
    const float* tw = static_cast<const float*>(p.tw);
    for (int i = tid; i < sBM * HW; i += kThreads) {
      const int r = i / HW, u = i - r * HW, t = m0 + r;
      float acc = 0.f;
      if (t < p.nq) {
        const int ih = fdiv(t, relW, p.inv_relW), iw = t - ih * relW;
        const float* trow = u < relH ? th + static_cast<long long>(ih - u + relH - 1) * hd
                                     : tw + static_cast<long long>(iw - (u - relH) + relW - 1) * hd;
        const float* qr = Qs + r * QST;
        for (int d = 0; d < hd; ++d) acc = fmaf(qr[d], trow[d], acc);
      }
      bias_s[r * BST + u] = acc;
    }
    // (made visible by the first __syncthreads of the key loop)
  }

  float o[4][J];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jj = 0; jj < J; ++jj) o[i][jj] = 0.f;
  float mrow[4], lpart[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) mrow[i] = -INFINITY, lpart[i] = 0.f;

  const int nkt = (p.nk + sBN - 1) / sBN;
  for (int kt = 0; kt < nkt; ++kt) {
    const int n0 = kt * sBN;
    for (int r = warp; r < sBN; r += kThreads / 32) {
      const int t = n0 + r;
      const T *ks = nullptr, *vs = nullptr;
      if (t < p.nk) {
        const long long row = sa.krow(p, t);
        ks = row >= 0 ? kb + row * p.ldk : pk;
        vs = row >= 0 ? vb + row * p.ldv : pv;
      }
      for (int c = lane; c < hd; c += 32) {
        Ks[r * QST + c] = ks ? to_f(ks[c]) : 0.f;
        Vs[r * HDMAX + c] = vs ? to_f(vs[c]) : 0.f;
      }
    }
    if constexpr (REL) {
      if (tid < sBN) {
        const int j = n0 + tid;
        int cd = 0;
        if (j < p.nk) {
          const int kh = fdiv(j, p.relW, p.inv_relW), kw = j - kh * p.relW;
          cd = kh | ((p.relH + kw) << 16);
        }
        coords[tid] = cd;
      }
    }
    __syncthreads();

    float acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i][0] = acc[i][1] = 0.f;
    const float* q0 = Qs + (ty * 4) * QST;
    const float* k0 = Ks + tx * QST;
#pragma unroll 4
    for (int d = 0; d < hd; ++d) {
      const float a0 = q0[d], a1 = q0[QST + d], a2 = q0[2 * QST + d], a3 = q0[3 * QST + d];
      const float b0 = k0[d], b1 = k0[16 * QST + d];
      acc[0][0] = fmaf(a0, b0, acc[0][0]);
      acc[0][1] = fmaf(a0, b1, acc[0][1]);
      acc[1][0] = fmaf(a1, b0, acc[1][0]);
      acc[1][1] = fmaf(a1, b1, acc[1][1]);
      acc[2][0] = fmaf(a2, b0, acc[2][0]);
      acc[2][1] = fmaf(a2, b1, acc[2][1]);
      acc[3][0] = fmaf(a3, b0, acc[3][0]);
      acc[3][1] = fmaf(a3, b1, acc[3][1]);
    }
    float alpha[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty * 4 + i;
      float v[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int c = tx + 16 * j;
        // As the reference: (q * scale) . k, then + rel_h + rel_w.
        float x = acc[i][j] * p.scale;
        if constexpr (REL) {
          const int cd = coords[c];
          x = x + bias_s[r * BST + (cd & 0xffff)] + bias_s[r * BST + (cd >> 16)];
        }
        v[j] = n0 + c < p.nk ? x : -INFINITY;
      }
      float mx = fmaxf(v[0], v[1]);
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(mrow[i], mx);
      const float mu = mn == -INFINITY ? 0.f : mn;
      alpha[i] = expf(mrow[i] - mu);
      mrow[i] = mn;
      const float p0 = expf(v[0] - mu), p1 = expf(v[1] - mu);
      lpart[i] = lpart[i] * alpha[i] + (p0 + p1);
      Ps[r * PST + tx] = p0;
      Ps[r * PST + tx + 16] = p1;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < J; ++jj) o[i][jj] *= alpha[i];
    __syncthreads();

    const int cmax = min(sBN, p.nk - n0);
    const float* p0r = Ps + (ty * 4) * PST;
    for (int c = 0; c < cmax; ++c) {
      const float a0 = p0r[c], a1 = p0r[PST + c], a2 = p0r[2 * PST + c], a3 = p0r[3 * PST + c];
      const float* vr = Vs + c * HDMAX + tx;
#pragma unroll
      for (int jj = 0; jj < J; ++jj) {
        const float b = vr[16 * jj];
        o[0][jj] = fmaf(a0, b, o[0][jj]);
        o[1][jj] = fmaf(a1, b, o[1][jj]);
        o[2][jj] = fmaf(a2, b, o[2][jj]);
        o[3][jj] = fmaf(a3, b, o[3][jj]);
      }
    }
    __syncthreads();
  }

  T* ob = static_cast<T*>(p.out) + h * hd;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float l = lpart[i];
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int t = m0 + ty * 4 + i;
    if (t >= p.nq) continue;
    const long long row = sa.qrow(p, t);
    if (row < 0) continue;
    T* orow = ob + row * p.ldo;
#pragma unroll
    for (int jj = 0; jj < J; ++jj) {
      const int c = tx + 16 * jj;
      if (c < hd) orow[c] = from_f<T>(o[i][jj] * inv);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Small helper kernels

template <class Tin>
__device__ void prepare_one(const PrepJob& j, long long first, long long step) {
  const Tin* src = static_cast<const Tin*>(j.src);
  const int rows = j.rows, want = j.want, hd = j.hd;
  const long long n = static_cast<long long>(want) * hd;
  for (long long idx = first; idx < n; idx += step) {
    const int d = static_cast<int>(idx / hd), c = static_cast<int>(idx - static_cast<long long>(d) * hd);
    float v;
    if (rows == want) {
      v = to_f(src[idx]);
    } else {
      // PyTorch linear interpolation, align_corners=False (as cpu::interpolate_linear_rows).
      const float scale = static_cast<float>(rows) / static_cast<float>(want);
      float sidx = __fmul_rn(scale, static_cast<float>(d) + 0.5f) - 0.5f;
      if (sidx < 0.f) sidx = 0.f;
      const int i0 = static_cast<int>(sidx);
      const int i1 = i0 + (i0 < rows - 1 ? 1 : 0);
      const float w1 = fminf(fmaxf(sidx - static_cast<float>(i0), 0.f), 1.f), w0 = 1.f - w1;
      const float a = to_f(src[static_cast<long long>(i0) * hd + c]);
      const float b = to_f(src[static_cast<long long>(i1) * hd + c]);
      v = __fmaf_rn(w0, a, __fmul_rn(w1, b));
    }
    if (j.out_f32) {
      j.out_f32[idx] = v;
    } else {
      const bf16 hi = __float2bfloat16_rn(v);
      static_cast<bf16*>(j.out_hi)[idx] = hi;
      if (j.out_lo) static_cast<bf16*>(j.out_lo)[idx] = __float2bfloat16_rn(v - __bfloat162float(hi));
    }
  }
}

struct PrepJobs {
  PrepJob job[kMaxPrepJobs];
};
// blockIdx.y: the job.
__global__ void prepare_inputs_kernel(const PrepJobs jobs) {
  const PrepJob& j = jobs.job[blockIdx.y];
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  if (j.src_bf16) prepare_one<bf16>(j, first, step);
  else prepare_one<float>(j, first, step);
}

int grid_for(long long n) { return static_cast<int>(std::min<long long>((n + 255) / 256, 4096)); }

// ---------------------------------------------------------------------------------------------
// Launch plumbing

template <class Cfg, bool REL, bool WIN>
void launch_mma_as(const KParams& p, int blocks, size_t smem, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  auto kernel = [] {  // only the chosen kernel is instantiated
    if constexpr (Cfg::MIN_BLOCKS > 1) return flash_mma_kernel_capped<Cfg, REL, WIN>;
    else return flash_mma_kernel<Cfg, REL, WIN>;
  }();
  ensure_smem(kernel, smem, configured, "bf16 tensor-core");
  kernel<<<blocks, Cfg::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_mma_kernel launch");
}
template <class Cfg, bool REL>
void launch_mma(const KParams& p, int blocks, size_t smem, cudaStream_t stream) {
  if constexpr (Cfg::ROUNDS > 1) {  // windows only (mma_plan_for)
    VITRT_CHECK(p.ws > 0 && REL, InvalidArgument, "cuda attention: query rounds are for windows with rel-pos");
    launch_mma_as<Cfg, REL, true>(p, blocks, smem, stream);
  } else {
    if (p.ws > 0) launch_mma_as<Cfg, REL, true>(p, blocks, smem, stream);
    else launch_mma_as<Cfg, REL, false>(p, blocks, smem, stream);
  }
}

// The tensor-core configuration for one problem (fn == nullptr: not covered).
struct MmaPlan {
  void (*fn)(const KParams&, int, size_t, cudaStream_t) = nullptr;
  int bm = 0;
  size_t smem = 0;
};

template <class Cfg, bool REL>
MmaPlan make_plan(int relH, int relW) {
  MmaPlan pl;
  pl.fn = &launch_mma<Cfg, REL>;
  pl.bm = Cfg::BMC;
  pl.smem = mma_smem_bytes<Cfg>(REL, relH, relW);
  return pl;
}

// Key tile BN and m16 tiles per warp MT (and 4 or 8 warps), by head dim and sequence length;
// measured on an H200 (scripts/device-check.sh attn-sweep, 2026-12-02, ms per batch of 32 in the
// encoder, all blocks of each kind: 4 global ones, 8 (vit_b) / 28 (vit_h) windowed ones):
//   hd 64 global:   1x32 39.4, 1x64 39.6, 2x64 33.2, 1x32w8 37.9, 1x64w8 43.2
//   hd 64 windowed: 1x32 10.2, 1x64 11.9, 2x64 11.4, 1x32w8  9.8, 1x64w8 14.3
//   hd 80 global:   1x32 77.8, 1x64 85.3, 2x64 56.5
//   hd 80 windowed: 1x32 61.4, 1x64 69.9, 1x32w8 57.6 (2x64 not measured per operator)
// (MT x BN; MT = 2 reuses every K / V fragment for two m-tiles but needs ~220 registers; w8: 8-warp
// CTAs, 128 query rows share each K / V tile.)
// Windowed default since: 1x32w8r, the 1x32w8 tile with resident keys (MmaCfg::RES_TILES); then
// 1x32w8r2, the same with 64-key softmax steps (MmaCfg::STEP).
// VITRT_ATTN_TILE=<tile> or <global tile>,<windowed tile> (tiles 1x32, 1x64, 2x64, 1x32w8, 1x64w8,
// 1x32w8r, 1x32w8r2, 1x32w8rx2: windows with rel-pos only, a whole window per CTA in two rounds)
// overrides the table below for head dims 64 and 80, for benchmark sweeps on the GPU machine
// (scripts/device-check.sh); unset in normal use. Read once per process.
const std::string& tile_override(bool long_seq) {
  static const std::pair<std::string, std::string> v = [] {
    const char* e = std::getenv("VITRT_ATTN_TILE");
    const std::string s = e ? e : "";
    const size_t comma = s.find(',');
    return comma == std::string::npos ? std::pair{s, s} : std::pair{s.substr(0, comma), s.substr(comma + 1)};
  }();
  return long_seq ? v.first : v.second;
}

// Resident-key tiles of the windowed configuration: 7 x 32 keys hold SAM's 196-key windows.
constexpr int kResidentTiles = 7;

// The plan of a named tile for head dim HD (no plan for an unknown name, nor for a tile the problem
// does not fit: resident keys ("...r...") need at most 7 x 32 keys, rounds a window with rel-pos).
template <int HD, bool REL>
MmaPlan plan_for_tile(const std::string& tile, int relH, int relW, bool resident, bool windowed) {
  if (tile == "1x32") return make_plan<MmaCfg<HD, 32, 1>, REL>(relH, relW);
  if (tile == "1x64") return make_plan<MmaCfg<HD, 64, 1>, REL>(relH, relW);
  if (tile == "2x64") return make_plan<MmaCfg<HD, 64, 2>, REL>(relH, relW);
  if (tile == "1x32w8") return make_plan<MmaCfg<HD, 32, 1, 8>, REL>(relH, relW);
  if (tile == "1x64w8") return make_plan<MmaCfg<HD, 64, 1, 8>, REL>(relH, relW);
  if (!resident) return {};
  if (tile == "1x32w8r") return make_plan<MmaCfg<HD, 32, 1, 8, kResidentTiles>, REL>(relH, relW);
  if (tile == "1x32w8r2") return make_plan<MmaCfg<HD, 32, 1, 8, kResidentTiles, 2>, REL>(relH, relW);
  if constexpr (REL) {
    if (tile == "1x32w8rx2" && windowed) return make_plan<MmaCfg<HD, 32, 1, 8, kResidentTiles, 1, 2>, REL>(relH, relW);
  }
  return {};
}

template <bool REL>
MmaPlan mma_plan_for(int hd, int64_t nq, int64_t nk, int relH, int relW, bool windowed) {
  const bool long_seq = nq >= 1024;
  const bool resident = nk <= kResidentTiles * 32;
  if (const std::string& tile = tile_override(long_seq);
      !tile.empty() && (hd == 64 || hd == 80)) {
    const MmaPlan pl = hd == 64 ? plan_for_tile<64, REL>(tile, relH, relW, resident, windowed)
                                : plan_for_tile<80, REL>(tile, relH, relW, resident, windowed);
    if (pl.fn) return pl;
  }
  switch (hd) {
    case 64:
      if (long_seq) return make_plan<MmaCfg<64, 64, 2>, REL>(relH, relW);
      return resident ? make_plan<MmaCfg<64, 32, 1, 8, kResidentTiles, 2>, REL>(relH, relW)
                      : make_plan<MmaCfg<64, 32, 1, 8>, REL>(relH, relW);
    case 80:
      if (long_seq) return make_plan<MmaCfg<80, 64, 2>, REL>(relH, relW);
      return resident ? make_plan<MmaCfg<80, 32, 1, 8, kResidentTiles, 2>, REL>(relH, relW)
                      : make_plan<MmaCfg<80, 32, 1, 8>, REL>(relH, relW);
    case 128: return make_plan<MmaCfg<128, 64, 1>, REL>(relH, relW);
  }
  if constexpr (!REL) {  // mask decoder: few queries -> one m-tile per warp
    switch (hd) {
      case 16:
        return nq > 64 ? make_plan<MmaCfg<16, 64, 2>, false>(relH, relW) : make_plan<MmaCfg<16, 64, 1>, false>(relH, relW);
      case 32:
        return nq > 64 ? make_plan<MmaCfg<32, 64, 2>, false>(relH, relW) : make_plan<MmaCfg<32, 64, 1>, false>(relH, relW);
    }
  }
  return {};
}

int optin_smem_limit() {
  static const int v = max_optin_smem();
  return v;
}

template <class T, int HDMAX, bool REL>
void launch_simt(const KParams& p, int blocks, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  const size_t smem = simt_smem_bytes<HDMAX>(REL, p.relH, p.relW);
  ensure_smem(simt_kernel<T, HDMAX, REL>, smem, configured, "cuda-core");
  simt_kernel<T, HDMAX, REL><<<blocks, kThreads, smem, stream>>>(p);
  check(cudaGetLastError(), "attention simt_kernel launch");
}

template <class T, bool REL>
void dispatch_simt(const KParams& p, int blocks, cudaStream_t stream) {
  if (p.hd <= 32) launch_simt<T, 32, REL>(p, blocks, stream);
  else if (p.hd <= 64) launch_simt<T, 64, REL>(p, blocks, stream);
  else if (p.hd <= 128) launch_simt<T, 128, REL>(p, blocks, stream);
  else launch_simt<T, 256, REL>(p, blocks, stream);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

namespace {
MmaPlan mma_plan(const AttentionArgs& a) {
  if (!a.bf16) return {};
  const bool rel = a.rel_h != nullptr;
  if (rel && (a.rel_W % 2 != 0 || a.rel_H < 1 || a.rel_H > 8192 || a.rel_W > 8192)) return {};
  if (a.ldq % 8 || a.ldk % 8 || a.ldv % 8 || a.ldo % 8) return {};
  for (const void* ptr : std::initializer_list<const void*>{a.q, a.k, a.v, a.out})
    if (!aligned16(ptr)) return {};
  if (a.window > 0)
    for (const void* ptr : std::initializer_list<const void*>{a.pad_q, a.pad_k, a.pad_v})
      if (!aligned16(ptr)) return {};
  const int relH = rel ? static_cast<int>(a.rel_H) : 0, relW = rel ? static_cast<int>(a.rel_W) : 0;
  MmaPlan pl = rel ? mma_plan_for<true>(a.head_dim, a.nq, a.nk, relH, relW, a.window > 0)
                   : mma_plan_for<false>(a.head_dim, a.nq, a.nk, relH, relW, a.window > 0);
  if (pl.fn && pl.smem > static_cast<size_t>(optin_smem_limit())) return {};  // huge rel grid: CUDA-core kernel
  return pl;
}
}  // namespace

bool attention_uses_tensor_cores(const AttentionArgs& a) { return mma_plan(a).fn != nullptr; }

void attention_launch(const AttentionArgs& a, cudaStream_t stream) {
  const bool rel = a.rel_h != nullptr;
  VITRT_CHECK(a.heads >= 1 && a.head_dim >= 1 && a.nq >= 0 && a.nk >= 0 && a.num_seq >= 0, InvalidArgument,
              "cuda attention: bad sizes");
  VITRT_CHECK(a.head_dim <= 256, InvalidArgument, "cuda attention: head_dim ", a.head_dim, " > 256 is not supported");
  VITRT_CHECK(a.nq < (1 << 22) && a.nk < (1 << 22), InvalidArgument, "cuda attention: sequence too long");
  VITRT_CHECK((a.rel_w != nullptr) == rel, InvalidArgument, "cuda attention: rel_h and rel_w go together");
  if (rel)
    VITRT_CHECK(a.rel_H >= 1 && a.rel_W >= 1 && a.nq == a.rel_H * a.rel_W && a.nk == a.nq && a.rel_H + a.rel_W < 32768,
                InvalidArgument, "cuda attention: rel-pos grid ", a.rel_H, "x", a.rel_W, " does not match ", a.nq,
                " queries / ", a.nk, " keys");
  KParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.ldq = a.ldq;
  p.ldk = a.ldk;
  p.ldv = a.ldv;
  p.ldo = a.ldo;
  p.heads = a.heads;
  p.hd = a.head_dim;
  p.nq = static_cast<int>(a.nq);
  p.nk = static_cast<int>(a.nk);
  VITRT_CHECK(a.q_share >= 1 && a.q_share <= a.num_seq + (a.num_seq == 0) && a.q_share < (int64_t{1} << 31) &&
                  (a.q_share == 1 || (a.window == 0 && a.num_seq % a.q_share == 0)),
              InvalidArgument, "cuda attention: q_share ", a.q_share, " does not divide ", a.num_seq,
              " dense sequences");
  p.q_share = static_cast<int>(a.q_share);
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  if (rel) {
    p.th = a.rel_h;
    p.tw = a.rel_w;
    p.th_lo = a.rel_h_lo && a.rel_w_lo ? a.rel_h_lo : nullptr;
    p.tw_lo = a.rel_h_lo && a.rel_w_lo ? a.rel_w_lo : nullptr;
    p.relH = static_cast<int>(a.rel_H);
    p.relW = static_cast<int>(a.rel_W);
    p.inv_relW = 1.f / static_cast<float>(a.rel_W);
  }
  if (a.window > 0) {
    VITRT_CHECK(a.nq == a.window * a.window && a.nk == a.nq && a.grid_H >= 1 && a.grid_W >= 1 && a.pad_q &&
                    a.pad_k && a.pad_v,
                InvalidArgument, "cuda attention: bad windowed arguments");
    p.ws = static_cast<int>(a.window);
    p.Hg = static_cast<int>(a.grid_H);
    p.Wg = static_cast<int>(a.grid_W);
    p.nwy = static_cast<int>((a.grid_H + a.window - 1) / a.window);
    p.nwx = static_cast<int>((a.grid_W + a.window - 1) / a.window);
    p.inv_ws = 1.f / static_cast<float>(a.window);
    p.pad_q = a.pad_q;
    p.pad_k = a.pad_k;
    p.pad_v = a.pad_v;
    VITRT_CHECK(a.num_seq % (static_cast<int64_t>(p.nwy) * p.nwx) == 0,
                InvalidArgument, "cuda attention: num_seq ", a.num_seq, " is not a whole number of images");
  }
  if (a.num_seq == 0 || a.nq == 0) return;
  if (!rel && a.window == 0 && few_keys_supported(p, a.bf16, a.num_seq)) {  // attention_few_keys.cu
    few_keys_launch(p, a.bf16, static_cast<int>(a.num_seq), stream);
    return;
  }
  const MmaPlan plan = mma_plan(a);
  const bool tc = plan.fn != nullptr;
  VITRT_CHECK(!rel || a.rel_bf16 == tc, InvalidArgument, "cuda attention: rel-pos tables must be ",
              tc ? "BF16" : "F32", " for this problem (see attention_uses_tensor_cores)");
  if (tc && rel)
    for (const void* ptr : std::initializer_list<const void*>{p.th, p.tw, p.th_lo, p.tw_lo})
      VITRT_CHECK(aligned16(ptr), InvalidArgument, "cuda attention: rel-pos tables must be 16-byte aligned");
  if (tc && rel) {  // Hopper: the wgmma kernel for 14 x 14 windows (attention_wgmma_windowed.cu)
    if (const size_t smem = wgmma_windowed_smem(p, optin_smem_limit()); smem > 0) {
      p.num_qtiles = 1;
      const long long blocks = static_cast<long long>(a.heads) * a.num_seq;
      VITRT_CHECK(blocks <= INT_MAX, InvalidArgument, "cuda attention: problem too large (", blocks, " blocks)");
      wgmma_windowed_launch(p, smem, static_cast<int>(blocks), stream);
      return;
    }
  }
  if (tc && !rel && a.window == 0) {  // Hopper: short sequences, no rel-pos (attention_wgmma_short.cu)
    if (wgmma_short_smem(p, optin_smem_limit()) > 0) {
      const long long blocks = static_cast<long long>(a.heads) * a.num_seq;
      VITRT_CHECK(blocks <= INT_MAX, InvalidArgument, "cuda attention: problem too large (", blocks, " blocks)");
      wgmma_short_launch(p, static_cast<int>(blocks), stream);
      return;
    }
  }
  if (tc && rel && a.window == 0) {  // Hopper: the wgmma kernel for global attention (attention_wgmma.cu)
    if (const WgmmaPlan wp = wgmma_relpos_plan(p, optin_smem_limit()); wp.smem > 0) {
      p.num_qtiles = static_cast<int>((a.nq + wp.bm - 1) / wp.bm);
      const long long blocks = static_cast<long long>(p.num_qtiles) * a.heads * a.num_seq;
      VITRT_CHECK(blocks <= INT_MAX, InvalidArgument, "cuda attention: problem too large (", blocks, " blocks)");
      wgmma_relpos_launch(wp, p, static_cast<int>(blocks), stream);
      return;
    }
  }
  const int bm = tc ? plan.bm : sBM;
  p.num_qtiles = static_cast<int>((a.nq + bm - 1) / bm);
  const long long blocks = static_cast<long long>(p.num_qtiles) * a.heads * a.num_seq;
  VITRT_CHECK(blocks <= INT_MAX, InvalidArgument, "cuda attention: problem too large (", blocks, " blocks)");
  const int nb = static_cast<int>(blocks);
  if (tc) {
    plan.fn(p, nb, plan.smem, stream);
    return;
  }
  if (a.bf16) {
    if (rel) dispatch_simt<bf16, true>(p, nb, stream);
    else dispatch_simt<bf16, false>(p, nb, stream);
  } else {
    if (rel) dispatch_simt<float, true>(p, nb, stream);
    else dispatch_simt<float, false>(p, nb, stream);
  }
}

void prepare_inputs(const PrepJob* jobs, int n, cudaStream_t stream) {
  VITRT_CHECK(n >= 0 && n <= kMaxPrepJobs, InvalidArgument, "prepare_inputs: ", n, " jobs");
  if (n == 0) return;
  PrepJobs all{};
  long long most = 1;
  for (int i = 0; i < n; ++i) {
    const PrepJob& j = jobs[i];
    VITRT_CHECK(j.src && j.rows >= 1 && j.want >= 1 && j.hd >= 1 && (j.out_f32 != nullptr) != (j.out_hi != nullptr),
                InvalidArgument, "prepare_inputs: bad job ", i);
    all.job[i] = j;
    most = std::max(most, static_cast<long long>(j.want) * j.hd);
  }
  prepare_inputs_kernel<<<dim3(grid_for(most), n), 256, 0, stream>>>(all);
  check(cudaGetLastError(), "prepare_inputs_kernel launch");
}

}  // namespace vitrt::cuda
