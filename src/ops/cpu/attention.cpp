#include "ops/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <vector>

#include "ops/cpu/attention_avx512.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/softmax_row.h"
#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

int64_t g_row_block = 0;

// Per-thread scratch, grown on demand and kept between calls (no allocation in steady state).
struct Scratch {
  float* p = nullptr;
  size_t n = 0;
  ~Scratch() { std::free(p); }
  float* get(size_t count) {
    if (count > n) {
      std::free(p);
      p = nullptr;
      n = 0;
      const size_t want = (count + 1023) / 1024 * 1024;
      p = static_cast<float*>(std::aligned_alloc(64, want * sizeof(float)));
      if (!p) throw Error(detail::concat("out of memory for ", count, " floats of attention scratch"));
      n = want;
    }
    return p;
  }
};
thread_local Scratch t_block;  // scores and per-row temporaries of one block
thread_local Scratch t_head;   // one head's packed K^T and V (AVX-512 path)

// Decomposed relative-position term (key grid == query grid, H x W).
struct RelPos {
  const float* table = nullptr;   // [Lh + Lw, hd]: rel_pos_h rows then rel_pos_w rows
  const float* packed = nullptr;  // the same, packed like K^T (AVX-512 path)
  int64_t H = 0, W = 0;
  int64_t Lh() const { return 2 * H - 1; }
  int64_t Lw() const { return 2 * W - 1; }
  int64_t L() const { return Lh() + Lw(); }
};

// One attention problem: for batch b, head h, query row i the query vector is at
// q + b*q_bs + i*ldq + h*hd (likewise k, v for key rows; o for output rows).
struct Problem {
  int64_t B, heads, nq, nk, hd;
  const float* q;
  int64_t q_bs, ldq;
  const float* k;
  int64_t k_bs, ldk;
  const float* v;
  int64_t v_bs, ldv;
  float* o;
  int64_t o_bs, ldo;
  float scale;
  const RelPos* rel;  // null: no bias
};

// Query rows per block. A block's scores [rows, nk] should stay in the core's L2 cache between
// the Q K^T, the softmax and P V (packed path: 512 KB, 32 rows at 4096 keys, measured best on a
// 1 MB-L2 core); the sgemm path wants more rows to amortise oneDNN re-packing K and V per call.
int64_t choose_row_block(int64_t nq, int64_t nk, bool packed_path) {
  if (g_row_block > 0) return std::min(g_row_block, nq);
  const int64_t budget = packed_path ? (int64_t{1} << 17) : (int64_t{1} << 19);  // floats
  const int64_t target = std::clamp<int64_t>(budget / std::max<int64_t>(nk, 1), 16, 256);
  if (nq <= target) return nq;
  const int64_t nblocks = (nq + target - 1) / target;  // equal blocks, multiple of 8 rows
  const int64_t rows = (nq + nblocks - 1) / nblocks;
  return (rows + 7) / 8 * 8;
}

// The packed (AVX-512) path needs the P V kernel's head sizes, and enough query rows per head to
// pay for packing K and V (the mask decoder's 7-token queries are not worth it).
bool use_packed_path(const Problem& p) { return avx512::available() && avx512::pv_supported(p.hd) && p.nq >= 32; }

