#include "ops/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/softmax_row.h"
#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

int64_t g_row_block = 0;

// Query rows handled per task. Enough rows that the two GEMMs per block run near peak (oneDNN
// re-packs K and V for every call, which small blocks would pay too often), few enough that the
// [rows, Nk] score block stays in the core's L2 cache between the GEMM, softmax and P*V.
int64_t choose_row_block(int64_t nq, int64_t nk) {
  if (g_row_block > 0) return std::min(g_row_block, nq);
  int64_t target = (1 << 19) / std::max<int64_t>(nk, 1);  // ~2 MB of scores
  target = std::clamp<int64_t>(target, 16, 256);
  if (nq <= target) return nq;
  // Equal-sized blocks, rounded up to a multiple of 8 rows.
  int64_t nblocks = (nq + target - 1) / target;
  int64_t rows = (nq + nblocks - 1) / nblocks;
  return (rows + 7) / 8 * 8;
}

// Per-thread scratch, grown on demand and kept between calls (no allocation in steady state).
struct Scratch {
  float* p = nullptr;
  size_t n = 0;
  ~Scratch() { std::free(p); }
  float* get(size_t count) {
    if (count > n) {
      std::free(p);
      n = (count + 1023) / 1024 * 1024;
      p = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
      if (!p) throw Error("out of memory for attention scratch");
    }
    return p;
  }
};
thread_local Scratch t_scores;

// Optional decomposed relative-position term for one block of query rows.
struct RelPos {
  const float* table = nullptr;  // [Lh + Lw, hd]: rel_pos_h rows then rel_pos_w rows
  int64_t H = 0, W = 0;          // key grid == query grid
  int64_t Lh() const { return 2 * H - 1; }
  int64_t Lw() const { return 2 * W - 1; }
};

// One block of `rows` query rows of one head:
//   S = scale * Q K^T (+ rel pos), P = exp(S - rowmax), O = (P V) / rowsum(P).
// Q rows start at q (stride ldq), K/V rows at k/v (strides ldk/ldv), output rows at o (stride ldo).
// row0 is the index of the block's first query row (for the rel-pos grid position).
void attend_block(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
                  float* o, int64_t ldo, int64_t rows, int64_t row0, int64_t nk, int64_t hd, float scale,
                  const RelPos* rel) {
  const int64_t lrel = rel ? rel->Lh() + rel->Lw() : 0;
  // Scratch: scores [rows, nk], rel-pos products [rows, lrel], one row's gathered bias terms
  // (bh [H], bw [W], each padded by 16 for full-vector reads), exp_row's scratch [nk + 16],
  // 1/row sums [rows].
  const int64_t nbias = rel ? rel->H + rel->W + 32 + nk + 16 : 0;
  float* S = t_scores.get(static_cast<size_t>(rows) * nk + rows * lrel + nbias + rows + 64);
  float* R = S + rows * nk;
  float* bh = R + rows * lrel;
  float* bw = bh + (rel ? rel->H + 16 : 0);
  float* row_scratch = bw + (rel ? rel->W + 16 : 0);
  float* inv_sum = bh + nbias;

  sgemm(false, true, rows, nk, hd, scale, q, ldq, k, ldk, 0.f, S, nk);
  if (rel) {
    // Every (q row, table row) product in one small GEMM: [rows, hd] x [hd, Lh + Lw]. This does
    // about twice the dot products strictly needed per row (Lh instead of H), but as a GEMM that
    // is cheaper than gathered dot products, and it is ~3% of the QK^T work at 64x64.
    sgemm(false, true, rows, lrel, hd, 1.f, q, ldq, rel->table, hd, 0.f, R, lrel);
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* s = S + i * nk;
    if (rel) {
      const int64_t qi = row0 + i, ih = qi / rel->W, iw = qi % rel->W;
      const float* rh = R + i * lrel;     // rh[t] = q . rel_pos_h[t]
      const float* rwt = rh + rel->Lh();  // rwt[t] = q . rel_pos_w[t]
      // Gather this row's H + W bias terms (table row ih - kh + H - 1, resp. iw - kw + W - 1) so
      // the bias add inside exp_row is a plain broadcast + vector add.
      for (int64_t kh = 0; kh < rel->H; ++kh) bh[kh] = rh[ih - kh + rel->H - 1];
      for (int64_t kw = 0; kw < rel->W; ++kw) bw[kw] = rwt[iw - kw + rel->W - 1];
      inv_sum[i] = 1.f / exp_row(s, nk, bh, bw, rel->H, rel->W, row_scratch);
    } else {
      inv_sum[i] = 1.f / exp_row(s, nk, nullptr, nullptr, 0, 0, nullptr);
    }
  }
  sgemm(false, false, rows, hd, nk, 1.f, S, nk, v, ldv, 0.f, o, ldo);
  // Normalising the [rows, hd] output instead of the [rows, nk] probabilities: hd/nk the work.
  for (int64_t i = 0; i < rows; ++i) {
    float* orow = o + i * ldo;
    const float f = inv_sum[i];
    for (int64_t c = 0; c < hd; ++c) orow[c] *= f;
  }
}

}  // namespace

