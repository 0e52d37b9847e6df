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
// keeps two (its O accumulators do not fit 152 registers). Variants for A/B runs (VITRT_ATTN_WGMMA,
// see variant_from_env): two warpgroups at head dim 64, 128-key tiles, and the first, lockstep
// schedule (WgCfg::LOCK).
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

// LOCK selects the schedule: false (the default), warp-specialised as described at the top; true,
// the first version kept for A/B runs (VITRT_ATTN_WGMMA=lockstep): three warpgroups of 64 rows that
// all load K / V with cp.async and meet at a CTA barrier every key tile (measured better for head
// dim 64 in one run, worse for 80: BENCHMARKS.md, calls J and L).
// CWG: consumer warpgroups of the warp-specialised schedule, 2 or 3 (the default at head dim 64: 192
// query rows per CTA, one more warp per scheduler to hide the softmax's latency, at 152 registers
// per consumer thread instead of 224). Four do not fit: at 112 registers ptxas spills and serialises
// the wgmmas (C7512), even with rel_w in shared memory (tried 2026-12-03).
// SKIPDEAD: a consumer warpgroup whose 64 query rows are all past the sequence (the last query tile
// of a 64 x 64 grid: 4096 = 21 x 192 + 64, so two of its three warpgroups at head dim 64) leaves at
// once instead of computing rows nobody reads (~3% of the work); the ring's empty barriers then
// count the live warps only. A template flag, so that the other variants' code stays as measured
// (a run-time branch changed ptxas's schedule of the key loop).
// EMU: of a 64-key row's 8 n8 score tiles, how many take their exps on the FMA pipe (ex2_fma) instead
// of the MUFU, spread evenly over the row (0: none, the default).
// PM: the key loop's form. 1 (LATE): the default loop with the wait for P V in a branch after the
// exps; 2 (P2): P double-buffered besides (the softmax of tile kt writes its P into the buffer that
// P V of tile kt - 1 does not read), S from zero, slots released two tiles late; 3 (LATE with
// RELW_SMEM, Q_SMEM): LATE's loop with S from zero, rel_w added by the softmax from shared memory
// instead of 32 registers, and Q read by Q K^T from shared memory instead of 16, which lets three
// consumer warpgroups hold 128-key tiles (S 64 + P 32 + O 32 registers) in 160 (with Q in registers
// ptxas spilled and serialised the wgmmas), or 64-key tiles at head dim 80 (O 40). See the key loop.
template <int HD_, int BN_, bool LOCK_ = false, int CWG_ = 2, bool SKIPDEAD_ = false, int EMU_ = 0, int PM_ = 0>
struct WgCfg {
  static constexpr int HD = HD_;
  static constexpr bool LATE = PM_ == 1 || PM_ == 3, P2 = PM_ == 2, RELW_SMEM = PM_ == 3;
  static constexpr bool Q_SMEM = PM_ == 3;  // Q K^T's A operand from shared memory (16 registers fewer)
  static constexpr bool ZERO_S = P2 || RELW_SMEM;  // S = Q K^T from zero, rel_w added by the softmax
  static constexpr bool LOCK = LOCK_;
  static constexpr int CWG = CWG_;
  static constexpr bool SKIPDEAD = SKIPDEAD_;
  static constexpr int EMU = EMU_;
  static constexpr int RELW = 64;      // the grid's width: one key row
  static constexpr int BN = BN_;       // keys per tile: one (64) or two (128) key rows of the grid
  static constexpr int KH = BN / RELW;  // key rows per tile
  static constexpr int CONSUMER_WARPS = LOCK ? 12 : 4 * CWG;  // three / CWG warpgroups
  static constexpr int PRODUCERS = LOCK ? 0 : 128;           // + one producer warpgroup
  static constexpr int THREADS = 32 * CONSUMER_WARPS + PRODUCERS;
  // Registers per thread after setmaxnreg: the producers give theirs to the consumers (the
  // launch's 65536 / 384 = 168 each would make the consumers spill their accumulators). The CTA
  // keeps what it was launched with (THREADS x 168): setmaxnreg.inc waits for registers freed by
  // .dec, so a total above that would hang the consumers for ever.
  // (setmaxnreg is per warpgroup, so the producers are a whole warpgroup: with three consumer
  // warpgroups the launch has 512 threads x 128.)
  // (P2 and 128-key tiles at three warpgroups: 160 / 32, all of the launch's registers; at 152 P2's
  // consumers spill.)
  static constexpr bool WIDE3 = CWG == 3 && (P2 || BN_ == 128 || PM_ == 3);
  static constexpr int LAUNCH_REGS = CWG == 3 ? 128 : 168, PRODUCER_REGS = CWG == 3 ? (WIDE3 ? 32 : 40) : 56;
  static constexpr int CONSUMER_REGS = CWG == 3 ? (WIDE3 ? 160 : 152) : 224;
  static_assert(CWG == 2 || CWG == 3, "two or three consumer warpgroups");
  static_assert(!LOCK || CWG == 2, "the lockstep schedule has its own three warpgroups");
  static_assert(LOCK || PRODUCERS * PRODUCER_REGS + 32 * CONSUMER_WARPS * CONSUMER_REGS <= THREADS * LAUNCH_REGS,
                "setmaxnreg must redistribute the launch's registers, not ask for more");
  static constexpr int BM = 16 * CONSUMER_WARPS;           // query rows per CTA
  // K / V ring slots (shared memory; 128-key tiles at head dim 80 or with three warpgroups: three fit)
  static constexpr int STAGES = LOCK || (BN == 128 && (HD == 80 || CWG == 3)) ? 3 : 4;
  static constexpr int CPR = HD / 8;   // 16-byte chunks per row
  static constexpr int KS = HD / 16;   // k16 steps of Q K^T
  static constexpr int NT8 = BN / 8;   // n8 tiles of S per warp
  static constexpr int NW8 = RELW / 8;  // n8 tiles of one key row (the rel_w registers)
  static constexpr int PK = BN / 16;   // k16 steps of P V
  static constexpr int NRG = BM / 16;  // m16 row groups (one per consumer warp)
  static constexpr int SW = NRG * 32 + 8, SH = NRG * 16 + 8;  // bias layouts as attention.cu's
  static constexpr int LDS = HD + 8;   // padded rows: Q staging, tables, output staging
  static constexpr int tile_elems = BN * HD;
  static constexpr int kv_elems = STAGES * 2 * tile_elems;
  static_assert(!LOCK || BN == 64, "the lockstep schedule is kept in its measured form only");
  static_assert(!LOCK || !SKIPDEAD, "the lockstep schedule's CTA barriers need every warp");
  static_assert(kv_elems >= BM * LDS, "the output staging fits the K/V ring");
  static_assert(kv_elems >= 4 * RELW * LDS, "the prologue's table chunk fits the K/V ring");
  static_assert(BN == 64 || BN == 128, "wgmma.cuh has the n64 / n128 shapes for S");
  static_assert(HD == 64 || HD == 80, "wgmma shapes exist for n64 / n80 only (wgmma.cuh)");
  // P2 releases a slot two tiles late: with three slots the producers, which publish tile kt - 1
  // after issuing tile kt, would wait for a slot the consumers hold (test_attention_ring_protocol.py).
  static_assert(!P2 || (STAGES >= 4 && !LOCK && !SKIPDEAD), "the P2 form: four slots or more");
  static_assert(!LATE || !LOCK, "the LATE form is a form of the warp-specialised loop");
  static_assert(BN == 64 || CWG == 2 || RELW_SMEM, "128-key tiles at three warpgroups need rel_w out of the registers");
  static_assert(!Q_SMEM || BN == 128 || BN == 64, "wgmma.cuh has the m64n64k16 / m64n128k16 SS shapes");
  static constexpr int q_cm_elems = Q_SMEM ? BM * HD : 0;  // Q in the core-matrix layout (Q_SMEM)
};

