// Hopper attention for SAM's windowed blocks: wgmma (sm_90a) with the decomposed rel-pos bias.
//
// Covers the encoder's windowed attention: 14 x 14 windows addressed in place in the qkv rows (and
// dense sequences of a 14 x 14 grid), head_dim 64 or 80, BF16, with rel-pos tables. A window is
// small enough to be attended without a key loop. Two forms: the chunked one further down (the
// default at head dim 64: three CTAs per SM) and this one (the default at head dim 80), built around it:
//  - one CTA (one warpgroup) per (window, head), two per SM: the window's keys and values are
//    loaded once into shared memory (cp.async, the no-swizzle core-matrix layout of
//    attention_wgmma.cu: K is the K-major B operand of Q K^T, V the MN-major one of P V), then the
//    warpgroup runs the window's query rows in m-tiles of 64, each tile's Q fragments loaded from
//    global memory straight into registers (the next tile's during this tile's softmax and P V);
//  - the keys sit in 14 key rows of 16 slots (slots 14 and 15 of each row zero and masked), in two
//    chunks of 7 key rows (SPLIT): Q K^T of both chunks is issued at once (two m64n112 chains),
//    chunk 0's softmax runs while chunk 1's Q K^T does, chunk 0's P V while chunk 1's softmax does,
//    with one lazy rescaling of O between them; the unsplit variant (one m64n224 chain, a one-pass
//    softmax) measured the same (BENCHMARKS.md, call Y) and stays for A/B runs;
//  - with 16 slots per key row every n8 tile of S holds 8 columns of one key row at fixed column
//    offsets, so a thread's rel_w terms are 4 values per query row, the same for all 14 key rows:
//    S starts from them (rel_w / scale; -inf on the masked slots). rel_h is one value per query row
//    and key row, folded with the scale and the row maximum into one FFMA per score (as the global
//    kernel);
//  - the rel-pos terms of an m-tile come from G = Q T^T over the 27 + 27 table rows (hi + lo parts
//    for tables that were F32): one m64n56 wgmma chain; each warp writes its 16 rows of G to its own
//    shared-memory scratch and reads back the terms its threads need (no CTA barrier).
// Window cells past the grid read the pad vectors (the qkv bias: what the reference's zero-padded
// tokens give) as keys; as queries they are not computed at all (the reference crops their outputs):
// the query rows are the window's real cells, row-major over its real width (WindowIo::cell), so
// a right-edge or bottom-edge window of a 64 x 64 grid runs 2 m-tiles, not 4 (the kernels alone: 5%
// faster; VITRT_ATTN_WIN_ROWS=full for A/B). (A persistent version, two warpgroups per CTA with
// double-buffered K / V, measured slower: its warpgroups met at two barriers per window and ran
// their phases in step; BENCHMARKS.md, call X.) ncu (call Z): latency-bound at two warps per
// scheduler (198 registers, ~104 KB of shared memory per CTA).
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/cuda/attention_kernel.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/wgmma.cuh"

namespace vitrt::cuda::attn {
namespace {

using bf16 = __nv_bfloat16;
using ptx::cp_async16;

// SPLIT: the keys in two chunks of 7 key rows (S = Q K^T as two m64n112 chains), pipelined inside the
// warpgroup: chunk 1's Q K^T runs during chunk 0's softmax, chunk 0's P V during chunk 1's softmax
// (one lazy rescaling of O between them, as the global kernel's). Otherwise one m64n224 chain and
// a one-pass softmax (VITRT_ATTN_WGMMA_WINDOWS=onepass, for A/B runs).
template <int HD_, bool SPLIT_>
struct WinCfg {
  static constexpr int HD = HD_;
  static constexpr bool SPLIT = SPLIT_;
  static constexpr int WS = 14;                    // window side (every SAM model)
  static constexpr int SLOTS = 16;                 // key slots per key row: 14 keys + 2 masked
  static constexpr int NK = WS * SLOTS;            // 224 key slots
  static constexpr int CROWS = SPLIT ? 7 : 14;     // key rows per chunk of S
  static constexpr int NS = CROWS * SLOTS;         // N of one S chain (112 or 224)
  static constexpr int LH = 2 * WS - 1;            // rows per rel-pos table (rel_h, then rel_w)
  static constexpr int NT = (2 * LH + 7) / 8 * 8;  // 56: N of G = Q T^T (two zero rows)
  static constexpr int CPR = HD / 8;               // 16-byte chunks per row
  static constexpr int KS = HD / 16;               // k16 steps over the head dim
  static constexpr int THREADS = 128;              // one warpgroup; two CTAs per SM
  static constexpr int GS = NT + 2;                // G scratch row stride (floats; even: float2 stores)
  static constexpr int kv_elems = NK * HD;
  static constexpr int t_elems = NT * HD;
  static_assert(HD == 64 || HD == 80, "wgmma.cuh has the n64 / n80 shapes for O");
  static_assert(NT == 56 && (NS == 112 || NS == 224), "wgmma.cuh has the n56 / n112 / n224 shapes");
};

// Both forms' shared memory: [K | V | table | table lo parts (only with lo) | the form's own floats],
// K, V and the tables in the no-swizzle core-matrix layout, with their wgmma descriptors.
template <class C>
struct WindowSmem {
  bf16 *Ks, *Vs, *Ts, *Tl;
  float* rest;
  // Its size, with rest_floats floats of the form's own after the tables.
  static size_t bytes(bool lo, size_t rest_floats) {
    return static_cast<size_t>(2 * C::kv_elems + (lo ? 2 : 1) * C::t_elems) * sizeof(bf16) + rest_floats * sizeof(float);
  }
  __device__ __forceinline__ WindowSmem(unsigned char* raw, bool lo)
      : Ks(reinterpret_cast<bf16*>(raw)),
        Vs(Ks + C::kv_elems),
        Ts(Vs + C::kv_elems),
        Tl(Ts + C::t_elems),
        rest(reinterpret_cast<float*>(Ts + (lo ? 2 : 1) * C::t_elems)) {}
  // K and the tables are K-major operands, V the MN-major one: 128-byte core matrices, C::CPR * 128
  // bytes per 8-row group.
  __device__ __forceinline__ uint64_t kdesc() const { return wgmma::make_smem_desc(Ks, 128, C::CPR * 128); }
  __device__ __forceinline__ uint64_t vdesc() const { return wgmma::make_smem_desc(Vs, C::CPR * 128, 128); }
  __device__ __forceinline__ uint64_t tdesc() const { return wgmma::make_smem_desc(Ts, 128, C::CPR * 128); }
  __device__ __forceinline__ uint64_t tldesc() const { return wgmma::make_smem_desc(Tl, 128, C::CPR * 128); }
};

// The split form's: WindowSmem with the G scratch (16 x GS floats per warp).
template <class C>
size_t win_smem_bytes(bool lo) {
  return WindowSmem<C>::bytes(lo, static_cast<size_t>(C::THREADS / 32 * 16 * C::GS));
}

#if VITRT_WGMMA_ENABLED
template <int N>
__device__ __forceinline__ void mma_k(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc) {
  if constexpr (N == 56) wgmma::wgmma_m64n56k16_rs<0>(d, a, desc);
  else if constexpr (N == 112) wgmma::wgmma_m64n112k16_rs<0>(d, a, desc);
  else if constexpr (N == 224) wgmma::wgmma_m64n224k16_rs<0>(d, a, desc);
  else if constexpr (N == 64) wgmma::wgmma_m64n64k16_rs<1>(d, a, desc);  // O (V: MN-major)
  else wgmma::wgmma_m64n80k16_rs<1>(d, a, desc);
}

// G = Q T^T of one m-tile over the 56 table rows (the lo parts of F32 tables accumulate into the same
// G), issued and retired.
template <int KS>
__device__ __forceinline__ void relpos_product(float (&ga)[28], const unsigned (&qf)[KS][4], uint64_t tdesc,
                                               uint64_t tldesc, bool lo) {
  constexpr uint64_t kStepK = 2 * 128 / 16;  // one k16 step of a K-major operand
#pragma unroll
  for (int i = 0; i < 28; ++i) ga[i] = 0.f;
  wgmma::fence_operands(ga);
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) mma_k<56>(ga, qf[ks], tdesc + ks * kStepK);
  if (lo) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) mma_k<56>(ga, qf[ks], tldesc + ks * kStepK);
  }
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(ga);
}

