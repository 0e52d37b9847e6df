// Hopper attention for short dense sequences without rel-pos: the ViT classifier's self-attention
// (197 tokens at patch 16 and 224 px, 257 at patch 14), head_dim 64 or 80, BF16.
//
// The mma.sync kernel (attention.cu) ran these at ~128 TFLOP/s, about a third of the rate the
// Hopper kernels reach. The shape is the windowed kernel's (attention_wgmma_windowed.cu) without
// the rel-pos terms, so the structure is its own:
//  - one CTA (one warpgroup) per (sequence, head): the sequence's keys and values are loaded once
//    into shared memory (cp.async, the no-swizzle core-matrix layout: K the K-major B operand of
//    Q K^T, V the MN-major one of P V), then the warpgroup runs the query rows in m-tiles of 64,
//    each tile's Q fragments loaded from global memory straight into registers (the next tile's
//    while this tile's last key chunk is on the tensor cores);
//  - the keys in NF chunks of 64 and, when the count is not a multiple of 64, a last chunk of 16
//    whose slots past the sequence are zero in shared memory and -inf in S (seeded);
//  - an online softmax over the chunks with the global kernel's lazy rescaling (the reference
//    maximum moves only when a chunk's row maximum exceeds it by more than 2^8); how much of the
//    next chunk's Q K^T and the previous chunk's P V overlaps a chunk's softmax inside the
//    warpgroup is the BUF parameter below: fewer buffers, more CTAs per SM (at head dim 64 four
//    CTAs with no overlap inside each beat two with full overlap);
//  - the first k16 step of each full chunk's Q K^T overwrites S (scale-d = 0): no seeding;
//  - a warp whose 16 query rows are all past the sequence (the last m-tile of 197 rows: 3 of 4
//    warps) skips its softmax and multiplies P = 0. That tile costs ~11% of the kernel (192 query
//    rows: 0.141 against 0.156 ms); splitting it by keys instead (every warp on its 5 rows against a
//    quarter of the keys, combined in shared memory) measured 1-2% slower here and in the windowed
//    kernels, and was taken out (BENCHMARKS.md, 2026-12-05 03:33 session, call 2);
//  - K / V land in one cp.async group before the first m-tile. One group per key chunk, the first
//    m-tile waiting for each chunk only before its Q K^T, measured 2% slower (0.162 against 0.159 ms
//    for ViT-B/16's layer, H100, 2026-12-06; `git show 9ad2364`): the four CTAs per SM hide the load.
// Covered: dense sequences (no window, no q sharing), no rel-pos, nk in {192, 193..208, 256,
// 257..272} (NF = 3 or 4, with or without the 16-key chunk), nq <= 1024; the dispatcher falls back
// to the mma.sync kernel otherwise. VITRT_ATTN_WGMMA_SHORT=0 turns it off (A/B runs); =twop / =onep
// pick other buffering at head dim 64 (see BUF below).
#include <cuda_bf16.h>

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

template <int HD_, int NF_, int TAIL_>
struct ShortCfg {
  static constexpr int HD = HD_;
  static constexpr int NF = NF_;      // full chunks of 64 keys
  static constexpr int TAIL = TAIL_;  // 0 or 16: the last chunk's key slots
  static constexpr int NC = NF + (TAIL > 0);
  static constexpr int NKP = NF * 64 + TAIL;  // key slots in shared memory
  static constexpr int CPR = HD / 8;          // 16-byte chunks per row
  static constexpr int KS = HD / 16;          // k16 steps over the head dim
  static constexpr int THREADS = 128;
  static constexpr int kv_elems = NKP * HD;
  static_assert(HD == 64 || HD == 80, "wgmma.cuh has the n64 / n80 shapes for O");
  static_assert(TAIL == 0 || TAIL == 16, "the last chunk is n16 (wgmma_m64n16k16_rs)");
};

// K and V of nkp key slots.
constexpr size_t short_smem_bytes(int nkp, int hd) { return static_cast<size_t>(2 * nkp * hd) * sizeof(bf16); }

