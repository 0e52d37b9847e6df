// Hopper flash attention for SAM's global blocks: wgmma (sm_90a) with the decomposed rel-pos bias.
//
// Covers the encoder's global attention: dense sequences of rel_H x 64 tokens (the 64 x 64 grid of
// every SAM model at 1024 px), head_dim 64 or 80, BF16. Everything else (windows, other grids, the
// decoder's attention, sm_80) runs the mma.sync kernel of attention.cu, which this one mirrors.
// FlashAttention-3's structure, without TMA:
//  - a CTA is two consumer warpgroups (64 query rows each, 128 per CTA) and one producer
//    warpgroup, which hands most of its registers to the consumers (setmaxnreg);
//  - the producers stream K / V tiles (BN = 64 keys) into a 4-slot shared-memory ring with cp.async,
//    each slot guarded by two mbarriers (full: its copies landed and were fenced for the async proxy
//    by the producers; empty: both warpgroups are done with it), so the warpgroups never meet at a
//    CTA barrier and drift apart freely;
//  - inside a warpgroup, Q K^T of tile kt and P V of tile kt - 1 are issued back to back, and the
//    softmax of tile kt runs on the ALUs while P V is on the tensor cores;
//  - S = Q K^T and O += P V are wgmma.mma_async m64nNk16 with the A operand in registers (Q fragments
//    loaded once; P converted from the S accumulators) and K / V read from shared memory through
//    descriptors. K and V share one no-swizzle core-matrix layout (8 rows x 16 bytes contiguous,
//    [row/8][chunk][row%8]): K is the K-major B operand of Q K^T, V the MN-major (transposed) B operand
//    of P V, so V needs no transpose;
//  - one key tile is one key row kh of the grid, so a query row's rel_w bias is the same for every
//    tile: each thread keeps its share in registers (the score accumulators' layout) and S starts
//    from it; rel_h is one float per row and tile, read from shared memory, and folds with the
//    scale and the running maximum into one FFMA per score; O is only rescaled when a row's
//    reference maximum moves by more than 2^8 (lazy rescaling, as FlashAttention-4);
//  - the rel-pos prologue is the mma.sync kernel's: G = Q T^T over all table rows on the tensor
//    cores, scattered into rel_h / rel_w buffers in shared memory (aliasing the Q staging).
// Softmax in the log2 domain with the row maxima and sums per thread quad, as attention.cu.
// At head dim 64 the CTA has three consumer warpgroups (WgCfg::CWG = 3, 192 query rows): ncu found
// the two-warpgroup form latency-bound (0.68 eligible warps per scheduler), and one more consumer
// warp per scheduler took vit_b's global attention from 26.1 to 22.3 ms (BENCHMARKS.md). Head dim 80
// keeps two (its O accumulators do not fit 152 registers). For A/B runs (VITRT_ATTN_WGMMA, see
// variant_from_env): two warpgroups at head dim 64 too, or the mma.sync kernel.
#include <cuda_bf16.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "ops/cuda/attention_kernel.cuh"
#include "ops/cuda/mbarrier.cuh"
#include "ops/cuda/ptx.cuh"
#include "ops/cuda/runtime.h"
#include "ops/cuda/wgmma.cuh"