// The score tile's layout: n8 tile nt of a chunk holds key row r0 + nt / 2, slots 8 * (nt & 1) +
// 2 tq + {0, 1}; [nt * 4 + 0 / 1] are query row g, [+ 2 / 3] row g + 8. S starts from rel_w / scale.
template <int NSR>
__device__ __forceinline__ void seed_scores(float (&sc)[NSR], const float (&rw0)[4], const float (&rw1)[4]) {
#pragma unroll
  for (int nt = 0; nt < NSR / 4; ++nt) {
    const int hf = nt & 1;
    sc[nt * 4 + 0] = rw0[2 * hf];
    sc[nt * 4 + 1] = rw0[2 * hf + 1];
    sc[nt * 4 + 2] = rw1[2 * hf];
    sc[nt * 4 + 3] = rw1[2 * hf + 1];
  }
}
template <int ROWS>
__device__ __forceinline__ void zero_p(unsigned (&pa)[ROWS][4]) {
#pragma unroll
  for (int j = 0; j < ROWS; ++j) pa[j][0] = pa[j][1] = pa[j][2] = pa[j][3] = 0u;
}
// Row maxima of a chunk in the log2 domain: max over its key rows of max(s) * scale_log2 + rel_h
// (bh0 / bh1: the rows' rel_h * log2(e), indexed by -kh), reduced over the quad.
template <int ROWS>
__device__ __forceinline__ void chunk_max(const float* sc, int kh0, const float* bh0, const float* bh1, float sl2,
                                          float& m0, float& m1) {
  float mk0[ROWS], mk1[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    const float* r = sc + j * 8;
    mk0[j] = fmaf(fmaxf(fmaxf(r[0], r[1]), fmaxf(r[4], r[5])), sl2, bh0[-(kh0 + j)]);
    mk1[j] = fmaf(fmaxf(fmaxf(r[2], r[3]), fmaxf(r[6], r[7])), sl2, bh1[-(kh0 + j)]);
  }
  m0 = mk0[0], m1 = mk1[0];
#pragma unroll
  for (int j = 1; j < ROWS; ++j) {
    m0 = fmaxf(m0, mk0[j]);
    m1 = fmaxf(m1, mk1[j]);
  }
  m0 = quad_max(m0);
  m1 = quad_max(m1);
}
// p = 2^(s * scale_log2 + rel_h - m) in place; adds the rows' partial sums (this thread's columns)
// to l0 / l1 and packs P as bf16 A fragments, one k16 step per key row.
template <int ROWS>
__device__ __forceinline__ void chunk_exp(float* sc, int kh0, const float* bh0, const float* bh1, float sl2, float m0,
                                          float m1, float& l0, float& l1, unsigned (&pa)[ROWS][4]) {
  float t0[ROWS], t1[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    float* r = sc + j * 8;
    const float a0 = bh0[-(kh0 + j)] - m0, a1 = bh1[-(kh0 + j)] - m1;
    r[0] = ex2(fmaf(r[0], sl2, a0));
    r[1] = ex2(fmaf(r[1], sl2, a0));
    r[4] = ex2(fmaf(r[4], sl2, a0));
    r[5] = ex2(fmaf(r[5], sl2, a0));
    r[2] = ex2(fmaf(r[2], sl2, a1));
    r[3] = ex2(fmaf(r[3], sl2, a1));
    r[6] = ex2(fmaf(r[6], sl2, a1));
    r[7] = ex2(fmaf(r[7], sl2, a1));
    t0[j] = (r[0] + r[1]) + (r[4] + r[5]);
    t1[j] = (r[2] + r[3]) + (r[6] + r[7]);
    pa[j][0] = pack_bf16(r[0], r[1]);
    pa[j][1] = pack_bf16(r[2], r[3]);
    pa[j][2] = pack_bf16(r[4], r[5]);
    pa[j][3] = pack_bf16(r[6], r[7]);
  }
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    l0 += t0[j];
    l1 += t1[j];
  }
}
#endif