#if VITRT_WGMMA_ENABLED
// Row maxima (log2 domain: max(s) * scale_log2) of an S chunk of N8 n8 tiles, over the quad.
template <int N8>
__device__ __forceinline__ void chunk_rowmax(const float* s, float sl2, float& x0, float& x1) {
  float t0[N8], t1[N8];
#pragma unroll
  for (int n = 0; n < N8; ++n) {
    t0[n] = fmaxf(s[4 * n + 0], s[4 * n + 1]);
    t1[n] = fmaxf(s[4 * n + 2], s[4 * n + 3]);
  }
  x0 = quad_max(tree_reduce<N8>(t0, [](float a, float b) { return fmaxf(a, b); })) * sl2;
  x1 = quad_max(tree_reduce<N8>(t1, [](float a, float b) { return fmaxf(a, b); })) * sl2;
}
// p = 2^(s * scale_log2 - m), packed as bf16 A fragments (two n8 tiles per k16 step); returns this
// thread's partial row sums.
template <int N8>
__device__ __forceinline__ void chunk_exp(const float* s, float sl2, float m0, float m1, unsigned (*pa)[4], float& l0,
                                          float& l1) {
  float t0[N8], t1[N8];
#pragma unroll
  for (int n = 0; n < N8; ++n) {
    const float p0 = ex2(fmaf(s[4 * n + 0], sl2, -m0)), p1 = ex2(fmaf(s[4 * n + 1], sl2, -m0));
    const float p2 = ex2(fmaf(s[4 * n + 2], sl2, -m1)), p3 = ex2(fmaf(s[4 * n + 3], sl2, -m1));
    t0[n] = p0 + p1;
    t1[n] = p2 + p3;
    pa[n / 2][(n & 1) * 2 + 0] = pack_bf16(p0, p1);
    pa[n / 2][(n & 1) * 2 + 1] = pack_bf16(p2, p3);
  }
  l0 = tree_reduce<N8>(t0, [](float a, float b) { return a + b; });
  l1 = tree_reduce<N8>(t1, [](float a, float b) { return a + b; });
}
template <int HD>
__device__ __forceinline__ void mma_o(float (&o)[HD / 2], const unsigned (&a)[4], uint64_t desc) {
  if constexpr (HD == 64) wgmma::wgmma_m64n64k16_rs<1>(o, a, desc);
  else wgmma::wgmma_m64n80k16_rs<1>(o, a, desc);
}
#endif

