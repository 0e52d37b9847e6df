// Tensor-level CUDA attention operators (see attention.h): argument checks with the same messages
// style as ops.cpp, output allocation, rel-pos table preparation, launch on the current stream.
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops/cuda/attention.h"
#include "ops/ops.h"
#include "ops/cuda/runtime.h"

namespace vitrt::ops::cuda_impl {
namespace {

void check_device_input(const Tensor& t, const char* op, const char* name) {
  VITRT_CHECK(t.defined(), InvalidArgument, "ops::", op, ": ", name, " is an undefined tensor");
  VITRT_CHECK(t.device() == Device::CUDA, InvalidArgument, "ops::", op, " (CUDA): ", name,
              " is a host tensor; all operands must be on the GPU");
  VITRT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, InvalidArgument, "ops::", op, " (CUDA): ", name,
              " must be float32 or bfloat16, got ", dtype_name(t.dtype()));
}

bool is_bf16(const Tensor& t) { return t.dtype() == DType::BF16; }

const void* offset(const Tensor& t, int64_t elems) {
  return static_cast<const char*>(t.raw()) + elems * static_cast<int64_t>(dtype_size(t.dtype()));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Rel-pos tables in the form the chosen kernel reads (keeps temporaries alive until the call ends;
// their memory is released stream-ordered, after the kernel).
struct RelTables {
  Tensor h, w, h_lo, w_lo;
};

// The conversions an attention launch needs, launched together (one small kernel per layer).
struct PrepBatch {
  cuda::PrepJob jobs[cuda::kMaxPrepJobs];
  Tensor sources[cuda::kMaxPrepJobs];  // alive until the launch (a temporary's memory could be reused)
  int n = 0;
  void add(const Tensor& src, int64_t want, int64_t hd, float* out_f32, void* out_hi, void* out_lo) {
    VITRT_CHECK(n < cuda::kMaxPrepJobs && src.size(0) < INT32_MAX && want < INT32_MAX && hd < INT32_MAX,
                InvalidArgument, "attention input preparation: too many jobs or too large");
    sources[n] = src;
    cuda::PrepJob& j = jobs[n++];
    j.src = src.raw();
    j.src_bf16 = src.dtype() == DType::BF16;
    j.rows = static_cast<int>(src.size(0));
    j.want = static_cast<int>(want);
    j.hd = static_cast<int>(hd);
    j.out_f32 = out_f32;
    j.out_hi = out_hi;
    j.out_lo = out_lo;
  }
  void launch(cudaStream_t stream) const { cuda::prepare_inputs(jobs, n, stream); }
};

void check_rel(const Tensor* rel_pos_h, const Tensor* rel_pos_w, int64_t hd, const char* op) {
  VITRT_CHECK((rel_pos_h == nullptr) == (rel_pos_w == nullptr), InvalidArgument, "ops::", op,
              ": give both rel_pos_h and rel_pos_w, or neither");
  if (!rel_pos_h) return;
  check_device_input(*rel_pos_h, op, "rel_pos_h");
  check_device_input(*rel_pos_w, op, "rel_pos_w");
  VITRT_CHECK(rel_pos_h->dim() == 2 && rel_pos_h->size(1) == hd && rel_pos_h->size(0) >= 1 && rel_pos_w->dim() == 2 &&
                  rel_pos_w->size(1) == hd && rel_pos_w->size(0) >= 1,
              InvalidArgument, "ops::", op, ": rel_pos tables ", shape_str(rel_pos_h->shape()), " / ",
              shape_str(rel_pos_w->shape()), " must be [L, ", hd, "]");
}

// Fills a.rel_* for an H x W grid. Tensor-core kernel: BF16 tables (used in place when they are
// BF16 with exactly 2H-1 / 2W-1 rows), else BF16 hi + lo parts of the F32 (or interpolated)
// values. CUDA-core kernel: F32 tables.
// (Jobs into `prep`, launched by the caller.)
RelTables prepare_rel(cuda::AttentionArgs& a, const Tensor& rh, const Tensor& rw, int64_t H, int64_t W,
                      PrepBatch& prep) {
  const int64_t hd = a.head_dim;
  const int64_t want_h = 2 * H - 1, want_w = 2 * W - 1;
  RelTables t;
  // Probe with placeholder tables and the real grid: the kernel choice depends on the grid (and
  // on the other arguments, all set by now), not on the table pointers.
  a.rel_h = a.rel_w = rh.raw();
  a.rel_H = H;
  a.rel_W = W;
  const bool tc = cuda::attention_uses_tensor_cores(a);
  a.rel_bf16 = tc;
  auto direct = [&](const Tensor& src, int64_t want) {
    return src.size(0) == want && (tc ? is_bf16(src) && aligned16(src.raw()) : !is_bf16(src));
  };
  if (tc) {
    const bool in_place = direct(rh, want_h) && direct(rw, want_w);
    auto make = [&](const Tensor& src, int64_t want, Tensor& hi, Tensor& lo) {
      if (in_place) {
        hi = src;
        return;
      }
      hi = Tensor::empty({want, hd}, DType::BF16, Device::CUDA);
      lo = Tensor::empty({want, hd}, DType::BF16, Device::CUDA);
      prep.add(src, want, hd, nullptr, hi.raw(), lo.raw());
    };
    make(rh, want_h, t.h, t.h_lo);
    make(rw, want_w, t.w, t.w_lo);
  } else {
    auto make = [&](const Tensor& src, int64_t want, Tensor& out) {
      if (direct(src, want)) {
        out = src;
        return;
      }
      out = Tensor::empty({want, hd}, DType::F32, Device::CUDA);
      prep.add(src, want, hd, static_cast<float*>(out.raw()), nullptr, nullptr);
    };
    make(rh, want_h, t.h);
    make(rw, want_w, t.w);
  }
  a.rel_h = t.h.raw();
  a.rel_w = t.w.raw();
  a.rel_h_lo = t.h_lo.defined() ? t.h_lo.raw() : nullptr;
  a.rel_w_lo = t.w_lo.defined() ? t.w_lo.raw() : nullptr;
  return t;
}

float relpos_scale(int64_t hd) {
  // As segment_anything: head_dim ** -0.5 computed in double (same expression as the CPU op).
  return static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
}

}  // namespace

Tensor attention_relpos(const Tensor& qkv, int num_heads, int64_t H, int64_t W, const Tensor* rel_pos_h,
                        const Tensor* rel_pos_w) {
  check_device_input(qkv, "attention_relpos", "qkv");
  VITRT_CHECK(qkv.dim() == 3 && H >= 1 && W >= 1 && qkv.size(1) == H * W && qkv.size(2) % 3 == 0 && num_heads >= 1,
              InvalidArgument, "ops::attention_relpos: qkv ", shape_str(qkv.shape()), " is not [B, ", H, "*", W,
              ", 3*C]");
  const int64_t B = qkv.size(0), N = H * W, C = qkv.size(2) / 3;
  VITRT_CHECK(C % num_heads == 0 && C > 0, InvalidArgument, "ops::attention_relpos: C = ", C,
              " is not divisible by ", num_heads, " heads");
  const int64_t hd = C / num_heads;
  check_rel(rel_pos_h, rel_pos_w, hd, "attention_relpos");
  if (rel_pos_h)
    VITRT_CHECK(rel_pos_h->dtype() == rel_pos_w->dtype(), InvalidArgument,
                "ops::attention_relpos: rel_pos_h and rel_pos_w differ in dtype");

  Tensor out = Tensor::empty({B, N, C}, qkv.dtype(), Device::CUDA);
  if (out.numel() == 0) return out;
  cudaStream_t stream = cuda::current_stream();
  cuda::AttentionArgs a;
  a.bf16 = is_bf16(qkv);
  a.q = qkv.raw();
  a.k = offset(qkv, C);
  a.v = offset(qkv, 2 * C);
  a.out = out.raw();
  a.ldq = a.ldk = a.ldv = 3 * C;
  a.ldo = C;
  a.heads = num_heads;
  a.head_dim = static_cast<int>(hd);
  a.nq = a.nk = N;
  a.num_seq = B;
  a.scale = relpos_scale(hd);
  RelTables keep;
  PrepBatch prep;
  if (rel_pos_h) keep = prepare_rel(a, *rel_pos_h, *rel_pos_w, H, W, prep);
  prep.launch(stream);
  cuda::attention_launch(a, stream);
  return out;
}

Tensor attention_relpos_windowed(const Tensor& qkv_grid, const Tensor& qkv_bias, int num_heads, int window,
                                 const Tensor* rel_pos_h, const Tensor* rel_pos_w) {
  check_device_input(qkv_grid, "attention_relpos_windowed", "qkv");
  VITRT_CHECK(qkv_grid.dim() == 4 && qkv_grid.size(3) % 3 == 0 && window >= 1 && num_heads >= 1, InvalidArgument,
              "ops::attention_relpos_windowed: need qkv [B, H, W, 3C] and window >= 1, got ",
              shape_str(qkv_grid.shape()), " and window ", window);
  const int64_t B = qkv_grid.size(0), Hg = qkv_grid.size(1), Wg = qkv_grid.size(2), C3 = qkv_grid.size(3), C = C3 / 3;
  VITRT_CHECK(C % num_heads == 0 && C > 0, InvalidArgument, "ops::attention_relpos_windowed: C = ", C,
              " is not divisible by ", num_heads, " heads");
  VITRT_CHECK(qkv_bias.defined() && (qkv_bias.dtype() == DType::F32 || qkv_bias.dtype() == DType::BF16),
              InvalidArgument, "ops::attention_relpos_windowed: qkv_bias must be a float32 or bfloat16 tensor");
  qkv_bias.expect_shape({C3}, "ops::attention_relpos_windowed qkv_bias");
  const int64_t hd = C / num_heads;
  check_rel(rel_pos_h, rel_pos_w, hd, "attention_relpos_windowed");
  if (rel_pos_h)
    VITRT_CHECK(rel_pos_h->dtype() == rel_pos_w->dtype(), InvalidArgument,
                "ops::attention_relpos_windowed: rel_pos_h and rel_pos_w differ in dtype");

  Tensor out = Tensor::empty({B, Hg, Wg, C}, qkv_grid.dtype(), Device::CUDA);
  if (out.numel() == 0) return out;
  cudaStream_t stream = cuda::current_stream();
  // The padding tokens' q, k, v: the bias in qkv's dtype, on the device.
  // (Converted in the same launch as the rel-pos tables.)
  PrepBatch prep;
  Tensor bias = qkv_bias.device() == Device::CUDA ? qkv_bias : qkv_bias.to(Device::CUDA);
  if (bias.dtype() != qkv_grid.dtype() || !aligned16(bias.raw())) {
    Tensor conv = Tensor::empty({C3}, qkv_grid.dtype(), Device::CUDA);
    prep.add(bias.reshape({1, C3}), 1, C3, is_bf16(conv) ? nullptr : static_cast<float*>(conv.raw()),
             is_bf16(conv) ? conv.raw() : nullptr, nullptr);
    bias = conv;
  }
  const int64_t nwy = (Hg + window - 1) / window, nwx = (Wg + window - 1) / window;
  cuda::AttentionArgs a;
  a.bf16 = is_bf16(qkv_grid);
  a.q = qkv_grid.raw();
  a.k = offset(qkv_grid, C);
  a.v = offset(qkv_grid, 2 * C);
  a.pad_q = bias.raw();
  a.pad_k = offset(bias, C);
  a.pad_v = offset(bias, 2 * C);
  a.out = out.raw();
  a.ldq = a.ldk = a.ldv = C3;
  a.ldo = C;
  a.heads = num_heads;
  a.head_dim = static_cast<int>(hd);
  a.nq = a.nk = int64_t{window} * window;
  a.num_seq = B * nwy * nwx;
  a.scale = relpos_scale(hd);
  a.window = window;
  a.grid_H = Hg;
  a.grid_W = Wg;
  RelTables keep;
  if (rel_pos_h) keep = prepare_rel(a, *rel_pos_h, *rel_pos_w, window, window, prep);
  prep.launch(stream);
  cuda::attention_launch(a, stream);
  return out;
}

namespace {
// q [Bq, Nq, D] (Bq = B, or 1: one q for every sequence) against B key sequences of Nk rows whose k
// and v rows start at k / v with row stride ldkv elements.
Tensor attention_rows(const Tensor& q, const void* k, const void* v, int64_t ldkv, int64_t B, int64_t Nk,
                      int num_heads) {
  const int64_t Nq = q.size(1), D = q.size(2), hd = D / num_heads;
  if (B == 0 || Nq == 0 || D == 0) return Tensor::empty({B, Nq, D}, q.dtype(), Device::CUDA);
  if (Nk == 0) return Tensor::zeros({B, Nq, D}, q.dtype(), Device::CUDA);  // as the CPU op
  Tensor out = Tensor::empty({B, Nq, D}, q.dtype(), Device::CUDA);
  cuda::AttentionArgs a;
  a.bf16 = is_bf16(q);
  a.q = q.raw();
  a.k = k;
  a.v = v;
  a.out = out.raw();
  a.ldq = a.ldo = D;
  a.ldk = a.ldv = ldkv;
  a.heads = num_heads;
  a.head_dim = static_cast<int>(hd);
  a.nq = Nq;
  a.nk = Nk;
  a.num_seq = B;
  a.q_share = q.size(0) == B ? 1 : B;  // [1, Nq, D]: every sequence reads the same q rows
  // As the CPU op (segment_anything divides by math.sqrt(c_per_head)).
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  cuda::attention_launch(a, cuda::current_stream());
  return out;
}
}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads) {
  check_device_input(q, "attention", "q");
  check_device_input(k, "attention", "k");
  check_device_input(v, "attention", "v");
  ops::check_attention_shapes(q, k, v, num_heads);
  VITRT_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), InvalidArgument,
              "ops::attention (CUDA): q, k, v must have one dtype, got ", dtype_name(q.dtype()), ", ",
              dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  return attention_rows(q, k.raw(), v.raw(), q.size(2), k.size(0), k.size(1), num_heads);
}

Tensor attention_packed_kv(const Tensor& q, const Tensor& kv, int num_heads) {
  check_device_input(q, "attention_packed_kv", "q");
  check_device_input(kv, "attention_packed_kv", "kv");
  VITRT_CHECK(q.dim() == 3 && kv.dim() == 3 && (q.size(0) == kv.size(0) || q.size(0) == 1) &&
                  kv.size(2) == 2 * q.size(2) && num_heads >= 1 && q.size(2) % num_heads == 0,
              InvalidArgument, "ops::attention_packed_kv: q ", shape_str(q.shape()), " and kv ", shape_str(kv.shape()),
              " with ", num_heads, " heads do not match (kv [B, Nk, 2D])");
  VITRT_CHECK(kv.dtype() == q.dtype(), InvalidArgument, "ops::attention_packed_kv (CUDA): q and kv must have one dtype");
  const int64_t D = q.size(2);
  return attention_rows(q, kv.raw(), offset(kv, D), 2 * D, kv.size(0), kv.size(1), num_heads);
}

}  // namespace vitrt::ops::cuda_impl