// The addressing of one (window or 14 x 14 sequence, head), shared by both forms: its cells' rows
// in the qkv matrix (padding cells read the pad vectors, the qkv bias), the K / V and table loads
// into the no-swizzle core-matrix layout, and the output rows.
template <int HD>
struct WindowIo {
  static constexpr int WS = 14, NQ = WS * WS, LH = 2 * WS - 1, NT = 56, CPR = HD / 8;
  const KParams& p;
  SeqAddr sa;  // (dense sequences: q_share == 1, so sa.k0 is also their first q and output row)
  bool win;
  int qw;      // query cells per window row: the real ones (8 in a right-edge window of a 64-wide grid)
  int nq_out;  // query rows: the window's real cells only, row-major over qw columns
  const bf16 *qb, *kb, *vb, *pq, *pk, *pv;
  bf16* ob;

  __device__ __forceinline__ WindowIo(const KParams& params, int s, int h) : p(params) {
    sa.init(p, s);
    win = p.ws != 0;
    qw = win && !p.win_full_width_rows ? min(WS, p.Wg - sa.gx0) : WS;
    nq_out = win ? min(WS, p.Hg - sa.gy0) * qw : NQ;
    qb = static_cast<const bf16*>(p.q) + h * HD;
    kb = static_cast<const bf16*>(p.k) + h * HD;
    vb = static_cast<const bf16*>(p.v) + h * HD;
    pq = win ? static_cast<const bf16*>(p.pad_q) + h * HD : qb;
    pk = win ? static_cast<const bf16*>(p.pad_k) + h * HD : kb;
    pv = win ? static_cast<const bf16*>(p.pad_v) + h * HD : vb;
    ob = static_cast<bf16*>(p.out) + h * HD;
  }
  // Row of cell (ty, tx) (token ty * 14 + tx of a dense sequence), or -1 for a padding cell.
  __device__ __forceinline__ long long row(int ty, int tx) const {
    return win ? sa.cell_row(p, ty, tx) : sa.k0 + ty * WS + tx;
  }
  // K / V slots of key rows [kh0, kh1) (16 per key row, slots 14 and 15 zero: finite, -inf + 0 stays
  // -inf, 0 * 0 = 0 in P V) by a CTA of `warps` warps: steps of 32 chunks = 16 slots x 2 chunks (each
  // 8-lane phase writes one 128-byte core matrix; each row's 32 bytes are one sector of global memory).
  __device__ __forceinline__ void issue_kv(int kh0, int kh1, bf16* Ks, bf16* Vs, int warp, int lane, int warps) const {
    const int nrows = kh1 - kh0;
    for (int st = warp; st < nrows * (CPR / 2); st += warps) {
      const int n = (kh0 + st % nrows) * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int c = 2 * (st / nrows) + ((lane >> 3) & 1);
      const int kh = n >> 4, kw = n & 15;
      const bf16 *ksrc = kb, *vsrc = vb;
      int bytes = 0;
      if (kw < WS) {
        const long long r = row(kh, kw);
        ksrc = r < 0 ? pk : kb + r * p.ldk;
        vsrc = r < 0 ? pv : vb + r * p.ldv;
        bytes = 16;
      }
      const int off = core_matrix_offset<CPR>(n, c);
      cp_async16(Ks + off, ksrc + c * 8, bytes);
      cp_async16(Vs + off, vsrc + c * 8, bytes);
    }
  }
  // The rel-pos tables (T rows 0..26 rel_h, 27..53 rel_w, 54..55 zero; Tl: their lo parts, when the
  // tables were F32) by `threads` threads.
  __device__ __forceinline__ void issue_tables(bf16* Ts, bf16* Tl, bool lo, int tid, int threads) const {
    const bf16* th = static_cast<const bf16*>(p.th);
    const bf16* tw = static_cast<const bf16*>(p.tw);
    const bf16* thl = static_cast<const bf16*>(p.th_lo);
    const bf16* twl = static_cast<const bf16*>(p.tw_lo);
    for (int i = tid; i < NT * CPR; i += threads) {
      const int t = i / CPR, c = i - t * CPR;
      const bool in = t < 2 * LH;
      const long long ro = static_cast<long long>(t < LH ? t : t - LH) * HD + c * 8;
      cp_async16(Ts + core_matrix_offset<CPR>(t, c), in ? (t < LH ? th : tw) + ro : th, in ? 16 : 0);
      if (lo) cp_async16(Tl + core_matrix_offset<CPR>(t, c), in ? (t < LH ? thl : twl) + ro : thl, in ? 16 : 0);
    }
  }
  // Cell (ty, tx) of query row i. Only real cells are query rows: the padding's outputs are cropped
  // away, so a right-edge window of a 64-wide grid (8 real columns) runs 112 rows in 2 m-tiles, not
  // 196 in 4 (vit_b / l / h at 1024 px: 81 m-tiles per image and head instead of 90). Rows past
  // nq_out map to cell 0 (finite; their output is not written).
  __device__ __forceinline__ void cell(int i, int& ty, int& tx) const {
    const int ii = i < nq_out ? i : 0;
    ty = ii / qw;
    tx = ii - ty * qw;
  }
  // q of query row i (cells in the padding, only with win_full_width_rows, read the pad vector).
  __device__ __forceinline__ const bf16* q_row(int i) const {
    int ty, tx;
    cell(i, ty, tx);
    const long long r = row(ty, tx);
    return r < 0 ? pq : qb + r * p.ldq;
  }
  // Q fragments (the m16n8k16 A layout) of the warp's rows i0 and i0 + 8 for this thread (column 2 tq).
  template <int KS>
  __device__ __forceinline__ void load_q(unsigned (&qf)[KS][4], int i0, int tq) const {
    load_a_fragments(qf, q_row(i0) + 2 * tq, q_row(i0 + 8) + 2 * tq);
  }
  // O / l of the thread's rows i0 = (iy0, ix0) and i1 = (iy1, ix1) (the m16n8 accumulator layout:
  // rows g and g + 8), written where the row is real (4-byte stores; a quad writes 16 contiguous bytes).
  __device__ __forceinline__ void store_rows(const float (&o)[HD / 2], float l0, float l1, int i0, int i1, int iy0,
                                             int ix0, int iy1, int ix1, int tq) const {
    const float inv0 = 1.f / l0, inv1 = 1.f / l1;
    long long r0 = -1, r1 = -1;
    if (i0 < nq_out) r0 = row(iy0, ix0);
    if (i1 < nq_out) r1 = row(iy1, ix1);
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
  // The same as whole 128-byte lines (head dim 64; rows_to_lines): lanes 8 k .. 8 k + 7 write row
  // 2 k of each pass's 8, whose address quad 2 k's lanes computed (shuffled over). Every lane of the
  // warp must call it.
  __device__ __forceinline__ void store_rows_as_lines(const float (&o)[HD / 2], float l0, float l1, int i0, int i1,
                                                      int iy0, int ix0, int iy1, int ix1, int lane) const {
    static_assert(HD == 64, "whole lines: 64 columns per row");
    long long r0 = -1, r1 = -1;
    if (i0 < nq_out) r0 = row(iy0, ix0);
    if (i1 < nq_out) r1 = row(iy1, ix1);
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      unsigned a4[4], b4[4];
      output_pass_as_lines(o, pass, 1.f / (pass == 0 ? l0 : l1), lane, a4, b4);
      const long long mine = pass == 0 ? r0 : r1;
      const long long ra = __shfl_sync(0xffffffffu, mine, lane & ~7), rb = __shfl_sync(0xffffffffu, mine, (lane & ~7) + 4);
      if (ra >= 0) *reinterpret_cast<uint4*>(ob + ra * p.ldo + 8 * (lane & 7)) = make_uint4(a4[0], a4[1], a4[2], a4[3]);
      if (rb >= 0) *reinterpret_cast<uint4*>(ob + rb * p.ldo + 8 * (lane & 7)) = make_uint4(b4[0], b4[1], b4[2], b4[3]);
    }
  }
};