// [Q staging | rel_w, rel_h buffers (aliased)] [Q, core-matrix layout (Q_SMEM)] [K/V ring]
// [mbarriers: full[STAGES], empty[STAGES]]
template <class C>
__host__ __device__ inline size_t wg_region_a(int relH) {
  const size_t q = static_cast<size_t>(C::BM) * C::LDS * sizeof(bf16);
  const size_t b = (static_cast<size_t>(C::RELW / 2) * C::SW + static_cast<size_t>(relH) * C::SH) * sizeof(float);
  return ((q > b ? q : b) + 127) / 128 * 128;
}
template <class C>
size_t wg_smem_bytes(int relH) {
  return wg_region_a<C>(relH) + static_cast<size_t>(C::q_cm_elems + C::kv_elems) * sizeof(bf16) +
         2 * C::STAGES * sizeof(uint64_t);
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
// The same for the first n consumer threads (a multiple of 32).
__device__ __forceinline__ void consumer_sync_n(int n) { asm volatile("bar.sync 1, %0;\n" ::"r"(n) : "memory"); }

#endif


// d[64 x N] += a * b with N = 64 (S, or O for head_dim 64), 80 (O for head_dim 80) or 128 (S);
// d = a * b instead where accumulate is 0 (S only: N = 64 or 128).
template <int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc, bool trans_b,
                                       int accumulate = 1) {
#if VITRT_WGMMA_ENABLED
  if constexpr (N == 64) {
    if (trans_b) wgmma::wgmma_m64n64k16_rs<1>(d, a, desc);
    else if (accumulate) wgmma::wgmma_m64n64k16_rs<0>(d, a, desc);
    else wgmma::wgmma_m64n64k16_rs_sd<0>(d, a, desc, 0);
  } else if constexpr (N == 128) {
    (void)trans_b;  // S only (K-major)
    if (accumulate) wgmma::wgmma_m64n128k16_rs<0>(d, a, desc);
    else wgmma::wgmma_m64n128k16_rs_sd<0>(d, a, desc, 0);
  } else {
    if (trans_b) wgmma::wgmma_m64n80k16_rs<1>(d, a, desc);
    else wgmma::wgmma_m64n80k16_rs<0>(d, a, desc);
  }
#else
  (void)d, (void)a, (void)desc, (void)trans_b, (void)accumulate;
#endif
}