// BUF: the S and P buffers per warpgroup, traded against CTAs per SM (registers):
//  2 (TwoP): two S, two P: chunk c + 1's Q K^T and chunk c - 1's P V both overlap chunk c's softmax;
//  1 (OneP): two S, one P: P V of chunk c - 1 is waited for before chunk c's softmax (158
//    registers: three CTAs per SM at head dim 64);
//  0 (OneS): one S, one P: nothing overlaps a softmax inside the warpgroup; four CTAs per SM at
//    head dim 64 (123-128 registers) overlap each other's instead. The default at head dim 64:
//    ViT-B/16's layer (bs256) takes 0.154 ms against 0.172 (OneP), 0.204 (TwoP) and 0.206 ms for
//    the mma.sync kernel (BENCHMARKS.md, 2026-12-04 12:08 session). Head dim 80 runs TwoP: its
//    272-key K / V (87 KB) leave room for two CTAs per SM only, and there TwoP is 1.39x mma.sync.
template <int BUF, int HD>
constexpr int short_ctas_per_sm() {
  return HD == 64 ? (BUF == 2 ? 2 : BUF == 1 ? 3 : 4) : 2;
}
template <int HD, int NF, int TAIL, int BUF>
__global__ void __launch_bounds__(128, short_ctas_per_sm<BUF, HD>()) flash_wgmma_short_kernel(const KParams p) {
#if VITRT_WGMMA_ENABLED
  using C = ShortCfg<HD, NF, TAIL>;
  constexpr int CPR = C::CPR, KS = C::KS, NC = C::NC, NKP = C::NKP;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* Ks = reinterpret_cast<bf16*>(smem_raw);
  bf16* Vs = Ks + C::kv_elems;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int bid = p.blocks_last_first ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int h = bid % p.heads, s = bid / p.heads;  // heads fastest: CTAs share rows in L2
  SeqAddr sa;
  sa.init(p, s);
  const bf16* qb = static_cast<const bf16*>(p.q) + h * HD;
  const bf16* kb = static_cast<const bf16*>(p.k) + h * HD;
  const bf16* vb = static_cast<const bf16*>(p.v) + h * HD;
  bf16* ob = static_cast<bf16*>(p.out) + h * HD;

  // ---- K / V: steps of 16 key slots x 2 chunks (each 8-lane phase writes one 128-byte core
  // matrix; lanes l and l + 8 read one row's 32 contiguous bytes). Slots past nk are zero.
  constexpr int kGroups = NKP / 16;
  for (int st = warp; st < kGroups * (CPR / 2); st += C::THREADS / 32) {
    const int n = (st % kGroups) * 16 + (lane & 7) + ((lane >> 4) << 3);
    const int c = 2 * (st / kGroups) + ((lane >> 3) & 1);
    const bool in = n < p.nk;
    const long long r = sa.k0 + (in ? n : 0);
    const int off = core_matrix_offset<CPR>(n, c);
    cp_async16(Ks + off, kb + r * p.ldk + c * 8, in ? 16 : 0);
    cp_async16(Vs + off, vb + r * p.ldv + c * 8, in ? 16 : 0);
  }
  ptx::cp_async_commit();

  // ---- Q fragments of m-tile mt (the m16n8k16 A layout of each warp's 16 rows); rows past nq read
  // row 0 (finite; their output is not written).
  unsigned qf[KS][4];
  auto load_q = [&](int mt) {
    const int i0 = mt * 64 + warp * 16 + g, i1 = i0 + 8;
    load_a_fragments(qf, qb + (sa.qs0 + (i0 < p.nq ? i0 : 0)) * p.ldq + 2 * tq,
                     qb + (sa.qs0 + (i1 < p.nq ? i1 : 0)) * p.ldq + 2 * tq);
  };
  load_q(0);  // in flight while K / V land

  ptx::cp_async_wait<0>();
  wgmma::fence_proxy_async_smem();  // this thread's cp.async writes -> visible to wgmma
  __syncthreads();                  // everyone's

  constexpr uint32_t kChunkBytes = 128, kRowGroupBytes = CPR * 128;
  const uint64_t kdesc = wgmma::make_smem_desc(Ks, kChunkBytes, kRowGroupBytes);
  const uint64_t vdesc = wgmma::make_smem_desc(Vs, kRowGroupBytes, kChunkBytes);
  constexpr uint64_t kStepK = 2 * 128 / 16;         // one k16 step of K (along the head dim)
  constexpr uint64_t kChunkK = 8 * CPR * 128 / 16;  // 64 key rows of K
  constexpr uint64_t kStepV = 2 * CPR * 128 / 16;   // one k16 step of V (16 keys)
  const float sl2 = p.scale_log2;
  constexpr float kSlack = 8.f;

  const int mtiles = (p.nq + 63) / 64;
  for (int mt = 0; mt < mtiles; ++mt) {
    const bool live = mt * 64 + warp * 16 < p.nq;
    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; ++i) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    constexpr int SB = BUF == 0 ? 1 : 2, PB = BUF == 2 ? 2 : 1;
    float sc[SB][32];       // S of the full chunks (alternating when SB = 2)
    float st[8];            // S of the 16-key chunk
    unsigned pa[PB][4][4];  // P of the full chunks (alternating when PB = 2)
    unsigned pt[1][4];     // P of the 16-key chunk

    auto issue_s = [&](auto cc) {
      constexpr int c = decltype(cc)::value;
      if constexpr (c < NF) {
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
          wgmma::wgmma_m64n64k16_rs_sd<0>(sc[c % SB], qf[ks], kdesc + c * kChunkK + ks * kStepK, ks > 0);
      } else {
        // Seeds: 0 for a real key, -inf past nk (n8 tile j, columns 2 tq + {0, 1}).
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float v = NF * 64 + j * 8 + 2 * tq + e < p.nk ? 0.f : -INFINITY;
            st[4 * j + e] = v;
            st[4 * j + 2 + e] = v;
          }
        wgmma::fence_operands(st);
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) wgmma::wgmma_m64n16k16_rs<0>(st, qf[ks], kdesc + NF * kChunkK + ks * kStepK);
      }
      wgmma::commit();
    };

    // Commit order (SB = 2): S0, S1, PV0, S2, PV1, ...: waiting for S_c leaves PV_{c-1} and S_{c+1}
    // pending. (SB = 1: S0, PV0, S1, PV1, ...: S_c is issued in step c and waited for with PV_{c-1}.)
    auto step = [&](auto cc) {
      constexpr int c = decltype(cc)::value;
      constexpr bool next = c + 1 < NC;
      if constexpr (SB == 2 && next) issue_s(std::integral_constant<int, c + 1>{});
      if constexpr (SB == 1 && c > 0) issue_s(std::integral_constant<int, c>{});
      // (PB = 1: P V of chunk c - 1 too, so that this softmax may overwrite its P.)
      if constexpr (SB == 1) wgmma::wait<0>();
      else wgmma::wait<(c > 0 && PB == 2 ? 1 : 0) + (next ? 1 : 0)>();
      if constexpr (PB == 1 && c > 0) {
        wgmma::fence_operands(o);
        wgmma::fence_operands(pa[0]);
      }
      constexpr bool full = c < NF;
      float* s = full ? sc[c % SB] : st;
      if constexpr (full) wgmma::fence_operands(sc[c % SB]);
      else wgmma::fence_operands(st);
      if constexpr (!next) {  // every Q K^T of this m-tile is done: the next tile's Q can load
        wgmma::fence_operands(qf);
        if (mt + 1 < mtiles) load_q(mt + 1);
      }
      unsigned(*pc)[4] = full ? pa[c % PB] : pt;
      float al0 = 1.f, al1 = 1.f;
      if (live) {
        float x0, x1, s0, s1;
        if constexpr (full) chunk_rowmax<8>(s, sl2, x0, x1);
        else chunk_rowmax<2>(s, sl2, x0, x1);
        // -inf + kSlack = -inf: the first chunk always sets m.
        const float n0 = x0 > m0 + kSlack ? x0 : m0, n1 = x1 > m1 + kSlack ? x1 : m1;
        al0 = ex2(m0 - n0);  // 0 on the first chunk (o and l are 0), 1 when m stays
        al1 = ex2(m1 - n1);
        m0 = n0;
        m1 = n1;
        if constexpr (full) chunk_exp<8>(s, sl2, m0, m1, pc, s0, s1);
        else chunk_exp<2>(s, sl2, m0, m1, pc, s0, s1);
        l0 = l0 * al0 + s0;
        l1 = l1 * al1 + s1;
      } else {
        constexpr int R = full ? 4 : 1;
#pragma unroll
        for (int j = 0; j < R; ++j) pc[j][0] = pc[j][1] = pc[j][2] = pc[j][3] = 0u;
      }
      if constexpr (full) wgmma::fence_operands(pa[c % PB]);
      else wgmma::fence_operands(pt);
      pin(l0, l1, al0, al1);
      if constexpr (c > 0) {
        if constexpr (PB == 2) {
          wgmma::wait<next ? 1 : 0>();  // P V of chunk c - 1 (S_{c+1} may still run)
          wgmma::fence_operands(o);
          wgmma::fence_operands(pa[(c - 1) % PB]);
        }
        rescale_rows_if_needed<HD>(o, al0, al1);
      }
      wgmma::fence_operands(o);
      wgmma::fence();
      if constexpr (full) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) mma_o<HD>(o, pa[c % PB][kk], vdesc + (c * 4 + kk) * kStepV);
      } else {
        mma_o<HD>(o, pt[0], vdesc + (NF * 4) * kStepV);
      }
      wgmma::commit();
    };

    issue_s(std::integral_constant<int, 0>{});
    static_for(std::make_integer_sequence<int, NC>{}, step);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
    wgmma::fence_operands(pa[(NC - 1) % PB]);
    wgmma::fence_operands(pt);

    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    // ---- epilogue: normalise, write the real rows. Head dim 64: whole 128-byte lines from registers
    // (output_pass_as_lines, every lane of the warp taking part in the shuffles), 4 rows per store
    // instruction instead of 8 rows of 16 bytes: ViT-B/16 bs256 block 64 1.49x / 1.49x with the pairs
    // and the lines (per round 1.48x / 1.51x), 1.46x / 1.46x with the MLP's pairs (BENCHMARKS.md,
    // 2026-12-05 19:22 session, H100): no loss, possibly a little gain. Head dim 80's rows are not
    // whole lines: 4-byte stores, a quad writing 16 contiguous bytes.
    const int i0 = mt * 64 + warp * 16 + g, i1 = i0 + 8;
    if constexpr (HD == 64) {
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        unsigned a4[4], b4[4];
        output_pass_as_lines(o, pass, 1.f / (pass == 0 ? l0 : l1), lane, a4, b4);
        const int i = mt * 64 + warp * 16 + 8 * pass + 2 * (lane >> 3);  // a4's row; b4's is the next
        bf16* dst = ob + (sa.q0 + i) * p.ldo + 8 * (lane & 7);
        if (i < p.nq) *reinterpret_cast<uint4*>(dst) = make_uint4(a4[0], a4[1], a4[2], a4[3]);
        if (i + 1 < p.nq) *reinterpret_cast<uint4*>(dst + p.ldo) = make_uint4(b4[0], b4[1], b4[2], b4[3]);
      }
      continue;
    }
    if (i0 < p.nq) {
      const float inv = 1.f / l0;
      bf16* dst = ob + (sa.q0 + i0) * p.ldo + 2 * tq;
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
        *reinterpret_cast<unsigned*>(dst + d * 8) = pack_bf16(o[d * 4 + 0] * inv, o[d * 4 + 1] * inv);
    }
    if (i1 < p.nq) {
      const float inv = 1.f / l1;
      bf16* dst = ob + (sa.q0 + i1) * p.ldo + 2 * tq;
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
        *reinterpret_cast<unsigned*>(dst + d * 8) = pack_bf16(o[d * 4 + 2] * inv, o[d * 4 + 3] * inv);
    }
  }