template <int HD, bool SPLIT>
__global__ void __launch_bounds__(WinCfg<HD, SPLIT>::THREADS, 2) flash_wgmma_windowed_kernel(const KParams p) {
#if VITRT_WGMMA_ENABLED
  using C = WinCfg<HD, SPLIT>;
  constexpr int WS = C::WS, LH = C::LH, NT = C::NT, CPR = C::CPR, KS = C::KS, GS = C::GS;
  constexpr int CROWS = C::CROWS, NSR = C::NS / 2;  // key rows and accumulator registers per chunk
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const bool lo = p.th_lo != nullptr;
  const WindowSmem<C> sm(smem_raw, lo);
  bf16 *Ks = sm.Ks, *Vs = sm.Vs, *Ts = sm.Ts, *Tl = sm.Tl;
  float* Gs = sm.rest;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int h = blockIdx.x % p.heads, s = blockIdx.x / p.heads;  // heads fastest: CTAs share qkv rows in L2
  const WindowIo<HD> io(p, s, h);
  const int nq_out = io.nq_out;

  // ---- Tables and K / V. Group 0: the tables and the first chunk's key rows; group 1 (SPLIT): the
  // rest, which the first m-tile only needs after its rel-pos product and first Q K^T are issued.
  io.issue_tables(Ts, Tl, lo, tid, C::THREADS);
  io.issue_kv(0, CROWS, Ks, Vs, warp, lane, C::THREADS / 32);
  ptx::cp_async_commit();
  if constexpr (SPLIT) {
    io.issue_kv(CROWS, WS, Ks, Vs, warp, lane, C::THREADS / 32);
    ptx::cp_async_commit();
  }

  // ---- Q fragments of m-tile mt straight from global memory (the m16n8k16 A layout of each warp's
  // 16 rows).
  unsigned qf[KS][4];
  auto load_q = [&](int mt) { io.load_q(qf, mt * 64 + warp * 16 + g, tq); };
  load_q(0);  // in flight while K / V land

  if constexpr (SPLIT) ptx::cp_async_wait<1>();
  else ptx::cp_async_wait<0>();
  wgmma::fence_proxy_async_smem();  // this thread's cp.async writes -> visible to wgmma
  __syncthreads();                  // everyone's
  bool all_landed = !SPLIT;         // (SPLIT: group 1 is waited for inside the first m-tile)

  const uint64_t kdesc = sm.kdesc(), vdesc = sm.vdesc(), tdesc = sm.tdesc(), tldesc = sm.tldesc();
  constexpr uint64_t kStepK = 2 * 128 / 16;                      // one k16 step of a K-major operand
  constexpr uint64_t kStepV = 2 * CPR * 128 / 16;                // one k16 step of V (= one key row)
  constexpr uint64_t kChunkK = CROWS * 2 * CPR * 128 / 16;       // K's second chunk of key rows
  float* Gw = Gs + warp * 16 * GS;                               // this warp's G rows
  const float inv_scale = 1.f / p.scale, sl2 = p.scale_log2;

  const int mtiles = (nq_out + 63) / 64;
  for (int mt = 0; mt < mtiles; ++mt) {
    // ---- G = Q T^T (this m-tile's rel-pos terms), scattered to the warp's scratch.
    float ga[NT / 2];
    relpos_product(ga, qf, tdesc, tldesc, lo);
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
    const int i0 = mt * 64 + warp * 16 + g, i1 = i0 + 8;
    int iy0, ix0, iy1, ix1;
    io.cell(i0, iy0, ix0);
    io.cell(i1, iy1, ix1);
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
    // rel_h * log2(e) of key row kh: bh[-kh] (G column iy - kh + WS - 1), read where used.
    const float* bh0 = Gw + g * GS + iy0 + WS - 1;
    const float* bh1 = Gw + (g + 8) * GS + iy1 + WS - 1;

    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
    float m0, m1, l0 = 0.f, l1 = 0.f;
    if constexpr (!SPLIT) {
      // ---- S = rel_w / scale + Q K^T over all 224 slots, one-pass softmax, O = P V.
      float sc[NSR];
      seed_scores(sc, rw0, rw1);
      wgmma::fence_operands(sc);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma_k<C::NS>(sc, qf[ks], kdesc + ks * kStepK);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(sc);
      wgmma::fence_operands(qf);
      if (mt + 1 < mtiles) load_q(mt + 1);  // in flight during the softmax and P V
      chunk_max<WS>(sc, 0, bh0, bh1, sl2, m0, m1);
      unsigned pa[WS][4];
      chunk_exp<WS>(sc, 0, bh0, bh1, sl2, m0, m1, l0, l1, pa);
      wgmma::fence_operands(o);
      wgmma::fence();
#pragma unroll
      for (int kh = 0; kh < WS; ++kh) mma_k<HD>(o, pa[kh], vdesc + kh * kStepV);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(o);
      wgmma::fence_operands(pa);
    } else {
      // ---- two chunks of 7 key rows: Q K^T of both issued at once (both seeded first: no register
      // of a wgmma input may be written while wgmmas run), chunk 0's softmax while chunk 1's runs,
      // chunk 0's P V while chunk 1's softmax runs.
      float sa[NSR], sb[NSR];
      seed_scores(sa, rw0, rw1);
      seed_scores(sb, rw0, rw1);
      wgmma::fence_operands(sa);
      wgmma::fence_operands(sb);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma_k<C::NS>(sa, qf[ks], kdesc + ks * kStepK);
      wgmma::commit();
      if (!all_landed) {  // (first m-tile only) the second chunk's K / V
        ptx::cp_async_wait<0>();
        wgmma::fence_proxy_async_smem();
        __syncthreads();
        all_landed = true;
      }
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma_k<C::NS>(sb, qf[ks], kdesc + kChunkK + ks * kStepK);
      wgmma::commit();
      wgmma::wait<1>();  // chunk 0's scores
      wgmma::fence_operands(sa);
      // A warp whose 16 rows are all past the window's real rows (warps 1-3 of the last m-tile: 196
      // rows make 3 m-tiles and 4 rows) skips its softmax and multiplies P = 0: 3 of the window's 16
      // warp-tiles of exps and sums.
      const bool live = mt * 64 + warp * 16 < nq_out || p.win_dead_rows_softmax;
      unsigned pa[CROWS][4], pb[CROWS][4];
      if (live) {
        chunk_max<CROWS>(sa, 0, bh0, bh1, sl2, m0, m1);
        chunk_exp<CROWS>(sa, 0, bh0, bh1, sl2, m0, m1, l0, l1, pa);
      } else {
        m0 = m1 = 0.f;
        zero_p(pa);
      }
      // Keeps chunk 0's softmax before the wait (ptxas would otherwise hoist the wait above it).
      wgmma::fence_operands(pa);
      pin(l0, l1);
      wgmma::wait<0>();  // chunk 1's scores
      wgmma::fence_operands(sb);
      wgmma::fence_operands(qf);
      if (mt + 1 < mtiles) load_q(mt + 1);  // in flight during the rest of this m-tile
      wgmma::fence_operands(o);
      wgmma::fence();
#pragma unroll
      for (int kh = 0; kh < CROWS; ++kh) mma_k<HD>(o, pa[kh], vdesc + kh * kStepV);
      wgmma::commit();
      // Chunk 1's softmax against the reference maximum m, which only moves when chunk 1's row
      // maximum exceeds it by more than 2^8 (p stays below 2^8; the global kernel's lazy rescaling).
      float x0 = 0.f, x1 = 0.f;
      if (live) chunk_max<CROWS>(sb, CROWS, bh0, bh1, sl2, x0, x1);
      constexpr float kSlack = 8.f;
      const float n0 = x0 > m0 + kSlack ? x0 : m0, n1 = x1 > m1 + kSlack ? x1 : m1;
      float al0 = ex2(m0 - n0), al1 = ex2(m1 - n1);
      l0 *= al0;
      l1 *= al1;
      if (live) chunk_exp<CROWS>(sb, CROWS, bh0, bh1, sl2, n0, n1, l0, l1, pb);
      else zero_p(pb);
      wgmma::fence_operands(pb);
      pin(l0, l1, al0, al1);
      wgmma::wait<0>();  // chunk 0's P V
      wgmma::fence_operands(o);
      wgmma::fence_operands(pa);
      rescale_rows_if_needed<HD>(o, al0, al1);
      wgmma::fence_operands(o);
      wgmma::fence();
#pragma unroll
      for (int kh = 0; kh < CROWS; ++kh) mma_k<HD>(o, pb[kh], vdesc + (CROWS + kh) * kStepV);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(o);
      wgmma::fence_operands(pb);
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    io.store_rows(o, l0, l1, i0, i1, iy0, ix0, iy1, ix1, tq);  // normalised, the real rows only
  }
#else
  using C = WinCfg<HD, SPLIT>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::CPR > 0 && C::KS > 0 && C::CROWS > 0 && C::NK > 0 && C::GS > 0 && C::kv_elems > 0 &&
                    C::t_elems > 0,
                "");
  (void)p;
  __trap();  // never launched: wgmma_windowed_smem only accepts sm_90 devices
#endif
}