template <int HD, int BN_, bool LOCK, int CWG, bool SKIPDEAD, int EMU, int PM>
__global__ void __launch_bounds__(WgCfg<HD, BN_, LOCK, CWG, SKIPDEAD, EMU, PM>::THREADS, 1)
    flash_wgmma_relpos_kernel(const KParams p) {
#if VITRT_WGMMA_ENABLED
  using C = WgCfg<HD, BN_, LOCK, CWG, SKIPDEAD, EMU, PM>;
  constexpr int THREADS = C::THREADS, BM = C::BM, BN = C::BN, CPR = C::CPR, KS = C::KS, NT8 = C::NT8;
  constexpr int LDS = C::LDS, SW = C::SW, SH = C::SH, STAGES = C::STAGES, TE = C::tile_elems;
  constexpr int CONSUMERS = 32 * C::CONSUMER_WARPS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const size_t region_a = wg_region_a<C>(p.relH);
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  float* BWs = reinterpret_cast<float*>(smem_raw);  // aliases Qs once the Q fragments are in registers
  float* BHs = BWs + (C::RELW / 2) * SW;
  bf16* Qcm = reinterpret_cast<bf16*>(smem_raw + region_a);  // (Q_SMEM only)
  bf16* KV = Qcm + C::q_cm_elems;
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

  // Consumer warps that take part in the key loop (SKIPDEAD: those with real query rows).
  const int live_warps = C::SKIPDEAD ? 4 * min(C::CWG, (p.nq - m0 + 63) / 64) : C::CONSUMER_WARPS;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar::init(&full[i], C::PRODUCERS);  // every producer thread, once its copies land
      mbar::init(&empty[i], live_warps);   // one arrival per live consumer warp
    }
  }

  // ---- Q tile -> Qs (rows past nq zero-filled)
  for (int i = tid; i < BM * CPR; i += THREADS) {
    const int r = i / CPR, c = i - r * CPR, t = m0 + r;
    const bool in = t < p.nq;
    cp_async16(Qs + r * LDS + c * 8, in ? qb + (q0 + t) * p.ldq + c * 8 : qb, in ? 16 : 0);
    // Q_SMEM: again in the core-matrix layout of a K-major A operand (K's layout), for Q K^T. The
    // prologue's wait for every copy and its closing barrier publish it; the proxy fence is below.
    if constexpr (C::Q_SMEM)
      cp_async16(Qcm + core_matrix_offset<CPR>(r, c), in ? qb + (q0 + t) * p.ldq + c * 8 : qb, in ? 16 : 0);
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
  if constexpr (C::Q_SMEM) {
    wgmma::fence_proxy_async_smem();  // this thread's (landed) copies of Qcm -> wgmma's reads
    __syncthreads();
  }

  // ---- producers: K / V tiles into the ring, 32 chunks per warp and step.
  if (!LOCK && !consumer) {
    setmaxnreg_dec<C::PRODUCER_REGS>();
    const int pw = warp - C::CONSUMER_WARPS;
    constexpr int STEPS = BN * CPR / 32;  // 32-chunk steps per tile (16 or 20), spread over the warps
    for (int kt = 0; kt < nkt; ++kt) {
      const int slot = kt % STAGES, round = kt / STAGES;
      if (round > 0) mbar::wait(&empty[slot], (round - 1) & 1);
      bf16* Ks = KV + slot * 2 * TE;
      bf16* Vs = Ks + TE;
      const long long r0 = k0 + static_cast<long long>(kt) * BN;
      constexpr int PW = LOCK ? 1 : C::PRODUCERS / 32;  // (the lockstep schedule has no producers)
      static_assert(STEPS % PW == 0, "every producer warp copies the same number of steps");
      // (Q_SMEM's producers have 32 registers: unrolled, the steps' addresses spill)
      constexpr int kUnroll = C::Q_SMEM ? 1 : STEPS / PW;
#pragma unroll kUnroll
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
  if constexpr (!LOCK) setmaxnreg_inc<C::CONSUMER_REGS>();
  if constexpr (C::SKIPDEAD) {
    if (warp >= live_warps) return;  // no real query row (the empty barriers do not count it)
  }

  // ---- consumers
  // This thread's share of rel_w / scale in the score accumulators' layout (tile-independent).
  const float* bw_row = BWs + tq * SW + warp * 32 + g * 4;  // + nt * 4 * SW: n8 tile nt of a key row
  [[maybe_unused]] float bw[C::RELW_SMEM ? 1 : C::NW8 * 4];  // (RELW_SMEM: read by the softmax from bw_row)
  if constexpr (!C::RELW_SMEM) {
#pragma unroll
    for (int nt = 0; nt < C::NW8; ++nt) {
      const float4 w4 = *reinterpret_cast<const float4*>(bw_row + nt * 4 * SW);
      bw[nt * 4 + 0] = w4.x;
      bw[nt * 4 + 1] = w4.y;
      bw[nt * 4 + 2] = w4.z;
      bw[nt * 4 + 3] = w4.w;
    }
  }
  const float* bh_row = BHs + warp * 16 + g * 2;  // + kh * SH: (rel_h row g, row g + 8) * log2e
  static_assert(NT8 % C::NW8 == 0, "a tile is whole key rows");

  float o[HD / 2];
#pragma unroll
  for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
  float mrow0 = -INFINITY, mrow1 = -INFINITY, lrow0 = 0.f, lrow1 = 0.f;
  constexpr uint32_t kChunkBytes = 128, kRowGroupBytes = CPR * 128;
  auto slot_k = [&](int kt) { return KV + (kt % STAGES) * 2 * TE; };
  // Shared-memory descriptors of slot 0's K and V tiles, built once: a tile's step is the base plus
  // a byte offset >> 4 in the address field (bits 0-13; shared addresses < 256 KiB never carry out).
  const uint64_t kdesc0 = wgmma::make_smem_desc(KV, kChunkBytes, kRowGroupBytes);
  const uint64_t vdesc0 = wgmma::make_smem_desc(KV + TE, kRowGroupBytes, kChunkBytes);
  auto slot_desc16 = [&](int kt) { return static_cast<uint64_t>((kt % STAGES) * (2 * TE * 2 / 16)); };

  // S = rel_w / scale + Q K^T for tile kt, issued asynchronously (one wgmma group). Called with no
  // wgmma in flight: the MOVs that seed S define a wgmma input, which must not happen while other
  // wgmmas run (ptxas would serialise every wgmma of the kernel).
  // P2: S = Q K^T from zero (the first k16 step does not accumulate) and rel_w added by the softmax:
  // no MOVs define S before its wgmma, so nothing ties the issue of Q K^T to the retirement of the
  // P V in flight.
  auto issue_qk = [&](float(&sc)[NT8 * 4], int kt) {
    if constexpr (!LOCK) mbar::wait(&full[kt % STAGES], (kt / STAGES) & 1);  // fenced by the producers
    if constexpr (!C::ZERO_S) {
#pragma unroll
      for (int i = 0; i < NT8 * 4; ++i) sc[i] = bw[i % (C::NW8 * 4)];  // every key row of the tile
    }
    wgmma::fence_operands(sc);  // (P2: the last tile's reads of S stay before this issue)
    wgmma::fence();
    const uint64_t d = kdesc0 + slot_desc16(kt);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
#if VITRT_WGMMA_ENABLED
      if constexpr (C::Q_SMEM) {
        // This warpgroup's 64 rows of Qcm, K-major as K (made here, not held: held, ptxas spilled it).
        const uint64_t qdesc =
            wgmma::make_smem_desc(Qcm + core_matrix_offset<CPR>(64 * (warp / 4), 0), kChunkBytes, kRowGroupBytes);
        if constexpr (BN == 128)
          wgmma::wgmma_m64n128k16_ss_sd(sc, qdesc + ks * (2 * 64 * 2 / 16), d + ks * (2 * 64 * 2 / 16), ks == 0 ? 0 : 1);
        else
          wgmma::wgmma_m64n64k16_ss_sd(sc, qdesc + ks * (2 * 64 * 2 / 16), d + ks * (2 * 64 * 2 / 16), ks == 0 ? 0 : 1);
        continue;
      }
#endif
      mma_rs<BN>(sc, qf[0][ks], d + ks * (2 * 64 * 2 / 16), false, C::ZERO_S && ks == 0 ? 0 : 1);
    }
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
  // S already holds rel_w / scale (seeded), and rel_h is constant along a key row, so a key row's
  // maximum is max(s) * scale + rel_h: the scale, the bias and the subtraction of m fold into one
  // FFMA per score. The reference maximum m only moves when the row maximum exceeds it by more
  // than kSlack (FlashAttention-4's lazy rescaling): the result is the same quantity, p stays
  // below 2^kSlack, and most tiles then skip O's rescaling (see rescale_if_needed).
  constexpr float kSlack = 8.f;
  auto softmax = [&](float(&sc)[NT8 * 4], int kt) {
    if constexpr (C::P2) {
#pragma unroll
      for (int i = 0; i < NT8 * 4; ++i) sc[i] += bw[i % (C::NW8 * 4)];  // rel_w / scale (see issue_qk)
    } else if constexpr (C::RELW_SMEM) {
      // The same terms from shared memory: one float4 per n8 tile of a key row, added to that tile
      // of every key row of the tile (4 registers live, not 32).
#pragma unroll
      for (int nt = 0; nt < C::NW8; ++nt) {
        const float4 w4 = *reinterpret_cast<const float4*>(bw_row + nt * 4 * SW);
#pragma unroll
        for (int j = 0; j < C::KH; ++j) {
          float* t = sc + (j * C::NW8 + nt) * 4;
          t[0] += w4.x;
          t[1] += w4.y;
          t[2] += w4.z;
          t[3] += w4.w;
        }
      }
    }
    float2 bhk[C::KH];  // rel_h of the tile's key rows kh = kt * KH + j
#pragma unroll
    for (int j = 0; j < C::KH; ++j) bhk[j] = *reinterpret_cast<const float2*>(bh_row + (kt * C::KH + j) * SH);
    constexpr int RW = C::NW8;  // n8 tiles per key row
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < C::KH; ++j) {
      float t0[RW], t1[RW];  // row maxima as trees (log2(RW) + 1 dependent steps, not 2 * RW)
#pragma unroll
      for (int n = 0; n < RW; ++n) {
        t0[n] = fmaxf(sc[(j * RW + n) * 4 + 0], sc[(j * RW + n) * 4 + 1]);
        t1[n] = fmaxf(sc[(j * RW + n) * 4 + 2], sc[(j * RW + n) * 4 + 3]);
      }
      mx0 = fmaxf(mx0, fmaf(tree_reduce<RW>(t0, [](float a, float b) { return fmaxf(a, b); }), p.scale_log2, bhk[j].x));
      mx1 = fmaxf(mx1, fmaf(tree_reduce<RW>(t1, [](float a, float b) { return fmaxf(a, b); }), p.scale_log2, bhk[j].y));
    }
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    // -inf + kSlack = -inf: the first tile always sets m.
    const float mn0 = mx0 > mrow0 + kSlack ? mx0 : mrow0, mn1 = mx1 > mrow1 + kSlack ? mx1 : mrow1;
    al0 = ex2(mrow0 - mn0);  // ex2(-inf) = 0 on the first tile, ex2(0) = 1 when m stays
    al1 = ex2(mrow1 - mn1);
    mrow0 = mn0;
    mrow1 = mn1;
    float t0[NT8], t1[NT8];
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      const float c0 = bhk[nt / RW].x - mn0, c1 = bhk[nt / RW].y - mn1;
      // (known at compile time once unrolled: EMU of each key row's RW n8 tiles, evenly spaced)
      const bool emu = ((nt % RW) + 1) * C::EMU / RW != (nt % RW) * C::EMU / RW;
      auto e2 = [emu](float x) { return emu ? ex2_fma(x) : ex2(x); };
      sc[nt * 4 + 0] = e2(fmaf(sc[nt * 4 + 0], p.scale_log2, c0));
      sc[nt * 4 + 1] = e2(fmaf(sc[nt * 4 + 1], p.scale_log2, c0));
      sc[nt * 4 + 2] = e2(fmaf(sc[nt * 4 + 2], p.scale_log2, c1));
      sc[nt * 4 + 3] = e2(fmaf(sc[nt * 4 + 3], p.scale_log2, c1));
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
  // LATE and P2: the wait for the P V in flight, then that, in the two arms of a branch whose condition also
  // reads the row sums (never negative, so the result is the same; NaN passes too), which exist only
  // once the exps are done. In one basic block with the exps, ptxas hoists the wait to right after
  // the row maxima (seen in the SASS), so that P V would overlap the maxima only.
  auto wait_pv_and_rescale = [&]() {
    if (__any_sync(0xffffffffu, (al0 != 1.f || al1 != 1.f) && !(lrow0 < 0.f) && !(lrow1 < 0.f))) {
      wgmma::wait<0>();
      wgmma::fence_operands(o);
      rescale_rows<HD>(o, al0, al1);
    } else {
      wgmma::wait<0>();
      wgmma::fence_operands(o);
    }
  };

  float sc[NT8 * 4];
  unsigned pa[C::PK][4];
  if constexpr (LOCK) {
    // Every thread loads its share of each K / V tile (same lane mapping as the producers); the
    // CTA barrier of tile kt also tells that every warpgroup is done with tile kt - 1, whose slot
    // is refilled right after it.
    auto issue_kv = [&](int kt) {
      bf16* Ks = slot_k(kt);
      const long long r0 = k0 + static_cast<long long>(kt) * BN;
      for (int i = tid; i < BN * CPR; i += THREADS) copy_kv_chunk<C>(i >> 5, i & 31, Ks, Ks + TE, kb, vb, r0, p);
    };
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < nkt) issue_kv(st);
      cp_async_commit();
    }
    for (int kt = 0; kt < nkt; ++kt) {
      cp_async_wait<STAGES - 2>();      // this thread's copies of tile kt have landed
      wgmma::fence_proxy_async_smem();  // ... and are visible to wgmma
      __syncthreads();                  // everyone's; and every warpgroup is done with tile kt - 1
      if (kt + STAGES - 1 < nkt) issue_kv(kt + STAGES - 1);
      cp_async_commit();
      issue_qk(sc, kt);
      wgmma::wait<0>();
      wgmma::fence_operands(sc);
      softmax(sc, kt);
      rescale_if_needed();
      to_p(sc, pa);
      issue_pv(pa, kt);
      wgmma::wait<0>();
      wgmma::fence_operands(o);
    }
  } else if constexpr (C::P2) {
    // The same order with P double-buffered. With one P buffer, P of tile kt is written into the
    // registers that the P V of tile kt - 1 in flight reads, and ptxas, which interleaves those
    // writes (F2FP) with the exps, puts the wait for P V before the first of them, i.e. before the
    // exps (seen in the SASS of the single-buffer loop: the wait right after the first row
    // maximum): P V then overlaps only the row maxima. With two buffers, tile kt's P goes into the
    // other one, so nothing before the wait needs P V to have retired.
    unsigned pb[C::PK][4];
    auto step = [&](int kt, unsigned(&p_prev)[C::PK][4], unsigned(&p_cur)[C::PK][4]) {
      issue_qk(sc, kt);
      issue_pv(p_prev, kt - 1);
      if (kt >= 2) release(kt - 2);  // (its P V retired at the previous step's wait)
      wgmma::wait<1>();  // Q K^T of tile kt (P V of tile kt - 1 may still run)
      wgmma::fence_operands(sc);
      softmax(sc, kt);
      to_p(sc, p_cur);
      pin(lrow0, lrow1, al0, al1);
      wait_pv_and_rescale();  // O *= the factors of tile kt's maxima, before P V of tile kt
      wgmma::fence_operands(p_prev);
    };
    // (An even number of key tiles, which wgmma_relpos_plan checks: the steps go in pairs, one per
    // buffer, with no branch between them; a tail step after the loop made ptxas serialise.)
    issue_qk(sc, 0);
    wgmma::wait<0>();
    wgmma::fence_operands(sc);
    softmax(sc, 0);
    to_p(sc, pb);  // (O is still zero: no rescaling)
    step(1, pb, pa);
    for (int kt = 2; kt < nkt; kt += 2) {
      step(kt, pa, pb);
      step(kt + 1, pb, pa);
    }
    issue_pv(pa, nkt - 1);
    wgmma::wait<0>();
    wgmma::fence_operands(o);  // (the last two slots are not released: every tile has been loaded)
  } else {
    // FlashAttention-3's intra-warpgroup order: Q K^T of tile kt and P V of tile kt - 1 are issued
    // back to back; the softmax of tile kt runs while P V is on the tensor cores. O is rescaled
    // for tile kt after P V of tile kt - 1 has retired (nothing in flight), before P V of tile kt.
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
      if constexpr (C::LATE) {
        // (the wait for P V after the exps: see wait_pv_and_rescale; SASS of the default form:
        // ptxas puts it right after the row maxima, so P V overlaps those only)
        wait_pv_and_rescale();
        wgmma::fence_operands(pa);
        release(kt - 1);
        to_p(sc, pa);
      } else {
        wgmma::wait<0>();
        wgmma::fence_operands(o);
        wgmma::fence_operands(pa);  // P of tile kt - 1 stays live (its registers reserved) until here
        release(kt - 1);
        to_p(sc, pa);
        rescale_if_needed();
      }
    }
    issue_pv(pa, nkt - 1);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
  }

  // ---- epilogue: normalise, stage each warp's 16 rows in the (now free) K/V ring, 16-byte stores.
  // Every (live) consumer warpgroup is done with the ring (the producers are idle).
  if constexpr (C::SKIPDEAD) consumer_sync_n(32 * live_warps);
  else consumer_sync<CONSUMERS>();
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
  using C = WgCfg<HD, BN_, LOCK, CWG, SKIPDEAD, EMU, PM>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::CPR > 0 && C::KS > 0 && C::NT8 > 0 && C::PK > 0 && C::KH > 0 && C::NW8 > 0 && C::EMU >= 0 &&
                    C::NRG > 0 && C::SW > 0 && C::SH > 0 && C::q_cm_elems >= 0 && (C::ZERO_S || !C::ZERO_S),
                "");
  (void)p;
  __trap();  // never launched: wgmma_relpos_plan only accepts sm_90 devices
