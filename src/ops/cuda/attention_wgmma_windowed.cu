// Hopper attention for SAM's windowed blocks: wgmma (sm_90a) with the decomposed rel-pos bias.
//
// Covers the encoder's windowed attention: 14 x 14 windows addressed in place in the qkv rows (and
// dense sequences of a 14 x 14 grid), head_dim 64 or 80, BF16, with rel-pos tables. A window is
// small enough to be attended in one step, which is what this kernel is built around:
//  - persistent CTAs (one per SM) of two warpgroups walk the (window, head) items; a window's keys
//    and values are loaded once into shared memory (cp.async, the no-swizzle core-matrix layout of
//    attention_wgmma.cu: K is the K-major B operand of Q K^T, V the MN-major one of P V), double
//    buffered, so that the next item's K / V land while this one is computed; the two warpgroups
//    take alternate m-tiles of 64 query rows (one's MMAs overlap the other's softmax), each tile's
//    Q fragments loaded from global memory straight into registers (the warpgroup's next tile's
//    during this tile's softmax and P V);
//  - the keys sit in 14 key rows of 16 slots (slots 14 and 15 of each row zero and masked), so
//    S = Q K^T is one m64n224 wgmma chain, the softmax is one pass over the whole row (no running
//    maximum, no rescaling of O), and P V is one m64n{HD} chain of 14 k16 steps, one per key row;
//  - with 16 slots per key row every n8 tile of S holds 8 columns of one key row at fixed column
//    offsets, so a thread's rel_w terms are 4 values per query row, the same for all 14 key rows:
//    S starts from them (rel_w / scale; -inf on the masked slots). rel_h is one value per query row
//    and key row, folded with the scale and the row maximum into one FFMA per score (as the global
//    kernel);
//  - the rel-pos terms of an m-tile come from G = Q T^T over the 27 + 27 table rows (hi + lo parts
//    for tables that were F32): one m64n56 wgmma chain; each warp writes its 16 rows of G to its own
//    shared-memory scratch and reads back the terms its threads need (no CTA barrier).
// Window cells past the grid read the pad vectors (the qkv bias: what the reference's zero-padded
// tokens give) as queries and keys; their output rows are not written, and m-tiles made only of
// such rows (a bottom-edge window's) are skipped.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ops/cuda/attention_kernel.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/wgmma.cuh"