// ---- The chunked form (the default at head dim 64; VITRT_ATTN_WGMMA_WINDOWS below): the short-sequence kernel's structure
// (attention_wgmma_short.cu) with the rel-pos terms, for more CTAs per SM. The kernel above holds a
// whole window's scores (two n112 chains: 198 registers) and a 56-column G scratch per warp (~86 KB
// of shared memory at head dim 64): two CTAs per SM, latency-bound (ncu, call Z). Here:
//  - the 14 key rows run as three chunks of 4 (n64) and one of 2 (n32), one S and one P buffer, an
//    online softmax with the lazy rescaling; nothing overlaps a softmax inside the warpgroup, the
//    other CTAs on the SM do (the short kernel's measured best at head dim 64);
//  - the first k16 step of each chunk overwrites S (scale-d = 0): S is never seeded, so Q K^T of
//    chunk c may be issued while P V of chunk c - 1 runs; the rel_w terms enter with the scale in
//    one FFMA per score, rel_h per key row with the row maximum and the exponent's argument;
//  - G = Q T^T is scattered straight into the 14 + 14 terms each query row uses (rel_h by key row,
//    rel_w by key column: the column of G a row needs depends on its own cell), 29 floats per row
//    instead of 58;
//  - so at head dim 64 the CTA needs ~70 KB of shared memory and <= 168 registers: three per SM.
// Same coverage, addressing and padding semantics as the kernel above.
template <int HD_>
struct WinChunkCfg {
  static constexpr int HD = HD_;
  static constexpr int WS = 14, SLOTS = 16, NK = WS * SLOTS, LH = 2 * WS - 1;
  static constexpr int NT = 56;          // N of G = Q T^T: rel_h rows 0..26, rel_w rows 27..53, two zero rows
  static constexpr int NF = 3;           // chunks of 4 key rows (n64)
  static constexpr int TAIL_ROWS = 2;    // key rows of the last chunk (n32)
  static constexpr int NC = NF + 1;
  static constexpr int CPR = HD / 8, KS = HD / 16, THREADS = 128;
  static constexpr int BS = 2 * WS + 1;  // bias scratch row: rel_h[14] | rel_w[14]; odd stride
  static constexpr int kv_elems = NK * HD, t_elems = NT * HD;
  static constexpr int CTAS = HD == 64 ? 3 : 2;
  static_assert(HD == 64 || HD == 80, "wgmma.cuh has the n64 / n80 shapes for O");
  static_assert(NF * 4 + TAIL_ROWS == WS, "the chunks cover the key rows");
};
// The chunked form's: WindowSmem with the bias scratch (16 x BS floats per warp).
template <class C>
size_t win_chunk_smem_bytes(bool lo) {
  return WindowSmem<C>::bytes(lo, static_cast<size_t>(C::THREADS / 32 * 16 * C::BS));
}