#endif
}

template <int HD, int BN, bool LOCK, int CWG = 2, bool SKIPDEAD = false, int EMU = 0, int PM = 0>
void launch(const KParams& p, int blocks, size_t smem, cudaStream_t stream) {
  static std::atomic<int> configured{0};
  ensure_smem(flash_wgmma_relpos_kernel<HD, BN, LOCK, CWG, SKIPDEAD, EMU, PM>, smem, configured, "bf16 wgmma");
  flash_wgmma_relpos_kernel<HD, BN, LOCK, CWG, SKIPDEAD, EMU, PM>
      <<<blocks, WgCfg<HD, BN, LOCK, CWG, SKIPDEAD, EMU, PM>::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_wgmma_relpos_kernel launch");
}

// The variant, from VITRT_ATTN_WGMMA (read once per process; for A/B runs on the GPU machine):
// unset -> the warp-specialised kernel with 64-key tiles and three consumer warpgroups at head dim
// 64, two at 80 (the measured default: vit_b bs32 global attention 22.25 vs 26.06 ms with two,
// BENCHMARKS.md 2026-12-03 18:44 session, call 5); "0" -> off (the mma.sync kernel runs); "wg2" ->
// two consumer warpgroups at head dim 64 too; "bn128" -> 128-key tiles, two key rows (half the
// per-tile waits, reductions and O rescaling per key, twice the score registers); "lockstep" ->
// the first, lockstep schedule; "skipdead" -> the default with WgCfg::SKIPDEAD (vit_b 454.1 vs 452.2
// img/s, vit_h 89.1 vs 89.5: noise; 2026-12-04 call 1); "emu1" / "emu2" / "emu3" -> the default with 1, 2
// or 3 of every 8 n8 score tiles' exps on the FMA pipe (ex2_fma); "lw" -> the default with the
// wait for P V in a branch after the exps (WgCfg::LATE: the SASS of the default loop waits for P V
// right after the row maxima, so P V overlaps only them; LATE's waits come after the exps, at the
// same 152 registers); "p2" -> that, with P double-buffered besides, S from zero and rel_w added by
// the softmax, slots released two tiles late (WgCfg::P2, 160 registers; ptxas then also starts the
// next Q K^T during the exps). Both written on 2026-12-05 without a GPU: compiled without spills or
// wgmma serialisation, P2's ring protocol modelled, not run yet. "bn128lw" / "bn128p2" -> the same two
// loops with 128-key tiles and two consumer warpgroups (224 registers): the measured bn128 form
// has the same early wait (its SASS: the wait for P V right after the wait for S, before the 66
// exps), so its measurement (slower than 64-key tiles) did not test the wider tile with P V
// overlapping the softmax; these do, with half the per-key row reductions, waits and barrier
// traffic. bn128p2 needs four slots (head dim 64) and an even number of tiles (grid rows a multiple
// of 4), else the default runs; 16 bytes of spills outside the key loop. Written 2026-12-05 (second
// session without a GPU), not run yet. "bn128wg3" -> 128-key tiles with three consumer warpgroups
// (head dim 64; WgCfg PM = 3): the LATE loop with S from zero, rel_w added from shared memory and Q
// K^T reading Q from shared memory (m64n128k16 SS), so that S, P and O fit 160 registers; three ring
// slots (219 KB of shared memory in all). SASS: `T Gq4 Gv8 W1 e66 W02 p11 A p21`, 521 instructions per
// warp and 128-key tile (the default: 293 per 64); 8 bytes of spills (one 64-bit reload per tile).
// Same session, not run yet. "wg3s" -> the same form (PM = 3) with 64-key tiles: three consumer
// warpgroups at head dim 80 too, whose O accumulators (40) kept it at two (SASS: `T Gq5 Gv4 W1 e34 W02
// p9 A p7`, 320 instructions per warp and tile, no spills at 160 registers; 212 KB of shared memory).
// Same session, not run yet. Anything else is the default. Measured and taken out (BENCHMARKS.md,
// 2026-12-03 22:30 session): three consumer warpgroups at head dim 80 too, rel_w read from shared
// memory every tile (vit_h 91.5 vs 92.0 img/s); the row sums of P from P V with a block of ones
// appended to V (m64n72 / n88: 26 fewer instructions per tile, but vit_b's global attention 23.05
// vs 21.49 ms, vit_h's 45.04 vs 44.27); the rel_w seeds loaded from shared memory into S instead of
// copied from registers (25.13 vs 21.49 ms, vit_h 55.23 vs 44.27). And (2026-12-04, calls 2 and 3;
// the kernel alone at vit_b / vit_h shapes): the consumer warpgroups issuing their wgmmas in turn,
// a token passed round named barriers (FlashAttention-3's scheduler barriers): 4.859 vs 4.719 ms,
// 4.372 vs 4.289; the tiles after the first without row maxima (the exps against the reference
// maximum as it stood, a warp recomputing S with mma.sync when a row sum left 2^64; 35 fewer
// instructions and 2 fewer MUFU per warp and tile): 5.214 vs 4.724 ms, 4.582 vs 4.251.
WgmmaVariant variant_from_env() {
  static const WgmmaVariant v = env_choice<WgmmaVariant>(
      "VITRT_ATTN_WGMMA",
      {{"0", WgmmaVariant::Off}, {"wg2", WgmmaVariant::Keys64}, {"bn128", WgmmaVariant::Keys128},
       {"lockstep", WgmmaVariant::Lockstep}, {"skipdead", WgmmaVariant::SkipDead}, {"emu1", WgmmaVariant::Emu1},
       {"emu2", WgmmaVariant::Emu2}, {"emu3", WgmmaVariant::Emu3}, {"p2", WgmmaVariant::PBuf2},
       {"lw", WgmmaVariant::LateWait}, {"bn128lw", WgmmaVariant::Keys128Late}, {"bn128p2", WgmmaVariant::Keys128P2},
       {"bn128wg3", WgmmaVariant::Keys128Wg3}, {"wg3s", WgmmaVariant::Keys64Wg3Smem}},
      WgmmaVariant::Keys64Wg3);
  return v;
}