#else
  using C = ShortCfg<HD, NF, TAIL>;  // (referenced so that the sm_80 pass does not warn about unused members)
  static_assert(C::NC > 0 && C::CPR > 0 && C::KS > 0 && C::kv_elems > 0, "");
  (void)p;
  __trap();  // never launched: wgmma_short_smem only accepts sm_90 devices
#endif
}

template <int HD, int NF, int TAIL, int BUF>
void launch(const KParams& p, int blocks, cudaStream_t stream) {
  using C = ShortCfg<HD, NF, TAIL>;
  static std::atomic<int> configured{0};
  constexpr size_t smem = short_smem_bytes(C::NKP, HD);
  ensure_smem(flash_wgmma_short_kernel<HD, NF, TAIL, BUF>, smem, configured, "bf16 wgmma short");
  flash_wgmma_short_kernel<HD, NF, TAIL, BUF><<<blocks, C::THREADS, smem, stream>>>(p);
  check(cudaGetLastError(), "flash_wgmma_short_kernel launch");
}

template <int HD, int BUF>
void launch_hd(const KParams& p, int blocks, cudaStream_t stream) {
  const int nf = p.nk / 64;
  const bool tail = p.nk % 64 != 0;
  if (nf == 3) tail ? launch<HD, 3, 16, BUF>(p, blocks, stream) : launch<HD, 3, 0, BUF>(p, blocks, stream);
  else tail ? launch<HD, 4, 16, BUF>(p, blocks, stream) : launch<HD, 4, 0, BUF>(p, blocks, stream);
}