// Row-wise softmax numerators of a block of scores S [rows, nk] (row stride lds) in place,
// with the relative-position bias when given; writes 1 / row sum to inv_sum.
// R holds q . table rows for the block (row stride ldr), as computed by the caller.
void softmax_block(float* S, int64_t lds, int64_t rows, int64_t row0, int64_t nk, const RelPos* rel, const float* R,
                   int64_t ldr, float* bias_buf, float* inv_sum) {
  float* bh = bias_buf;
  float* bw = rel ? bh + rel->H + 16 : nullptr;
  float* row_scratch = rel ? bw + rel->W + 16 : nullptr;
  for (int64_t i = 0; i < rows; ++i) {
    float* s = S + i * lds;
    if (rel) {
      const int64_t qi = row0 + i, ih = qi / rel->W, iw = qi % rel->W;
      const float* rh = R + i * ldr;      // rh[t] = q . rel_pos_h[t]
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
}

size_t bias_buf_floats(const RelPos* rel, int64_t nk) { return rel ? rel->H + rel->W + 32 + nk + 16 : 0; }

// sgemm path, one block of `rows` query rows of one head:
//   S = scale * Q K^T (+ rel pos), P = exp(S - rowmax), O = (P V) / rowsum(P).
void attend_block_sgemm(const Problem& p, const float* q, const float* k, const float* v, float* o, int64_t rows,
                        int64_t row0) {
  const RelPos* rel = p.rel;
  const int64_t nk = p.nk, hd = p.hd, lrel = rel ? rel->L() : 0;
  float* S = t_block.get(static_cast<size_t>(rows) * nk + rows * lrel + bias_buf_floats(rel, nk) + rows + 64);
  float* R = S + rows * nk;
  float* bias_buf = R + rows * lrel;
  float* inv_sum = bias_buf + bias_buf_floats(rel, nk);
  sgemm(false, true, rows, nk, hd, p.scale, q, p.ldq, k, p.ldk, 0.f, S, nk);
  // Every (q row, table row) product in one small GEMM: [rows, hd] x [hd, Lh + Lw]. About twice
  // the dot products strictly needed per row, but as a GEMM that is cheaper than gathering.
  if (rel) sgemm(false, true, rows, lrel, hd, 1.f, q, p.ldq, rel->table, hd, 0.f, R, lrel);
  softmax_block(S, nk, rows, row0, nk, rel, R, lrel, bias_buf, inv_sum);
  sgemm(false, false, rows, hd, nk, 1.f, S, nk, v, p.ldv, 0.f, o, p.ldo);
  // Normalising the [rows, hd] output instead of the [rows, nk] probabilities: hd/nk the work.
  for (int64_t i = 0; i < rows; ++i) {
    float* orow = o + i * p.ldo;
    const float f = inv_sum[i];
    for (int64_t c = 0; c < hd; ++c) orow[c] *= f;
  }
}

// Packed path, same block computation on a head whose K^T and V were packed into kt / vp.
void attend_block_packed(const Problem& p, const float* q, const float* kt, const float* vp, float* o,
                         int64_t rows, int64_t row0) {
  const RelPos* rel = p.rel;
  const int64_t nk = p.nk, hd = p.hd;
  const int64_t lds = avx512::panels(nk) * 16, ldr = rel ? avx512::panels(rel->L()) * 16 : 0;
  float* S = t_block.get(static_cast<size_t>(rows) * lds + rows * ldr + bias_buf_floats(rel, nk) + rows + 64);
  float* R = S + rows * lds;
  float* bias_buf = R + rows * ldr;
  float* inv_sum = bias_buf + bias_buf_floats(rel, nk);
  avx512::qk(q, p.ldq, rows, kt, avx512::panels(nk), hd, p.scale, S, lds);
  if (rel) avx512::qk(q, p.ldq, rows, rel->packed, avx512::panels(rel->L()), hd, 1.f, R, ldr);
  softmax_block(S, lds, rows, row0, nk, rel, R, ldr, bias_buf, inv_sum);
  avx512::pv(S, lds, rows, vp, nk, hd, inv_sum, o, p.ldo);
}

void run(const Problem& p) {
  const bool packed = use_packed_path(p);
  const int64_t rb = choose_row_block(p.nq, p.nk, packed);
  const int64_t nblocks = (p.nq + rb - 1) / rb;
  const int64_t ntasks = p.B * p.heads * nblocks;
  const size_t head_floats = static_cast<size_t>(avx512::panels(p.nk)) * 16 * p.hd + p.nk * p.hd + 64;
  // Exceptions must not leave an OpenMP region: the first one is kept and rethrown after it.
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel
  {
    int64_t packed_bh = -1;  // which (b, head) this thread's t_head holds
#pragma omp for schedule(static)
    for (int64_t t = 0; t < ntasks; ++t) {
      try {
        // Task order (b, head, block): a thread's consecutive tasks share one head's K and V.
        const int64_t blk = t % nblocks, bh = t / nblocks, h = bh % p.heads, b = bh / p.heads;
        const int64_t row0 = blk * rb, rows = std::min(rb, p.nq - row0);
        const float* q = p.q + b * p.q_bs + row0 * p.ldq + h * p.hd;
        const float* k = p.k + b * p.k_bs + h * p.hd;
        const float* v = p.v + b * p.v_bs + h * p.hd;
        float* o = p.o + b * p.o_bs + row0 * p.ldo + h * p.hd;
        if (packed) {
          float* kt = t_head.get(head_floats);
          float* vp = kt + avx512::panels(p.nk) * 16 * p.hd;
          if (packed_bh != bh) {
            avx512::pack_kt(k, p.ldk, p.nk, p.hd, kt);
            avx512::pack_v(v, p.ldv, p.nk, p.hd, vp);
            packed_bh = bh;
          }
          attend_block_packed(p, q, kt, vp, o, rows, row0);
        } else {
          attend_block_sgemm(p, q, k, v, o, rows, row0);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void set_attention_row_block(int64_t rows) { g_row_block = rows; }

void attention_relpos(const float* qkv, float* out, int64_t B, int64_t H, int64_t W, int64_t heads,
                      int64_t head_dim, const float* rel_pos_h, const float* rel_pos_w) {
  const int64_t N = H * W, C = heads * head_dim, hd = head_dim;
  if (B == 0 || N == 0 || C == 0) return;
  // As segment_anything: head_dim ** -0.5 computed in double, applied to float32 data.
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  std::vector<float> table, packed;
  RelPos rel;
  const bool use_rel = rel_pos_h != nullptr;
  if (use_rel) {
    rel.H = H;
    rel.W = W;
    table.resize(rel.L() * hd);
    std::copy(rel_pos_h, rel_pos_h + rel.Lh() * hd, table.begin());
    std::copy(rel_pos_w, rel_pos_w + rel.Lw() * hd, table.begin() + rel.Lh() * hd);
    rel.table = table.data();
    if (avx512::available()) {
      packed.resize(avx512::panels(rel.L()) * 16 * hd);
      avx512::pack_kt(table.data(), hd, rel.L(), hd, packed.data());
      rel.packed = packed.data();
    }
  }
  const int64_t ld = 3 * C;
  Problem p{B, heads, N, N, hd, qkv, N * ld, ld, qkv + C, N * ld, ld, qkv + 2 * C, N * ld, ld,
            out, N * C, C, scale, use_rel ? &rel : nullptr};
  run(p);
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
  Problem p{B, heads, Nq, Nk, hd, q, Nq * D, D, k, Nk * D, D, v, Nk * D, D, out, Nq * D, D, scale, nullptr};
  run(p);
}

}  // namespace vitrt::cpu