template <int HD>
WgmmaPlan plan_for(WgmmaVariant v, int relH) {
  WgmmaPlan pl;
  pl.variant = v;
  switch (v) {
    case WgmmaVariant::Keys64: pl.smem = wg_smem_bytes<WgCfg<HD, 64>>(relH), pl.bm = WgCfg<HD, 64>::BM; break;
    case WgmmaVariant::Keys128:
    case WgmmaVariant::Keys128Late:
    case WgmmaVariant::Keys128P2:  // (PM changes no size; P2's four slots exist at head dim 64 only)
      pl.smem = wg_smem_bytes<WgCfg<HD, 128>>(relH), pl.bm = WgCfg<HD, 128>::BM;
      break;
    case WgmmaVariant::Keys64Wg3Smem:
      pl.smem = wg_smem_bytes<WgCfg<HD, 64, false, 3, false, 0, 3>>(relH), pl.bm = WgCfg<HD, 64, false, 3, false, 0, 3>::BM;
      break;
    case WgmmaVariant::Keys128Wg3:  // (head dim 64 only: wgmma_relpos_plan falls back to the default at 80)
      if constexpr (HD != 64) return plan_for<HD>(WgmmaVariant::Keys64Wg3, relH);
      else pl.smem = wg_smem_bytes<WgCfg<HD, 128, false, 3, false, 0, 3>>(relH), pl.bm = WgCfg<HD, 128, false, 3, false, 0, 3>::BM;
      break;
    case WgmmaVariant::Lockstep:
      pl.smem = wg_smem_bytes<WgCfg<HD, 64, true>>(relH), pl.bm = WgCfg<HD, 64, true>::BM;
      break;
    case WgmmaVariant::Keys64Wg3:
      if constexpr (HD != 64) return plan_for<HD>(WgmmaVariant::Keys64, relH);  // two warpgroups at head dim 80
      else pl.smem = wg_smem_bytes<WgCfg<HD, 64, false, 3>>(relH), pl.bm = WgCfg<HD, 64, false, 3>::BM;
      break;
    case WgmmaVariant::SkipDead:
    case WgmmaVariant::PBuf2:
    case WgmmaVariant::LateWait:
    case WgmmaVariant::Emu1:
    case WgmmaVariant::Emu2:
    case WgmmaVariant::Emu3: {
      using C = WgCfg<HD, 64, false, HD == 64 ? 3 : 2>;  // (SKIPDEAD, EMU and PM change no size)
      pl.smem = wg_smem_bytes<C>(relH), pl.bm = C::BM;
      break;
    }
    case WgmmaVariant::Off: break;
  }
  return pl;
}