namespace vitrt::cuda::attn {
namespace {

using bf16 = __nv_bfloat16;
using ptx::cp_async16;

template <int HD_>
struct WinCfg {
  static constexpr int HD = HD_;
  static constexpr int WS = 14;                    // window side (every SAM model)
  static constexpr int SLOTS = 16;                 // key slots per key row: 14 keys + 2 masked
  static constexpr int NK = WS * SLOTS;            // 224: N of S = Q K^T
  static constexpr int NQ = WS * WS;               // 196 query rows
  static constexpr int LH = 2 * WS - 1;            // rows per rel-pos table (rel_h, then rel_w)
  static constexpr int NT = (2 * LH + 7) / 8 * 8;  // 56: N of G = Q T^T (two zero rows)
  static constexpr int CPR = HD / 8;               // 16-byte chunks per row
  static constexpr int KS = HD / 16;               // k16 steps over the head dim
  static constexpr int THREADS = 256;              // two warpgroups (alternate m-tiles)
  static constexpr int GS = NT + 2;                // G scratch row stride (floats; even: float2 stores)
  static constexpr int kv_elems = NK * HD;
  static constexpr int t_elems = NT * HD;
  static_assert(HD == 64 || HD == 80, "wgmma.cuh has the n64 / n80 shapes for O");
  static_assert(NK == 224 && NT == 56, "wgmma.cuh has the n224 / n56 shapes for S and G");
};

// [K | V of buffer 0][K | V of buffer 1][T hi: NT x HD][T lo, when present][G scratch: 16 x GS per warp]
template <class C>
size_t win_smem_bytes(bool lo) {
  return static_cast<size_t>(4 * C::kv_elems + (lo ? 2 : 1) * C::t_elems) * sizeof(bf16) +
         static_cast<size_t>(C::THREADS / 32 * 16 * C::GS) * sizeof(float);
}

// Offset (elements) of 16-byte chunk c of row r: [r/8][c][r%8][8 elements] (attention_wgmma.cu).
template <class C>
__device__ __forceinline__ int core_off(int r, int c) {
  return ((r >> 3) * C::CPR + c) * 64 + (r & 7) * 8;
}

#if VITRT_WGMMA_ENABLED
// Rows of one sequence's cells (window cell (ty, tx), or token ty * 14 + tx of a dense sequence).
struct WinRows {
  long long brow = 0, s0 = 0;
  int gy0 = 0, gx0 = 0;
  bool win = false;
  // Row of cell (ty, tx), or -1 for a cell in the window's padding.
  __device__ __forceinline__ long long row(const KParams& p, int ty, int tx) const {
    if (!win) return s0 + ty * 14 + tx;
    const int gy = gy0 + ty, gx = gx0 + tx;
    if (gy >= p.Hg || gx >= p.Wg) return -1;
    return (brow + gy) * p.Wg + gx;
  }
};

template <int N>
__device__ __forceinline__ void mma_k(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc) {
  if constexpr (N == 56) wgmma::wgmma_m64n56k16_rs<0>(d, a, desc);
  else if constexpr (N == 224) wgmma::wgmma_m64n224k16_rs<0>(d, a, desc);
  else if constexpr (N == 64) wgmma::wgmma_m64n64k16_rs<1>(d, a, desc);  // O (V: MN-major)
  else wgmma::wgmma_m64n80k16_rs<1>(d, a, desc);
}
#endif

template <int HD>
__global__ void __launch_bounds__(WinCfg<HD>::THREADS, 1) flash_wgmma_windowed_kernel(const KParams p, int n_items) {
#if VITRT_WGMMA_ENABLED
  using C = WinCfg<HD>;
  constexpr int WS = C::WS, NQ = C::NQ, LH = C::LH, NT = C::NT, CPR = C::CPR, KS = C::KS, GS = C::GS;
  constexpr int NT8 = C::NK / 8;  // n8 tiles of S (two per key row)
  constexpr int WARPS = C::THREADS / 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const bool lo = p.th_lo != nullptr;
  bf16* KV = reinterpret_cast<bf16*>(smem_raw);  // two buffers of [K | V]
  bf16* Ts = KV + 4 * C::kv_elems;
  bf16* Tl = Ts + C::t_elems;  // only with lo parts
  float* Gs = reinterpret_cast<float*>(Ts + (lo ? 2 : 1) * C::t_elems);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup; warp within it (its 16 rows of an m-tile)
  const int g = lane >> 2, tq = lane & 3;

  // Item = (sequence, head), head fastest: the CTAs running at one time share qkv rows in L2.
  struct Item {
    WinRows rows;
    int h = 0, nq_out = NQ;  // nq_out: query rows that can be real
  };
  auto item_at = [&](int it) {
    Item x;
    x.h = it % p.heads;
    const int s = it / p.heads;
    if (p.ws == 0) {
      x.rows.s0 = static_cast<long long>(s) * NQ;
    } else {
      const int nwin = p.nwy * p.nwx;
      const int b = s / nwin, w = s - b * nwin;
      const int wy = w / p.nwx, wx = w - wy * p.nwx;
      x.rows.win = true;
      x.rows.brow = static_cast<long long>(b) * p.Hg;
      x.rows.gy0 = wy * WS;
      x.rows.gx0 = wx * WS;
      x.nq_out = min(WS, p.Hg - x.rows.gy0) * WS;  // a bottom-edge window's last rows are all padding
    }
    return x;
  };

  // K / V slots of item `it` into buffer `buf`: steps of 32 chunks = 16 slots x 2 chunks (each 8-lane
  // phase writes one 128-byte core matrix; each row's 32 bytes are one sector of global memory).
  auto issue_kv = [&](int it, int buf) {
    const Item x = item_at(it);
    const bf16* kb = static_cast<const bf16*>(p.k) + x.h * HD;
    const bf16* vb = static_cast<const bf16*>(p.v) + x.h * HD;
    const bf16* pk = x.rows.win ? static_cast<const bf16*>(p.pad_k) + x.h * HD : kb;
    const bf16* pv = x.rows.win ? static_cast<const bf16*>(p.pad_v) + x.h * HD : vb;
    bf16* Ks = KV + buf * 2 * C::kv_elems;
    bf16* Vs = Ks + C::kv_elems;
    constexpr int SLOT_GROUPS = C::NK / 16, STEPS = SLOT_GROUPS * (CPR / 2);
    for (int st = warp; st < STEPS; st += WARPS) {
      const int n = (st % SLOT_GROUPS) * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int c = 2 * (st / SLOT_GROUPS) + ((lane >> 3) & 1);
      const int kh = n >> 4, kw = n & 15;
      const bf16 *ksrc = kb, *vsrc = vb;
      int bytes = 0;  // the masked slots are zero (finite: -inf + 0 stays -inf, 0 * 0 = 0 in P V)
      if (kw < WS) {
        const long long r = x.rows.row(p, kh, kw);
        ksrc = r < 0 ? pk : kb + r * p.ldk;
        vsrc = r < 0 ? pv : vb + r * p.ldv;
        bytes = 16;
      }
      const int off = core_off<C>(n, c);
      cp_async16(Ks + off, ksrc + c * 8, bytes);
      cp_async16(Vs + off, vsrc + c * 8, bytes);
    }
  };

  int item = blockIdx.x;
  if (item >= n_items) return;
  {
    // Tables (shared by every head, loaded once per CTA): rows 0..26 rel_h, 27..53 rel_w, 54..55 zero.
    const bf16* th = static_cast<const bf16*>(p.th);
    const bf16* tw = static_cast<const bf16*>(p.tw);
    const bf16* thl = static_cast<const bf16*>(p.th_lo);
    const bf16* twl = static_cast<const bf16*>(p.tw_lo);
    for (int i = tid; i < NT * CPR; i += C::THREADS) {
      const int t = i / CPR, c = i - t * CPR;
      const bool in = t < 2 * LH;
      const long long ro = static_cast<long long>(t < LH ? t : t - LH) * HD + c * 8;
      cp_async16(Ts + core_off<C>(t, c), in ? (t < LH ? th : tw) + ro : th, in ? 16 : 0);
      if (lo) cp_async16(Tl + core_off<C>(t, c), in ? (t < LH ? thl : twl) + ro : thl, in ? 16 : 0);
    }
    issue_kv(item, 0);
    ptx::cp_async_commit();
  }

  constexpr uint32_t kChunkBytes = 128, kRowGroupBytes = CPR * 128;
  const uint64_t tdesc = wgmma::make_smem_desc(Ts, kChunkBytes, kRowGroupBytes);
  const uint64_t tldesc = wgmma::make_smem_desc(Tl, kChunkBytes, kRowGroupBytes);
  constexpr uint64_t kStepK = 2 * 128 / 16;        // one k16 step of a K-major operand (two chunks)
  constexpr uint64_t kStepV = 2 * CPR * 128 / 16;  // one k16 step of V (two 8-row groups)
  constexpr uint64_t kBufDesc = 2 * C::kv_elems * sizeof(bf16) / 16;  // from buffer 0 to buffer 1
  const uint64_t kdesc0 = wgmma::make_smem_desc(KV, kChunkBytes, kRowGroupBytes);
  const uint64_t vdesc0 = wgmma::make_smem_desc(KV + C::kv_elems, kRowGroupBytes, kChunkBytes);
  float* Gw = Gs + warp * 16 * GS;  // this warp's G rows
  const float inv_scale = 1.f / p.scale;
  unsigned qf[KS][4];

  for (int k = 0; item < n_items; ++k, item += gridDim.x) {
    const int buf = k & 1;
    if (k > 0) __syncthreads();  // every warp is done with the other buffer (item k - 1)
    if (item + static_cast<int>(gridDim.x) < n_items) issue_kv(item + gridDim.x, buf ^ 1);
    ptx::cp_async_commit();  // (possibly empty: the wait below counts groups)

    const Item x = item_at(item);
    const bf16* qb = static_cast<const bf16*>(p.q) + x.h * HD;
    const bf16* pq = x.rows.win ? static_cast<const bf16*>(p.pad_q) + x.h * HD : qb;
    bf16* ob = static_cast<bf16*>(p.out) + x.h * HD;
    // Q fragments of m-tile mt straight from global memory (the m16n8k16 A layout of each warp's
    // 16 rows): rows in the padding read the pad vector, rows past the window token 0 (finite;
    // their output is not written).
    auto q_row = [&](int i) -> const bf16* {
      const int ii = i < NQ ? i : 0;
      const int ty = ii / WS, tx = ii - ty * WS;
      const long long r = x.rows.row(p, ty, tx);
      return r < 0 ? pq : qb + r * p.ldq;
    };
    auto load_q = [&](int mt) {
      const int i0 = mt * 64 + wq * 16 + g;
      const bf16* r0 = q_row(i0) + 2 * tq;
      const bf16* r1 = q_row(i0 + 8) + 2 * tq;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        qf[ks][0] = __ldg(reinterpret_cast<const unsigned*>(r0 + ks * 16));
        qf[ks][1] = __ldg(reinterpret_cast<const unsigned*>(r1 + ks * 16));
        qf[ks][2] = __ldg(reinterpret_cast<const unsigned*>(r0 + ks * 16 + 8));
        qf[ks][3] = __ldg(reinterpret_cast<const unsigned*>(r1 + ks * 16 + 8));
      }
    };
    const int mtiles = (x.nq_out + 63) / 64;
    if (wg < mtiles) load_q(wg);  // in flight while this item's K / V land

    ptx::cp_async_wait<1>();          // this thread's copies of this item (and the tables) landed
    wgmma::fence_proxy_async_smem();  // ... and are visible to wgmma
    __syncthreads();                  // everyone's

    const uint64_t kdesc = kdesc0 + buf * kBufDesc, vdesc = vdesc0 + buf * kBufDesc;
    // The warpgroups take alternate m-tiles.
    for (int mt = wg; mt < mtiles; mt += 2) {
      // ---- G = Q T^T (this m-tile's rel-pos terms), scattered to the warp's scratch.
      float ga[NT / 2];
#pragma unroll
      for (int i = 0; i < NT / 2; ++i) ga[i] = 0.f;
      wgmma::fence_operands(ga);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma_k<NT>(ga, qf[ks], tdesc + ks * kStepK);
      if (lo) {
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) mma_k<NT>(ga, qf[ks], tldesc + ks * kStepK);
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(ga);
      __syncwarp();  // the warp's reads of the previous m-tile's G are done
      // Stored scaled: the rel_h columns (< LH) by log2(e), the rel_w ones by 1 / scale.
#pragma unroll
      for (int j = 0; j < NT / 8; ++j) {
        const int col = 8 * j + 2 * tq;
        const float f0 = col < LH ? kLog2e : inv_scale, f1 = col + 1 < LH ? kLog2e : inv_scale;
        *reinterpret_cast<float2*>(Gw + g * GS + col) = make_float2(ga[4 * j] * f0, ga[4 * j + 1] * f1);
        *reinterpret_cast<float2*>(Gw + (g + 8) * GS + col) = make_float2(ga[4 * j + 2] * f0, ga[4 * j + 3] * f1);
      }
      __syncwarp();

      // This thread's query rows (local g, g + 8 of the warp) and their cells.
      const int i0 = mt * 64 + wq * 16 + g, i1 = i0 + 8;
      const int c0 = i0 < NQ ? i0 : 0, c1 = i1 < NQ ? i1 : 0;
      const int iy0 = c0 / WS, ix0 = c0 - iy0 * WS, iy1 = c1 / WS, ix1 = c1 - iy1 * WS;
      // rel_w / scale for the thread's 4 slots kw = 8 * (q >> 1) + 2 tq + (q & 1) of every key row:
      // G column LH + (ix - kw + WS - 1); -inf on the masked slots.
      float rw0[4], rw1[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int kw = 8 * (q >> 1) + 2 * tq + (q & 1);
        const bool real = kw < WS;
        const int kk = real ? kw : 0;
        rw0[q] = real ? Gw[g * GS + LH + ix0 - kk + WS - 1] : -INFINITY;
        rw1[q] = real ? Gw[(g + 8) * GS + LH + ix1 - kk + WS - 1] : -INFINITY;
      }
      // rel_h * log2(e) of key row kh: G column iy - kh + WS - 1 (read where used: registers are short).
      const float* bh0 = Gw + g * GS + iy0 + WS - 1;
      const float* bh1 = Gw + (g + 8) * GS + iy1 + WS - 1;

      // ---- S = rel_w / scale + Q K^T
      float sc[NT8 * 4];
#pragma unroll
      for (int nt = 0; nt < NT8; ++nt) {
        const int hf = nt & 1;  // first or second 8 slots of the key row
        sc[nt * 4 + 0] = rw0[2 * hf];
        sc[nt * 4 + 1] = rw0[2 * hf + 1];
        sc[nt * 4 + 2] = rw1[2 * hf];
        sc[nt * 4 + 3] = rw1[2 * hf + 1];
      }
      wgmma::fence_operands(sc);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma_k<C::NK>(sc, qf[ks], kdesc + ks * kStepK);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(sc);
      wgmma::fence_operands(qf);
      if (mt + 2 < mtiles) load_q(mt + 2);  // in flight during the softmax and P V

      // ---- softmax over the whole row (log2 domain): p = 2^(s * scale + rel_h - m)
      float mk0[WS], mk1[WS];
#pragma unroll
      for (int kh = 0; kh < WS; ++kh) {
        const float* r = sc + kh * 8;
        mk0[kh] = fmaf(fmaxf(fmaxf(r[0], r[1]), fmaxf(r[4], r[5])), p.scale_log2, bh0[-kh]);
        mk1[kh] = fmaf(fmaxf(fmaxf(r[2], r[3]), fmaxf(r[6], r[7])), p.scale_log2, bh1[-kh]);
      }
      float m0 = mk0[0], m1 = mk1[0];
#pragma unroll
      for (int kh = 1; kh < WS; ++kh) {
        m0 = fmaxf(m0, mk0[kh]);
        m1 = fmaxf(m1, mk1[kh]);
      }
      m0 = quad_max(m0);
      m1 = quad_max(m1);
      float l0[WS], l1[WS];
#pragma unroll
      for (int kh = 0; kh < WS; ++kh) {
        float* r = sc + kh * 8;
        const float a0 = bh0[-kh] - m0, a1 = bh1[-kh] - m1;
        r[0] = ex2(fmaf(r[0], p.scale_log2, a0));
        r[1] = ex2(fmaf(r[1], p.scale_log2, a0));
        r[4] = ex2(fmaf(r[4], p.scale_log2, a0));
        r[5] = ex2(fmaf(r[5], p.scale_log2, a0));
        r[2] = ex2(fmaf(r[2], p.scale_log2, a1));
        r[3] = ex2(fmaf(r[3], p.scale_log2, a1));
        r[6] = ex2(fmaf(r[6], p.scale_log2, a1));
        r[7] = ex2(fmaf(r[7], p.scale_log2, a1));
        l0[kh] = (r[0] + r[1]) + (r[4] + r[5]);
        l1[kh] = (r[2] + r[3]) + (r[6] + r[7]);
      }
      float s0 = l0[0], s1 = l1[0];
#pragma unroll
      for (int kh = 1; kh < WS; ++kh) {
        s0 += l0[kh];
        s1 += l1[kh];
      }
      s0 = quad_sum(s0);
      s1 = quad_sum(s1);

      // ---- O = P V: P as bf16 A fragments, one k16 step per key row.
      unsigned pa[WS][4];
#pragma unroll
      for (int kh = 0; kh < WS; ++kh) {
        const float* r = sc + kh * 8;
        pa[kh][0] = pack_bf16(r[0], r[1]);
        pa[kh][1] = pack_bf16(r[2], r[3]);
        pa[kh][2] = pack_bf16(r[4], r[5]);
        pa[kh][3] = pack_bf16(r[6], r[7]);
      }
      float o[HD / 2];
#pragma unroll
      for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
      wgmma::fence_operands(o);
      wgmma::fence();
#pragma unroll
      for (int kh = 0; kh < WS; ++kh) mma_k<HD>(o, pa[kh], vdesc + kh * kStepV);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(o);
      wgmma::fence_operands(pa);

      // ---- epilogue: normalise, write the real rows (4-byte stores; a quad writes 16 contiguous bytes).
      const float inv0 = 1.f / s0, inv1 = 1.f / s1;
      long long r0 = -1, r1 = -1;
      if (i0 < x.nq_out) r0 = x.rows.row(p, iy0, ix0);
      if (i1 < x.nq_out) r1 = x.rows.row(p, iy1, ix1);
      if (r0 >= 0) {
        bf16* dst = ob + r0 * p.ldo + 2 * tq;
#pragma unroll
        for (int d = 0; d < HD / 8; ++d)
          *reinterpret_cast<unsigned*>(dst + d * 8) = pack_bf16(o[d * 4 + 0] * inv0, o[d * 4 + 1] * inv0);
      }
      if (r1 >= 0) {
        bf16* dst = ob + r1 * p.ldo + 2 * tq;
#pragma unroll
        for (int d = 0; d < HD / 8; ++d)
          *reinterpret_cast<unsigned*>(dst + d * 8) = pack_bf16(o[d * 4 + 2] * inv1, o[d * 4 + 3] * inv1);
      }
    }
  }
#else
  using C = WinCfg<HD>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::NQ > 0 && C::CPR > 0 && C::KS > 0, "");
  (void)p, (void)n_items;
  __trap();  // never launched: wgmma_windowed_smem only accepts sm_90 devices
#endif
}

