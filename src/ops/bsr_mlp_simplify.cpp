// ops::simplify_bsr_mlp: a block-sparse MLP without the work whose result does not depend on the
// input (see ops.h). Host only, once per model.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "vitrt/error.h"

namespace vitrt::ops {

namespace {

// torch.nn.GELU() (approximate='none'): what the model's MLP applies to the hidden values.
double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// m with only the stored blocks (block-row r, block-column c) for which keep(r, c) holds, repacked
// through its dense form: bsr_from_dense with a block mask keeps exactly those blocks, values as
// stored (F32 or BF16 round-trip exactly).
template <class Keep>
BsrMatrix keep_blocks(const BsrMatrix& m, Keep keep) {
  const int32_t* rp = m.row_ptr.data<int32_t>();
  const int32_t* ci = m.col_idx.data<int32_t>();
  const int64_t cols = m.block_cols();
  Tensor mask = Tensor::zeros({m.block_rows(), cols}, DType::U8);
  for (int64_t r = 0; r < m.block_rows(); ++r)
    for (int32_t k = rp[r]; k < rp[r + 1]; ++k)
      if (keep(r, ci[k])) mask.data<uint8_t>()[r * cols + ci[k]] = 1;
  return bsr_from_dense(bsr_to_dense(m), m.block, &mask);
}

void check_bias(const Tensor& b, int64_t n, const char* what) {
  VITRT_CHECK(b.defined() && !b.is_cuda() && b.dtype() == DType::F32, InvalidArgument,
              "ops::simplify_bsr_mlp: ", what, " must be a float32 host tensor");
  b.expect_shape({n}, what);
}

}  // namespace

bool bsr_mlp_simplify_on() {
  static const bool on = [] {
    const char* v = std::getenv("VITRT_BSR_MLP_SIMPLIFY");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

SimplifiedBsrMlp simplify_bsr_mlp(const BsrMatrix& fc1, const Tensor& b1, const BsrMatrix& fc2, const Tensor& b2) {
  validate(fc1, "block-sparse MLP fc1");
  validate(fc2, "block-sparse MLP fc2");
  VITRT_CHECK(fc1.block == fc2.block && fc2.cols == fc1.rows, InvalidArgument,
              "ops::simplify_bsr_mlp: fc2 [", fc2.rows, ", ", fc2.cols, "] in ", fc2.block, "-blocks does not take fc1 [",
              fc1.rows, ", ", fc1.cols, "] in ", fc1.block, "-blocks");
  check_bias(b1, fc1.rows, "fc1 bias");
  check_bias(b2, fc2.rows, "fc2 bias");
  const int B = fc1.block;
  const int64_t hidden_blocks = fc1.block_rows();
  const int32_t* rp1 = fc1.row_ptr.data<int32_t>();
  const int32_t* ci2 = fc2.col_idx.data<int32_t>();

  // Hidden blocks fc2 reads; hidden blocks that are GELU(b1) whatever the input (no fc1 block).
  std::vector<char> read(hidden_blocks, 0), constant(hidden_blocks, 0);
  for (int64_t k = 0; k < fc2.nnz_blocks(); ++k) read[ci2[k]] = 1;
  for (int64_t j = 0; j < hidden_blocks; ++j) constant[j] = rp1[j] == rp1[j + 1];

  SimplifiedBsrMlp s;
  s.fc1 = keep_blocks(fc1, [&](int64_t j, int32_t) { return read[j] != 0; });
  s.fc1_blocks_dropped = fc1.nnz_blocks() - s.fc1.nnz_blocks();

  // b2 + sum over the folded blocks (i, j) of W2[i, j] GELU(b1_j), in double.
  const Tensor w2 = fc2.values.to_f32();
  const float* v2 = w2.data<float>();
  const float* bias1 = b1.data<float>();
  const int32_t* rp2 = fc2.row_ptr.data<int32_t>();
  std::vector<double> acc(b2.data<float>(), b2.data<float>() + fc2.rows);
  std::vector<double> gelu_b1(fc1.rows, 0.0);  // GELU(b1) of the constant hidden blocks, once each
  for (int64_t j = 0; j < hidden_blocks; ++j)
    if (constant[j])
      for (int c = 0; c < B; ++c) gelu_b1[j * B + c] = gelu_exact(bias1[j * B + c]);
  for (int64_t i = 0; i < fc2.block_rows(); ++i)
    for (int32_t k = rp2[i]; k < rp2[i + 1]; ++k) {
      const int32_t j = ci2[k];
      if (!constant[j]) continue;
      const double* g = gelu_b1.data() + static_cast<int64_t>(j) * B;
      const float* blk = v2 + static_cast<int64_t>(k) * B * B;
      for (int r = 0; r < B; ++r) {
        double t = 0;
        for (int c = 0; c < B; ++c) t += static_cast<double>(blk[r * B + c]) * g[c];
        acc[i * B + r] += t;
      }
      ++s.fc2_blocks_folded;
    }
  s.fc2 = keep_blocks(fc2, [&](int64_t, int32_t j) { return constant[j] == 0; });
  s.b2 = Tensor::empty({fc2.rows});
  float* out = s.b2.data<float>();
  for (int64_t n = 0; n < fc2.rows; ++n) out[n] = static_cast<float>(acc[n]);
  return s;
}

}  // namespace vitrt::ops