// VITRT_ATTN_WGMMA_SHORT: "0" turns the kernel off (the mma.sync kernel then runs these); "twop" /
// "onep" / "ones" pick the buffering at head dim 64 (default ones; head dim 80 always runs twop).
// Read once per process.
enum class ShortMode { Off, Default, TwoP, OneP, OneS };
ShortMode mode_from_env() {
  static const ShortMode v = env_choice<ShortMode>(
      "VITRT_ATTN_WGMMA_SHORT",
      {{"0", ShortMode::Off}, {"twop", ShortMode::TwoP}, {"onep", ShortMode::OneP}, {"ones", ShortMode::OneS}},
      ShortMode::Default);
  return v;
}

// VITRT_ATTN_SHORT_ORDER: "reverse" runs the sequences last first, "forward" (or unset) in order, the
// default until measured. Why reverse: the qkv GEMM writes its rows roughly in increasing order, so
// the last sequences' q / k / v are the ones still in L2, and out_proj reads the output's first rows
// first, which a reversed pass writes last. Read once per process.
bool sequences_last_first() {
  static const bool on = env_choice<bool>("VITRT_ATTN_SHORT_ORDER", {{"reverse", true}, {"forward", false}}, false);
  return on;
}

}  // namespace

size_t wgmma_short_smem(const KParams& p, int optin_smem_limit) {
  if (mode_from_env() == ShortMode::Off || wgmma_off_by_env() || !device_is_sm90()) return 0;
  if (p.hd != 64 && p.hd != 80) return 0;
  if (p.th != nullptr || p.ws != 0 || p.q_share != 1) return 0;
  if (p.nq < 1 || p.nq > 1024) return 0;
  const int nf = p.nk / 64, rem = p.nk % 64;
  if ((nf != 3 && nf != 4) || rem > 16) return 0;
  const size_t smem = short_smem_bytes(nf * 64 + (rem > 0 ? 16 : 0), p.hd);
  return smem <= static_cast<size_t>(optin_smem_limit) ? smem : 0;
}

void wgmma_short_launch(const KParams& params, int blocks, cudaStream_t stream) {
  if (blocks <= 0) return;
  KParams p = params;
  p.blocks_last_first = sequences_last_first() ? 1 : 0;
  if (p.hd == 64) {
    switch (mode_from_env()) {
      case ShortMode::TwoP: launch_hd<64, 2>(p, blocks, stream); break;
      case ShortMode::OneP: launch_hd<64, 1>(p, blocks, stream); break;
      default: launch_hd<64, 0>(p, blocks, stream); break;
    }
  } else {
    launch_hd<80, 2>(p, blocks, stream);
  }
}

}  // namespace vitrt::cuda::attn