namespace vitrt::cuda::attn {
namespace {

using bf16 = __nv_bfloat16;
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldsm_x4;
using ptx::mma_bf16;
using ptx::setmaxnreg_dec;
using ptx::setmaxnreg_inc;

// CWG: consumer warpgroups, 2 or 3 (the default at head dim 64: 192 query rows per CTA, one more
// warp per scheduler to hide the softmax's latency, at 152 registers per consumer thread instead of
// 224). Four do not fit: at 112 registers ptxas spills and serialises the wgmmas (C7512), even with
// rel_w in shared memory (tried 2026-12-03).
template <int HD_, int CWG_ = 2>
struct WgCfg {
  static constexpr int HD = HD_;
  static constexpr int CWG = CWG_;
  static constexpr int RELW = 64;      // the grid's width: one key row
  static constexpr int BN = RELW;      // keys per tile: one key row of the grid
  static constexpr int CONSUMER_WARPS = 4 * CWG;  // CWG warpgroups
  static constexpr int PRODUCERS = 128;           // + one producer warpgroup
  static constexpr int THREADS = 32 * CONSUMER_WARPS + PRODUCERS;
  // Registers per thread after setmaxnreg: the producers give theirs to the consumers (the
  // launch's 65536 / 384 = 168 each would make the consumers spill their accumulators). The CTA
  // keeps what it was launched with (THREADS x 168): setmaxnreg.inc waits for registers freed by
  // .dec, so a total above that would hang the consumers for ever.
  // (setmaxnreg is per warpgroup, so the producers are a whole warpgroup: with three consumer
  // warpgroups the launch has 512 threads x 128.)
  static constexpr int LAUNCH_REGS = CWG == 3 ? 128 : 168, PRODUCER_REGS = CWG == 3 ? 40 : 56;
  static constexpr int CONSUMER_REGS = CWG == 3 ? 152 : 224;
  static_assert(CWG == 2 || CWG == 3, "two or three consumer warpgroups");
  static_assert(PRODUCERS * PRODUCER_REGS + 32 * CONSUMER_WARPS * CONSUMER_REGS <= THREADS * LAUNCH_REGS,
                "setmaxnreg must redistribute the launch's registers, not ask for more");
  static constexpr int BM = 16 * CONSUMER_WARPS;           // query rows per CTA
  static constexpr int STAGES = 4;     // K / V ring slots (shared memory)
  static constexpr int CPR = HD / 8;   // 16-byte chunks per row
  static constexpr int KS = HD / 16;   // k16 steps of Q K^T
  static constexpr int NT8 = BN / 8;   // n8 tiles of S per warp (one key row: the rel_w registers)
  static constexpr int PK = BN / 16;   // k16 steps of P V
  static constexpr int NRG = BM / 16;  // m16 row groups (one per consumer warp)
  static constexpr int SW = NRG * 32 + 8, SH = NRG * 16 + 8;  // bias layouts as attention.cu's
  static constexpr int LDS = HD + 8;   // padded rows: Q staging, tables, output staging
  static constexpr int tile_elems = BN * HD;
  static constexpr int kv_elems = STAGES * 2 * tile_elems;
  static_assert(kv_elems >= BM * LDS, "the output staging fits the K/V ring");
  static_assert(kv_elems >= 4 * RELW * LDS, "the prologue's table chunk fits the K/V ring");
  static_assert(HD == 64 || HD == 80, "wgmma shapes exist for n64 / n80 only (wgmma.cuh)");
};

// [Q staging | rel_w, rel_h buffers (aliased)] [K/V ring]
// [mbarriers: full[STAGES], empty[STAGES]]
template <class C>
__host__ __device__ inline size_t wg_region_a(int relH) {
  const size_t q = static_cast<size_t>(C::BM) * C::LDS * sizeof(bf16);
  const size_t b = (static_cast<size_t>(C::RELW / 2) * C::SW + static_cast<size_t>(relH) * C::SH) * sizeof(float);
  return ((q > b ? q : b) + 127) / 128 * 128;
}
template <class C>
size_t wg_smem_bytes(int relH) {
  return wg_region_a<C>(relH) + static_cast<size_t>(C::kv_elems) * sizeof(bf16) + 2 * C::STAGES * sizeof(uint64_t);
}

// Chunk 32 * step + ln (ln < 32, step < BN * CPR / 32) of the K / V tiles whose first key row is
// r0: one 16-byte chunk of K and of V into the core-matrix layout. The 32 chunks of a step cover
// 16 rows x 2 chunks (each 32-byte sector of global memory whole; each 8-lane phase writes one
// contiguous 128-byte core matrix: no bank conflicts).
template <class C>
__device__ __forceinline__ void copy_kv_chunk(int step, int ln, bf16* Ks, bf16* Vs, const bf16* kb, const bf16* vb,
                                              long long r0, const KParams& p) {
  const int r = (ln & 7) + ((ln >> 4) << 3) + (step % (C::BN / 16)) * 16;
  const int c = ((ln >> 3) & 1) + 2 * (step / (C::BN / 16));
  const int off = core_matrix_offset<C::CPR>(r, c);
  cp_async16(Ks + off, kb + (r0 + r) * p.ldk + c * 8, 16);
  cp_async16(Vs + off, vb + (r0 + r) * p.ldv + c * 8, 16);
}

#if VITRT_WGMMA_ENABLED
// Barrier of the consumer warps only (named barrier 1; the producers may have exited).
template <int N>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(N) : "memory");
}
#endif