template <int HD>
void launch_variant(const WgmmaPlan& pl, const KParams& p, int blocks, cudaStream_t stream) {
  switch (pl.variant) {
    case WgmmaVariant::Keys64: launch<HD, 64, false>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys128: launch<HD, 128, false>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Lockstep: launch<HD, 64, true>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys64Wg3:
      if constexpr (HD == 64) launch<HD, 64, false, 3>(p, blocks, pl.smem, stream);
      else throw Error("wgmma attention: the three-warpgroup plan is for head dim 64");  // (plan_for never makes it)
      break;
    case WgmmaVariant::SkipDead: launch<HD, 64, false, HD == 64 ? 3 : 2, true>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Emu1: launch<HD, 64, false, HD == 64 ? 3 : 2, false, 1>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Emu2: launch<HD, 64, false, HD == 64 ? 3 : 2, false, 2>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Emu3: launch<HD, 64, false, HD == 64 ? 3 : 2, false, 3>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::PBuf2: launch<HD, 64, false, HD == 64 ? 3 : 2, false, 0, 2>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::LateWait: launch<HD, 64, false, HD == 64 ? 3 : 2, false, 0, 1>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys128Late: launch<HD, 128, false, 2, false, 0, 1>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys128P2:
      if constexpr (WgCfg<HD, 128>::STAGES >= 4) launch<HD, 128, false, 2, false, 0, 2>(p, blocks, pl.smem, stream);
      else throw Error("wgmma attention: the 128-key P2 plan needs four ring slots");  // (the plan falls back first)
      break;
    case WgmmaVariant::Keys64Wg3Smem: launch<HD, 64, false, 3, false, 0, 3>(p, blocks, pl.smem, stream); break;
    case WgmmaVariant::Keys128Wg3:
      if constexpr (HD == 64) launch<HD, 128, false, 3, false, 0, 3>(p, blocks, pl.smem, stream);
      else throw Error("wgmma attention: the three-warpgroup 128-key plan is for head dim 64");  // (as above)
      break;
    case WgmmaVariant::Off: throw Error("wgmma attention: launched without a plan");
  }
}

}  // namespace