#if VITRT_WGMMA_ENABLED
// Online softmax of one chunk of R key rows (S: n8 tiles 2 r, 2 r + 1 per key row r, raw Q K^T) in
// place: t = s * scale_log2 + rel_w (log2 domain), the rows' maxima with rel_h of each key row, the
// lazy reference maximum, p = 2^(t + rel_h - m) packed as bf16 A fragments (one k16 step per key
// row), the rows' partial sums into l0 / l1 (rescaled by al0 / al1, returned for O).
template <int R>
__device__ __forceinline__ void win_chunk_softmax(float* s, const float* bh0, const float* bh1, const float (&rw0)[4],
                                                  const float (&rw1)[4], float sl2, float& m0, float& m1, float& l0,
                                                  float& l1, float& al0, float& al1, unsigned (&pa)[R][4]) {
  float b0[R], b1[R], mk0[R], mk1[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float* t = s + 8 * r;  // [0, 1] / [4, 5]: row g, slots 2 tq + {0, 1} / 8 + 2 tq + {0, 1}; [2, 3] / [6, 7]: row g + 8
    t[0] = fmaf(t[0], sl2, rw0[0]);
    t[1] = fmaf(t[1], sl2, rw0[1]);
    t[4] = fmaf(t[4], sl2, rw0[2]);
    t[5] = fmaf(t[5], sl2, rw0[3]);
    t[2] = fmaf(t[2], sl2, rw1[0]);
    t[3] = fmaf(t[3], sl2, rw1[1]);
    t[6] = fmaf(t[6], sl2, rw1[2]);
    t[7] = fmaf(t[7], sl2, rw1[3]);
    b0[r] = bh0[r];
    b1[r] = bh1[r];
    mk0[r] = fmaxf(fmaxf(t[0], t[1]), fmaxf(t[4], t[5])) + b0[r];
    mk1[r] = fmaxf(fmaxf(t[2], t[3]), fmaxf(t[6], t[7])) + b1[r];
  }
  const float x0 = quad_max(tree_reduce<R>(mk0, [](float a, float b) { return fmaxf(a, b); }));
  const float x1 = quad_max(tree_reduce<R>(mk1, [](float a, float b) { return fmaxf(a, b); }));
  constexpr float kSlack = 8.f;  // -inf + kSlack = -inf: the first chunk always sets m
  const float n0 = x0 > m0 + kSlack ? x0 : m0, n1 = x1 > m1 + kSlack ? x1 : m1;
  al0 = ex2(m0 - n0);  // 0 on the first chunk, 1 when m stays
  al1 = ex2(m1 - n1);
  m0 = n0;
  m1 = n1;
  float t0[R], t1[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float* t = s + 8 * r;
    const float c0 = b0[r] - n0, c1 = b1[r] - n1;
    const float p0 = ex2(t[0] + c0), p1 = ex2(t[1] + c0), p4 = ex2(t[4] + c0), p5 = ex2(t[5] + c0);
    const float p2 = ex2(t[2] + c1), p3 = ex2(t[3] + c1), p6 = ex2(t[6] + c1), p7 = ex2(t[7] + c1);
    t0[r] = (p0 + p1) + (p4 + p5);
    t1[r] = (p2 + p3) + (p6 + p7);
    pa[r][0] = pack_bf16(p0, p1);
    pa[r][1] = pack_bf16(p2, p3);
    pa[r][2] = pack_bf16(p4, p5);
    pa[r][3] = pack_bf16(p6, p7);
  }
  l0 = l0 * al0 + tree_reduce<R>(t0, [](float a, float b) { return a + b; });
  l1 = l1 * al1 + tree_reduce<R>(t1, [](float a, float b) { return a + b; });
}
#endif