// d[64 x N] += a * b with N = 64 (S, or O for head_dim 64) or 80 (O for head_dim 80).
template <int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc, bool trans_b) {
#if VITRT_WGMMA_ENABLED
  if constexpr (N == 64) {
    if (trans_b) wgmma::wgmma_m64n64k16_rs<1>(d, a, desc);
    else wgmma::wgmma_m64n64k16_rs<0>(d, a, desc);
  } else {
    if (trans_b) wgmma::wgmma_m64n80k16_rs<1>(d, a, desc);
    else wgmma::wgmma_m64n80k16_rs<0>(d, a, desc);
  }
#else
  (void)d, (void)a, (void)desc, (void)trans_b;
#endif
}

template <int HD, int CWG>
__global__ void __launch_bounds__(WgCfg<HD, CWG>::THREADS, 1) flash_wgmma_relpos_kernel(const KParams p) {
#if VITRT_WGMMA_ENABLED
  using C = WgCfg<HD, CWG>;
  constexpr int THREADS = C::THREADS, BM = C::BM, BN = C::BN, CPR = C::CPR, KS = C::KS, NT8 = C::NT8;
  constexpr int LDS = C::LDS, SW = C::SW, SH = C::SH, STAGES = C::STAGES, TE = C::tile_elems;
  constexpr int CONSUMERS = 32 * C::CONSUMER_WARPS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  float* BWs = reinterpret_cast<float*>(smem_raw);  // aliases Qs once the Q fragments are in registers
  float* BHs = BWs + (C::RELW / 2) * SW;
  bf16* KV = reinterpret_cast<bf16*>(smem_raw + wg_region_a<C>(p.relH));
  uint64_t* full = reinterpret_cast<uint64_t*>(KV + C::kv_elems);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const bool consumer = warp < C::CONSUMER_WARPS;
  const int tile = blockIdx.x % p.num_qtiles;
  const int sh = blockIdx.x / p.num_qtiles;
  const int h = sh % p.heads, s = sh / p.heads;
  const int m0 = tile * BM;
  const long long q0 = static_cast<long long>(s) * p.nq, k0 = static_cast<long long>(s) * p.nk;
  const bf16* qb = static_cast<const bf16*>(p.q) + h * HD;
  const bf16* kb = static_cast<const bf16*>(p.k) + h * HD;
  const bf16* vb = static_cast<const bf16*>(p.v) + h * HD;

  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar::init(&full[i], C::PRODUCERS);       // every producer thread, once its copies land
      mbar::init(&empty[i], C::CONSUMER_WARPS);  // one arrival per consumer warp
    }
  }

  // ---- Q tile -> Qs (rows past nq zero-filled)
  for (int i = tid; i < BM * CPR; i += THREADS) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + r;
    const bool in = t < p.nq;
    cp_async16(Qs + r * LDS + c * 8, in ? qb + (q0 + t) * p.ldq + c * 8 : qb, in ? 16 : 0);
  }
  cp_async_commit();

  // ---- rel-pos prologue (attention_kernel.cuh; one m16 tile per consumer warp, every thread helps
  // load): BH / BW, which overwrite Qs once the Q fragments are in registers. Its closing barrier
  // also publishes the mbarriers' initialisation.
  unsigned qf[1][KS][4];
  relpos_prologue<HD, 1, THREADS>(p, m0, consumer, KV, p.th_lo ? 2 * C::RELW : 4 * C::RELW, BWs, BHs, SW, SH, qf,
                                  [&] {
                                    const int row = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                                    const int col = (lane >> 4) << 3;
#pragma unroll
                                    for (int ks = 0; ks < KS; ++ks)
                                      ldsm_x4(qf[0][ks][0], qf[0][ks][1], qf[0][ks][2], qf[0][ks][3],
                                              Qs + row * LDS + ks * 16 + col);
                                  });

  const int nkt = p.nk / BN;

  // ---- producers: K / V tiles into the ring, 32 chunks per warp and step.
  if (!consumer) {
    setmaxnreg_dec<C::PRODUCER_REGS>();
    const int pw = warp - C::CONSUMER_WARPS;
    constexpr int STEPS = BN * CPR / 32;  // 32-chunk steps per tile (16 or 20), spread over the warps
    for (int kt = 0; kt < nkt; ++kt) {
      const int slot = kt % STAGES, round = kt / STAGES;
      if (round > 0) mbar::wait(&empty[slot], (round - 1) & 1);
      bf16* Ks = KV + slot * 2 * TE;
      bf16* Vs = Ks + TE;
      const long long r0 = k0 + static_cast<long long>(kt) * BN;
      constexpr int PW = C::PRODUCERS / 32;
      static_assert(STEPS % PW == 0, "every producer warp copies the same number of steps");
#pragma unroll
      for (int i = 0; i < STEPS / PW; ++i) copy_kv_chunk<C>(pw + i * PW, lane, Ks, Vs, kb, vb, r0, p);
      cp_async_commit();
      // Tile kt - 1 is published once this thread's copies of it have landed (two tiles in
      // flight per thread): its own proxy fence (generic cp.async writes -> wgmma's async-proxy
      // reads), then the arrival. The consumers then only wait on the mbarrier; a fence on their
      // side (MEMBAR + FENCE.VIEW.ASYNC) would sit on the critical path of every tile.
      if (kt > 0) {
        cp_async_wait<1>();
        wgmma::fence_proxy_async_smem();
        mbar::arrive(&full[(kt - 1) % STAGES]);
      }
    }
    cp_async_wait<0>();
    wgmma::fence_proxy_async_smem();
    mbar::arrive(&full[(nkt - 1) % STAGES]);
    return;
  }
  setmaxnreg_inc<C::CONSUMER_REGS>();

  // ---- consumers
  // This thread's share of rel_w / scale in the score accumulators' layout (tile-independent).
  const float* bw_row = BWs + tq * SW + warp * 32 + g * 4;  // + nt * 4 * SW: n8 tile nt of the key row
  float bw[NT8 * 4];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const float4 w4 = *reinterpret_cast<const float4*>(bw_row + nt * 4 * SW);
    bw[nt * 4 + 0] = w4.x;
    bw[nt * 4 + 1] = w4.y;
    bw[nt * 4 + 2] = w4.z;
    bw[nt * 4 + 3] = w4.w;
  }
  // BHs + bh_off + kh * SH: (rel_h row g, row g + 8) * log2e of key row kh. (An offset: a pointer
  // bh_row + kh * SH changed ptxas's register allocation and schedule of the whole kernel.)
  const int bh_off = warp * 16 + g * 2;

  float o[HD / 2];