void set_attention_row_block(int64_t rows) { g_row_block = rows; }

void attention_relpos(const float* qkv, float* out, int64_t B, int64_t H, int64_t W, int64_t heads,
                      int64_t head_dim, const float* rel_pos_h, const float* rel_pos_w) {
  const int64_t N = H * W, C = heads * head_dim, hd = head_dim;
  if (B == 0 || N == 0 || C == 0) return;
  // As segment_anything: head_dim ** -0.5 computed in double, applied to float32 data.
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  std::vector<float> table;
  RelPos rel;
  const bool use_rel = rel_pos_h != nullptr;
  if (use_rel) {
    rel.H = H;
    rel.W = W;
    table.resize((rel.Lh() + rel.Lw()) * hd);
    std::copy(rel_pos_h, rel_pos_h + rel.Lh() * hd, table.begin());
    std::copy(rel_pos_w, rel_pos_w + rel.Lw() * hd, table.begin() + rel.Lh() * hd);
    rel.table = table.data();
  }

  const int64_t rb = choose_row_block(N, N);
  const int64_t nblocks = (N + rb - 1) / rb;
  const int64_t ntasks = B * heads * nblocks;
  const int64_t ld = 3 * C;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < ntasks; ++t) {
    // Task order (b, head, block): a thread's consecutive tasks share one head's K and V.
    const int64_t blk = t % nblocks, h = (t / nblocks) % heads, b = t / (nblocks * heads);
    const int64_t row0 = blk * rb, rows = std::min(rb, N - row0);
    const float* base = qkv + b * N * ld;
    attend_block(base + row0 * ld + h * hd, ld, base + C + h * hd, ld, base + 2 * C + h * hd, ld,
                 out + (b * N + row0) * C + h * hd, C, rows, row0, N, hd, scale, use_rel ? &rel : nullptr);
  }
}

void attention(const float* q, const float* k, const float* v, float* out, int64_t B, int64_t Nq,
               int64_t Nk, int64_t D, int64_t heads) {
  const int64_t hd = D / heads;
  if (B == 0 || Nq == 0 || D == 0) return;
  if (Nk == 0) {  // softmax over nothing: define the result as zeros rather than NaN
    std::fill(out, out + B * Nq * D, 0.f);
    return;
  }
  // torch (segment_anything transformer.Attention): attn / math.sqrt(c_per_head); dividing by a
  // float32 sqrt and multiplying by its reciprocal differ by at most an ulp.
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t rb = choose_row_block(Nq, Nk);
  const int64_t nblocks = (Nq + rb - 1) / rb;
  const int64_t ntasks = B * heads * nblocks;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < ntasks; ++t) {
    const int64_t blk = t % nblocks, h = (t / nblocks) % heads, b = t / (nblocks * heads);
    const int64_t row0 = blk * rb, rows = std::min(rb, Nq - row0);
    attend_block(q + (b * Nq + row0) * D + h * hd, D, k + b * Nk * D + h * hd, D, v + b * Nk * D + h * hd, D,
                 out + (b * Nq + row0) * D + h * hd, D, rows, row0, Nk, hd, scale, nullptr);
  }
}

}  // namespace vitrt::cpu