template <int HD>
void launch(const KParams& p, size_t smem, int items, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  ensure_smem(flash_wgmma_windowed_kernel<HD>, smem, configured, "bf16 wgmma windowed");
  const int grid = std::min(items, sm_count());  // persistent: one CTA per SM walks the items
  flash_wgmma_windowed_kernel<HD><<<grid, WinCfg<HD>::THREADS, smem, stream>>>(p, items);
  check(cudaGetLastError(), "flash_wgmma_windowed_kernel launch");
}

// VITRT_ATTN_WGMMA_WINDOWS=0 turns this kernel off (the mma.sync kernel then runs the windows).
bool windows_off_by_env() {
  static const bool v = [] {
    const char* e = std::getenv("VITRT_ATTN_WGMMA_WINDOWS");
    return e != nullptr && std::string(e) == "0";
  }();
  return v;
}

}  // namespace

size_t wgmma_windowed_smem(const KParams& p, int optin_smem_limit) {
  if (wgmma_off_by_env() || windows_off_by_env() || !device_is_sm90()) return 0;
  if (p.hd != 64 && p.hd != 80) return 0;
  if (p.th == nullptr || p.relH != 14 || p.relW != 14 || p.nq != 196 || p.nk != 196) return 0;
  if ((p.th_lo == nullptr) != (p.tw_lo == nullptr)) return 0;
  if (p.ws == 0 ? p.q_share != 1 : (p.ws != 14 || p.pad_q == nullptr || p.pad_k == nullptr || p.pad_v == nullptr))
    return 0;
  const bool lo = p.th_lo != nullptr;
  const size_t smem = p.hd == 64 ? win_smem_bytes<WinCfg<64>>(lo) : win_smem_bytes<WinCfg<80>>(lo);
  return smem <= static_cast<size_t>(optin_smem_limit) ? smem : 0;
}

void wgmma_windowed_launch(const KParams& p, size_t smem, int items, cudaStream_t stream) {
  if (items <= 0) return;
  if (p.hd == 64) launch<64>(p, smem, items, stream);
  else launch<80>(p, smem, items, stream);
}

}  // namespace vitrt::cuda::attn