#pragma unroll
  for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
  float mrow0 = -INFINITY, mrow1 = -INFINITY, lrow0 = 0.f, lrow1 = 0.f;
  constexpr uint32_t kChunkBytes = 128, kRowGroupBytes = CPR * 128;
  // Shared-memory descriptors of slot 0's K and V tiles, built once: a tile's step is the base plus
  // a byte offset >> 4 in the address field (bits 0-13; shared addresses < 256 KiB never carry out).
  const uint64_t kdesc0 = wgmma::make_smem_desc(KV, kChunkBytes, kRowGroupBytes);
  const uint64_t vdesc0 = wgmma::make_smem_desc(KV + TE, kRowGroupBytes, kChunkBytes);
  auto slot_desc16 = [&](int kt) { return static_cast<uint64_t>((kt % STAGES) * (2 * TE * 2 / 16)); };

  // S = rel_w / scale + Q K^T for tile kt, issued asynchronously (one wgmma group). Called with no
  // wgmma in flight: the MOVs that seed S define a wgmma input, which must not happen while other
  // wgmmas run (ptxas would serialise every wgmma of the kernel).
  auto issue_qk = [&](float(&sc)[NT8 * 4], int kt) {
    mbar::wait(&full[kt % STAGES], (kt / STAGES) & 1);  // fenced by the producers
#pragma unroll
    for (int i = 0; i < NT8 * 4; ++i) sc[i] = bw[i];
    wgmma::fence_operands(sc);
    wgmma::fence();
    const uint64_t d = kdesc0 + slot_desc16(kt);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) mma_rs<BN>(sc, qf[0][ks], d + ks * (2 * 64 * 2 / 16), false);
    wgmma::commit();
  };
  // O += P V for tile kt, issued asynchronously.
  auto issue_pv = [&](const unsigned(&pa)[C::PK][4], int kt) {
    wgmma::fence_operands(o);
    wgmma::fence();
    const uint64_t d = vdesc0 + slot_desc16(kt);
#pragma unroll
    for (int c = 0; c < C::PK; ++c) mma_rs<HD>(o, pa[c], d + c * (2 * CPR * 64 * 2 / 16), true);
    wgmma::commit();
  };
  // This warp is done with tile kt's slot (its Q K^T and P V have completed).
  auto release = [&](int kt) {
    __syncwarp();
    if (lane == 0) mbar::arrive(&empty[kt % STAGES]);
  };
  // O's rescaling factors for the tile whose P was computed last (exactly 1 when its reference
  // maximum did not move).
  float al0 = 1.f, al1 = 1.f;
  // Online softmax (log2 domain) of tile kt's raw scores in place: p = 2^(s * scale + rel_h - m).
  // S already holds rel_w / scale (seeded), and rel_h is constant along the key row, so its
  // maximum is max(s) * scale + rel_h: the scale, the bias and the subtraction of m fold into one
  // FFMA per score. The reference maximum m only moves when the row maximum exceeds it by more
  // than kSlack (FlashAttention-4's lazy rescaling): the result is the same quantity, p stays
  // below 2^kSlack, and most tiles then skip O's rescaling (see rescale_if_needed).
  constexpr float kSlack = 8.f;
  auto softmax = [&](float(&sc)[NT8 * 4], int kt) {
    const float2 bhk = *reinterpret_cast<const float2*>(BHs + (kt * SH + bh_off));  // rel_h of key row kt
    float m0[NT8], m1[NT8];  // row maxima as trees (log2(NT8) + 1 dependent steps, not 2 * NT8)
#pragma unroll
    for (int n = 0; n < NT8; ++n) {
      m0[n] = fmaxf(sc[n * 4 + 0], sc[n * 4 + 1]);
      m1[n] = fmaxf(sc[n * 4 + 2], sc[n * 4 + 3]);
    }
    // (fmaxf with -inf, as when a tile had several key rows: it keeps the measured SASS, and a NaN
    // maximum becomes -inf)
    float mx0 = fmaxf(-INFINITY,
                      fmaf(tree_reduce<NT8>(m0, [](float a, float b) { return fmaxf(a, b); }), p.scale_log2, bhk.x));
    float mx1 = fmaxf(-INFINITY,
                      fmaf(tree_reduce<NT8>(m1, [](float a, float b) { return fmaxf(a, b); }), p.scale_log2, bhk.y));
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    // -inf + kSlack = -inf: the first tile always sets m.
    const float mn0 = mx0 > mrow0 + kSlack ? mx0 : mrow0, mn1 = mx1 > mrow1 + kSlack ? mx1 : mrow1;
    al0 = ex2(mrow0 - mn0);  // ex2(-inf) = 0 on the first tile, ex2(0) = 1 when m stays
    al1 = ex2(mrow1 - mn1);
    mrow0 = mn0;
    mrow1 = mn1;
    const float c0 = bhk.x - mn0, c1 = bhk.y - mn1;
    float t0[NT8], t1[NT8];  // row sums as trees
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      sc[nt * 4 + 0] = ex2(fmaf(sc[nt * 4 + 0], p.scale_log2, c0));
      sc[nt * 4 + 1] = ex2(fmaf(sc[nt * 4 + 1], p.scale_log2, c0));
      sc[nt * 4 + 2] = ex2(fmaf(sc[nt * 4 + 2], p.scale_log2, c1));
      sc[nt * 4 + 3] = ex2(fmaf(sc[nt * 4 + 3], p.scale_log2, c1));
      t0[nt] = sc[nt * 4 + 0] + sc[nt * 4 + 1];
      t1[nt] = sc[nt * 4 + 2] + sc[nt * 4 + 3];
    }
    lrow0 = lrow0 * al0 + tree_reduce<NT8>(t0, [](float a, float b) { return a + b; });
    lrow1 = lrow1 * al1 + tree_reduce<NT8>(t1, [](float a, float b) { return a + b; });
  };
  // P as bf16 A fragments, two n8 tiles of S per k16 step.
  auto to_p = [&](const float(&sc)[NT8 * 4], unsigned(&pa)[C::PK][4]) {
#pragma unroll
    for (int c = 0; c < C::PK; ++c) {
      pa[c][0] = pack_bf16(sc[(2 * c) * 4 + 0], sc[(2 * c) * 4 + 1]);
      pa[c][1] = pack_bf16(sc[(2 * c) * 4 + 2], sc[(2 * c) * 4 + 3]);
      pa[c][2] = pack_bf16(sc[(2 * c + 1) * 4 + 0], sc[(2 * c + 1) * 4 + 1]);
      pa[c][3] = pack_bf16(sc[(2 * c + 1) * 4 + 2], sc[(2 * c + 1) * 4 + 3]);
    }
  };
  // O *= the last softmax's factors (only ever called with no wgmma in flight).
  auto rescale_if_needed = [&]() { rescale_rows_if_needed<HD>(o, al0, al1); };

  // FlashAttention-3's intra-warpgroup order: Q K^T of tile kt and P V of tile kt - 1 are issued
  // back to back; the softmax of tile kt runs while P V is on the tensor cores. O is rescaled
  // for tile kt after P V of tile kt - 1 has retired (nothing in flight), before P V of tile kt.
  // (ptxas puts the wait for P V right after the row maxima, before the exps: P of tile kt is
  // written into the registers P V reads. Loops that waited after the exps measured slower:
  // variant_from_env.)
  float sc[NT8 * 4];
  unsigned pa[C::PK][4];
  issue_qk(sc, 0);
  wgmma::wait<0>();
  wgmma::fence_operands(sc);
  softmax(sc, 0);
  to_p(sc, pa);  // (O is still zero: no rescaling)
  for (int kt = 1; kt < nkt; ++kt) {
    issue_qk(sc, kt);
    issue_pv(pa, kt - 1);
    wgmma::wait<1>();  // Q K^T of tile kt (P V of tile kt - 1 may still run)
    wgmma::fence_operands(sc);
    softmax(sc, kt);
    wgmma::fence_operands(sc);
    pin(lrow0, lrow1, al0, al1);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
    wgmma::fence_operands(pa);  // P of tile kt - 1 stays live (its registers reserved) until here
    release(kt - 1);
    to_p(sc, pa);
    rescale_if_needed();
  }
  issue_pv(pa, nkt - 1);
  wgmma::wait<0>();
  wgmma::fence_operands(o);

  // ---- epilogue: normalise, stage each warp's 16 rows in the (now free) K/V ring, 16-byte stores.
  // Every consumer warpgroup is done with the ring (the producers are idle).
  consumer_sync<CONSUMERS>();
  lrow0 = quad_sum(lrow0);
  lrow1 = quad_sum(lrow1);
  const float inv0 = lrow0 > 0.f ? 1.f / lrow0 : 0.f, inv1 = lrow1 > 0.f ? 1.f / lrow1 : 0.f;
  bf16* St = KV;
  const int r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) {
    *reinterpret_cast<unsigned*>(St + r0 * LDS + d * 8 + 2 * tq) = pack_bf16(o[d * 4 + 0] * inv0, o[d * 4 + 1] * inv0);
    *reinterpret_cast<unsigned*>(St + r1 * LDS + d * 8 + 2 * tq) = pack_bf16(o[d * 4 + 2] * inv1, o[d * 4 + 3] * inv1);
  }
  __syncwarp();
  bf16* ob = static_cast<bf16*>(p.out) + h * HD;
  for (int i = lane; i < 16 * CPR; i += 32) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + warp * 16 + r;
    if (t < p.nq)
      *reinterpret_cast<uint4*>(ob + (q0 + t) * p.ldo + c * 8) =
          *reinterpret_cast<const uint4*>(St + (warp * 16 + r) * LDS + c * 8);
  }