// BUF: 1, one S and one P buffer (nothing overlaps a softmax inside the warpgroup; the other CTAs
// on the SM do); 2, two of each (the short kernel's TwoP: chunk c + 1's Q K^T and chunk c - 1's P V
// both run during chunk c's softmax), for head dim 80, where only two CTAs fit on an SM.
template <int HD, int BUF>
__global__ void __launch_bounds__(128, WinChunkCfg<HD>::CTAS) flash_wgmma_windowed_chunk_kernel(const KParams p) {
#if VITRT_WGMMA_ENABLED
  using C = WinChunkCfg<HD>;
  constexpr int WS = C::WS, LH = C::LH, NT = C::NT, CPR = C::CPR, KS = C::KS, BS = C::BS;
  constexpr int NF = C::NF, NC = C::NC;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const bool lo = p.th_lo != nullptr;
  const WindowSmem<C> sm(smem_raw, lo);
  bf16 *Ks = sm.Ks, *Vs = sm.Vs, *Ts = sm.Ts, *Tl = sm.Tl;
  float* Bs = sm.rest;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int h = blockIdx.x % p.heads, s = blockIdx.x / p.heads;  // heads fastest: CTAs share qkv rows in L2
  const WindowIo<HD> io(p, s, h);
  const int nq_out = io.nq_out;

  // ---- K / V of all 14 key rows and the tables, one group.
  io.issue_kv(0, WS, Ks, Vs, warp, lane, C::THREADS / 32);
  io.issue_tables(Ts, Tl, lo, tid, C::THREADS);
  ptx::cp_async_commit();

  unsigned qf[KS][4];
  auto load_q = [&](int mt) { io.load_q(qf, mt * 64 + warp * 16 + g, tq); };
  load_q(0);  // in flight while K / V land

  ptx::cp_async_wait<0>();
  wgmma::fence_proxy_async_smem();  // this thread's cp.async writes -> visible to wgmma
  __syncthreads();                  // everyone's

  const uint64_t kdesc = sm.kdesc(), vdesc = sm.vdesc(), tdesc = sm.tdesc(), tldesc = sm.tldesc();
  constexpr uint64_t kStepK = 2 * 128 / 16;          // one k16 step of a K-major operand
  constexpr uint64_t kStepV = 2 * CPR * 128 / 16;    // one k16 step of V (= one key row)
  constexpr uint64_t kChunkK = 8 * CPR * 128 / 16;   // 4 key rows (64 slots) of K
  float* Bw = Bs + warp * 16 * BS;                   // this warp's rows: rel_h[14] | rel_w[14]
  const float sl2 = p.scale_log2;

  const int mtiles = (nq_out + 63) / 64;
  for (int mt = 0; mt < mtiles; ++mt) {
    const int i0 = mt * 64 + warp * 16 + g, i1 = i0 + 8;
    int iy0, ix0, iy1, ix1;
    io.cell(i0, iy0, ix0);
    io.cell(i1, iy1, ix1);
    // ---- G = Q T^T; each row keeps the 14 rel_h terms of its key rows (G column iy - kh + 13) and
    // the 14 rel_w terms of its key columns (G column 27 + ix - kw + 13), times log2(e).
    {
      float ga[NT / 2];
      relpos_product(ga, qf, tdesc, tldesc, lo);
      __syncwarp();  // the warp's reads of the previous m-tile's terms are done
#pragma unroll
      for (int j = 0; j < NT / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * j + 2 * tq + (e & 1), r = e >> 1;  // ga[4 j + e]: row g + 8 r
          const int iy = r ? iy1 : iy0, ix = r ? ix1 : ix0;
          const int k = col < LH ? iy + WS - 1 - col : ix + WS - 1 - (col - LH);
          if (col < 2 * LH && static_cast<unsigned>(k) < static_cast<unsigned>(WS))
            Bw[(g + 8 * r) * BS + (col < LH ? 0 : WS) + k] = ga[4 * j + e] * kLog2e;
        }
      __syncwarp();
    }
    // rel_w (log2 domain) of the thread's 4 slots kw = 8 (q >> 1) + 2 tq + (q & 1) of every key
    // row; -inf on the masked slots.
    float rw0[4], rw1[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int kw = 8 * (q >> 1) + 2 * tq + (q & 1);
      const bool real = kw < WS;
      rw0[q] = real ? Bw[g * BS + WS + kw] : -INFINITY;
      rw1[q] = real ? Bw[(g + 8) * BS + WS + kw] : -INFINITY;
    }
    const float* bh0 = Bw + g * BS;  // rel_h of key row kh: bh[kh]
    const float* bh1 = Bw + (g + 8) * BS;
    const bool live = mt * 64 + warp * 16 < nq_out;

    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    constexpr int NB = BUF;     // S and P buffers of the 4-row chunks (alternating when 2)
    float sc[NB][32];           // S of a 4-row chunk
    float st[16];               // S of the 2-row chunk
    unsigned pa[NB][4][4], pt[2][4];
    auto fence_pa = [&] {
#pragma unroll
      for (int i = 0; i < NB; ++i) wgmma::fence_operands(pa[i]);
    };

    auto issue_s = [&](auto cc) {
      constexpr int c = decltype(cc)::value;
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if constexpr (c < NF)
          wgmma::wgmma_m64n64k16_rs_sd<0>(sc[c % NB], qf[ks], kdesc + c * kChunkK + ks * kStepK, ks > 0);
        else
          wgmma::wgmma_m64n32k16_rs_sd<0>(st, qf[ks], kdesc + NF * kChunkK + ks * kStepK, ks > 0);
      }
      wgmma::commit();
    };
    // Commit order, NB = 1: S0, PV0, S1, PV1, ...: S_c is issued behind P V of chunk c - 1 and
    // waited for with it. NB = 2: S0, S1, PV0, S2, PV1, ...: waiting for S_c leaves P V of chunk
    // c - 1 and S_{c+1} in flight. (The 2-row chunk has its own S and P.)
    auto step = [&](auto cc) {
      constexpr int c = decltype(cc)::value;
      constexpr bool full = c < NF, next = c + 1 < NC;
      constexpr int R = full ? 4 : C::TAIL_ROWS;
      if constexpr (NB == 2 && next) issue_s(std::integral_constant<int, c + 1>{});
      if constexpr (NB == 1 && c > 0) issue_s(cc);
      if constexpr (NB == 1) wgmma::wait<0>();
      else wgmma::wait<(c > 0 ? 1 : 0) + (next ? 1 : 0)>();
      if constexpr (NB == 1 && c > 0) {
        wgmma::fence_operands(o);
        fence_pa();
        wgmma::fence_operands(pt);
      }
      if constexpr (full) wgmma::fence_operands(sc[c % NB]);
      else wgmma::fence_operands(st);
      if constexpr (c == NC - 1) {  // every Q K^T of this m-tile is done: the next tile's Q can load
        wgmma::fence_operands(qf);
        if (mt + 1 < mtiles) load_q(mt + 1);
      }
      auto finish = [&](float* sv, unsigned(&pc)[R][4]) {
        float al0 = 1.f, al1 = 1.f;
        if (live) {
          win_chunk_softmax<R>(sv, bh0 + 4 * c, bh1 + 4 * c, rw0, rw1, sl2, m0, m1, l0, l1, al0, al1, pc);
        } else {
#pragma unroll
          for (int j = 0; j < R; ++j) pc[j][0] = pc[j][1] = pc[j][2] = pc[j][3] = 0u;
        }
        wgmma::fence_operands(pc);
        pin(l0, l1, al0, al1);
        if constexpr (c > 0) {
          if constexpr (NB == 2) {
            wgmma::wait<next ? 1 : 0>();  // P V of chunk c - 1 (S_{c+1} may still run)
            wgmma::fence_operands(o);
            fence_pa();
          }
          rescale_rows_if_needed<HD>(o, al0, al1);
        }
        wgmma::fence_operands(o);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < R; ++kk) mma_k<HD>(o, pc[kk], vdesc + (c * 4 + kk) * kStepV);
        wgmma::commit();
      };
      if constexpr (full) finish(sc[c % NB], pa[c % NB]);
      else finish(st, pt);
    };
    issue_s(std::integral_constant<int, 0>{});
    static_for(std::make_integer_sequence<int, NC>{}, step);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
    fence_pa();
    wgmma::fence_operands(pt);

    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    // Normalised, the real rows only. Head dim 64 as whole 128-byte lines: vit_b bs32 446-448 against
    // 444-446 img/s with 4-byte pairs (BENCHMARKS.md, 2026-12-05 19:22 session, H100, two A/B rounds).
    if constexpr (HD == 64) io.store_rows_as_lines(o, l0, l1, i0, i1, iy0, ix0, iy1, ix1, lane);
    else io.store_rows(o, l0, l1, i0, i1, iy0, ix0, iy1, ix1, tq);
  }