bool wgmma_off_by_env() { return variant_from_env() == WgmmaVariant::Off; }

WgmmaPlan wgmma_relpos_plan(const KParams& p, int optin_smem_limit) {
  WgmmaVariant v = variant_from_env();
  if (v == WgmmaVariant::Off || !device_is_sm90()) return {};
  // (P2 runs key tiles in pairs; with 128-key tiles it needs four ring slots, which head dim 80 has not)
  if (v == WgmmaVariant::PBuf2 && p.relH % 2 != 0) v = WgmmaVariant::Keys64Wg3;
  if (v == WgmmaVariant::Keys128P2 && (p.relH % 4 != 0 || p.hd != 64)) v = WgmmaVariant::Keys64Wg3;
  if (v == WgmmaVariant::Keys128Wg3 && p.hd != 64) v = WgmmaVariant::Keys64Wg3;
  if (p.ws != 0 || p.q_share != 1 || (p.hd != 64 && p.hd != 80)) return {};
  if (p.th == nullptr || p.relW != 64 || p.relH < 1 || p.nq != p.relH * p.relW || p.nk != p.nq) return {};
  const bool keys128 = v == WgmmaVariant::Keys128 || v == WgmmaVariant::Keys128Late || v == WgmmaVariant::Keys128P2 ||
                       v == WgmmaVariant::Keys128Wg3;
  if (p.nk % (keys128 ? 128 : 64) != 0 || (p.th_lo == nullptr) != (p.tw_lo == nullptr)) return {};
  const WgmmaPlan pl = p.hd == 64 ? plan_for<64>(v, p.relH) : plan_for<80>(v, p.relH);
  return pl.smem <= static_cast<size_t>(optin_smem_limit) ? pl : WgmmaPlan{};
}

void wgmma_relpos_launch(const WgmmaPlan& plan, const KParams& p, int blocks, cudaStream_t stream) {
  if (p.hd == 64) launch_variant<64>(plan, p, blocks, stream);
  else launch_variant<80>(plan, p, blocks, stream);
}

}  // namespace vitrt::cuda::attn