#else
  using C = WgCfg<HD, CWG>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::CPR > 0 && C::KS > 0 && C::NT8 > 0 && C::PK > 0 && C::NRG > 0 && C::SW > 0 && C::SH > 0, "");
  (void)p;
  __trap();  // never launched: wgmma_relpos_plan only accepts sm_90 devices
#endif
}

template <int HD, int CWG>
void launch(const KParams& p, int blocks, size_t smem, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  ensure_smem(flash_wgmma_relpos_kernel<HD, CWG>, smem, configured, "bf16 wgmma");
  flash_wgmma_relpos_kernel<HD, CWG><<<blocks, WgCfg<HD, CWG>::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_wgmma_relpos_kernel launch");
}

// The variant, from VITRT_ATTN_WGMMA (read once per process; for A/B runs on the GPU machine):
// unset -> the warp-specialised kernel with 64-key tiles and three consumer warpgroups at head dim
// 64, two at 80 (the measured default: vit_b bs32 global attention 22.25 vs 26.06 ms with two,
// BENCHMARKS.md 2026-12-03 18:44 session, call 5); "wg2" -> two consumer warpgroups at head dim 64
// too (the kernel that head dim 80 runs); "0" -> off (the mma.sync kernel runs). Anything else, the
// names of the variants taken out included, is the default.
// Measured against the default and taken out, each slower or no faster end to end (numbers and SASS
// in BENCHMARKS.md, 2026-12-02 to 2026-12-05; the last in "Session of 2026-12-05, 09:07 UTC onwards"):
// bn128 (128-key tiles), lockstep (the first schedule), skipdead, emu1-3 (exps on the FMA pipe), lw
// and p2 (the wait for P V after the exps; p2 with P double-buffered), bn128lw / bn128p2 / bn128wg3
// (those with 128-key tiles; bn128wg3 with three warpgroups, rel_w and Q in shared memory), wg3s
// (three warpgroups at head dim 80); before them the row sums from P V, rel_w seeds from shared
// memory, scheduler barriers between the warpgroups and tiles without row maxima.
WgmmaVariant variant_from_env() {
  static const WgmmaVariant v = env_choice<WgmmaVariant>(
      "VITRT_ATTN_WGMMA", {{"0", WgmmaVariant::Off}, {"wg2", WgmmaVariant::Keys64}}, WgmmaVariant::Keys64Wg3);
  return v;
}