#else
  using C = WinChunkCfg<HD>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::LH > 0 && C::CPR > 0 && C::KS > 0 && C::NC > 0 && C::BS > 0 && C::kv_elems > 0 &&
                    C::t_elems > 0,
                "");
  (void)p;
  __trap();  // never launched: wgmma_windowed_smem only accepts sm_90 devices
#endif
}

template <int HD, int BUF>
void launch_chunk(const KParams& p, size_t smem, int blocks, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  ensure_smem(flash_wgmma_windowed_chunk_kernel<HD, BUF>, smem, configured, "bf16 wgmma windowed (chunked)");
  flash_wgmma_windowed_chunk_kernel<HD, BUF><<<blocks, WinChunkCfg<HD>::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_wgmma_windowed_chunk_kernel launch");
}

template <int HD, bool SPLIT>
void launch(const KParams& p, size_t smem, int blocks, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  ensure_smem(flash_wgmma_windowed_kernel<HD, SPLIT>, smem, configured, "bf16 wgmma windowed");
  flash_wgmma_windowed_kernel<HD, SPLIT><<<blocks, WinCfg<HD, SPLIT>::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_wgmma_windowed_kernel launch");
}

// VITRT_ATTN_WGMMA_WINDOWS (read once per process): unset, the chunked form at head dim 64 and the
// split kernel at 80 (the measured best of each: vit_b's windowed blocks 5.56 against 6.19 ms, the
// kernel alone 0.605 against 0.689 ms; vit_h's 38.86 against 35.66 ms with the chunked form, whose
// 87 KB at head dim 80 still allow two CTAs per SM only; BENCHMARKS.md, 2026-12-04 14:08 session);
// "0" turns these kernels off (the mma.sync kernel then runs the windows); "split" / "chunk" take
// one form at both head dims; "onepass" takes the unsplit variant (one m64n224 chain per m-tile);
// "alldead" runs the softmax on the warps with no real rows too (as before 2026-12-03 22:30; A/B).
enum class WinMode { Off, Auto, Split, OnePass, AllWarps, Chunked };
WinMode mode_from_env() {
  static const WinMode v = env_choice<WinMode>(
      "VITRT_ATTN_WGMMA_WINDOWS", {{"0", WinMode::Off}, {"split", WinMode::Split}, {"onepass", WinMode::OnePass},
                                   {"alldead", WinMode::AllWarps}, {"chunk", WinMode::Chunked}},
      WinMode::Auto);
  return v;
}
// VITRT_ATTN_WIN_ROWS=full (read once per process): query rows over all 14 columns of a window, the
// padding cells of right-edge windows too, as before 2026-12-05 (A/B runs); unset, real cells only.
bool full_width_rows_from_env() {
  enum class Rows { Real, Full };
  static const Rows v = env_choice<Rows>("VITRT_ATTN_WIN_ROWS", {{"full", Rows::Full}, {"real", Rows::Real}}, Rows::Real);
  return v == Rows::Full;
}
bool chunked_for(int hd) {
  const WinMode m = mode_from_env();
  return m == WinMode::Chunked || (m == WinMode::Auto && hd == 64);
}

}  // namespace

size_t wgmma_windowed_smem(const KParams& p, int optin_smem_limit) {
  const WinMode mode = mode_from_env();
  if (mode == WinMode::Off || wgmma_off_by_env() || !device_is_sm90()) return 0;
  if (p.hd != 64 && p.hd != 80) return 0;
  if (p.th == nullptr || p.relH != 14 || p.relW != 14 || p.nq != 196 || p.nk != 196) return 0;
  if ((p.th_lo == nullptr) != (p.tw_lo == nullptr)) return 0;
  if (p.ws == 0 ? p.q_share != 1 : (p.ws != 14 || p.pad_q == nullptr || p.pad_k == nullptr || p.pad_v == nullptr))
    return 0;
  const bool lo = p.th_lo != nullptr;
  // (the split and one-pass variants have the same shared-memory layout)
  const size_t smem = chunked_for(p.hd)
                          ? (p.hd == 64 ? win_chunk_smem_bytes<WinChunkCfg<64>>(lo) : win_chunk_smem_bytes<WinChunkCfg<80>>(lo))
                          : (p.hd == 64 ? win_smem_bytes<WinCfg<64, true>>(lo) : win_smem_bytes<WinCfg<80, true>>(lo));
  return smem <= static_cast<size_t>(optin_smem_limit) ? smem : 0;
}

void wgmma_windowed_launch(const KParams& params, size_t smem, int blocks, cudaStream_t stream) {
  if (blocks <= 0) return;
  KParams p = params;
  p.win_full_width_rows = full_width_rows_from_env();
  if (chunked_for(p.hd)) {
    if (p.hd == 64) launch_chunk<64, 1>(p, smem, blocks, stream);
    else launch_chunk<80, 2>(p, smem, blocks, stream);
    return;
  }
  p.win_dead_rows_softmax = mode_from_env() == WinMode::AllWarps;
  const bool split = mode_from_env() != WinMode::OnePass;
  if (p.hd == 64) split ? launch<64, true>(p, smem, blocks, stream) : launch<64, false>(p, smem, blocks, stream);
  else split ? launch<80, true>(p, smem, blocks, stream) : launch<80, false>(p, smem, blocks, stream);
}

}  // namespace vitrt::cuda::attn