template <int HD>
WgmmaPlan plan_for(WgmmaVariant v, int relH) {
  WgmmaPlan pl;
  pl.variant = v;
  switch (v) {
    case WgmmaVariant::Keys64: pl.smem = wg_smem_bytes<WgCfg<HD, 2>>(relH), pl.bm = WgCfg<HD, 2>::BM; break;
    case WgmmaVariant::Keys64Wg3:
      if constexpr (HD != 64) return plan_for<HD>(WgmmaVariant::Keys64, relH);  // two warpgroups at head dim 80
      else pl.smem = wg_smem_bytes<WgCfg<HD, 3>>(relH), pl.bm = WgCfg<HD, 3>::BM;
      break;
    case WgmmaVariant::Off: break;
  }
  return pl;
}

template <int HD>
void launch_variant(const WgmmaPlan& pl, const KParams& p, int blocks, cudaStream_t stream) {
  switch (pl.variant) {
    case WgmmaVariant::Keys64: launch<HD, 2>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys64Wg3:
      if constexpr (HD == 64) launch<HD, 3>(p, blocks, pl.smem, stream);
      else throw Error("wgmma attention: the three-warpgroup plan is for head dim 64");  // (plan_for never makes it)
      break;
    case WgmmaVariant::Off: throw Error("wgmma attention: launched without a plan");
  }
}

}  // namespace

bool wgmma_off_by_env() { return variant_from_env() == WgmmaVariant::Off; }

WgmmaPlan wgmma_relpos_plan(const KParams& p, int optin_smem_limit) {
  const WgmmaVariant v = variant_from_env();
  if (v == WgmmaVariant::Off || !device_is_sm90()) return {};
  if (p.ws != 0 || p.q_share != 1 || (p.hd != 64 && p.hd != 80)) return {};
  if (p.th == nullptr || p.relW != 64 || p.relH < 1 || p.nq != p.relH * p.relW || p.nk != p.nq) return {};
  if (p.nk % 64 != 0 || (p.th_lo == nullptr) != (p.tw_lo == nullptr)) return {};
  const WgmmaPlan pl = p.hd == 64 ? plan_for<64>(v, p.relH) : plan_for<80>(v, p.relH);
  return pl.smem <= static_cast<size_t>(optin_smem_limit) ? pl : WgmmaPlan{};
}

void wgmma_relpos_launch(const WgmmaPlan& plan, const KParams& p, int blocks, cudaStream_t stream) {
  if (p.hd == 64) launch_variant<64>(plan, p, blocks, stream);
  else launch_variant<80>(plan, p, blocks, stream);
}

}  // namespace vitrt::cuda::attn
