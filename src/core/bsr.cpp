// BSR packing, unpacking, block-magnitude pruning and validation (see vitrt/bsr.h).
#include "vitrt/bsr.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace vitrt {
namespace {

// Packing works on float; BF16 weights stay BF16 in the result so nothing is rounded twice.
DType values_dtype_for(DType in) { return in == DType::BF16 ? DType::BF16 : DType::F32; }

void check_weight(const Tensor& w, const char* op) {
  VITRT_CHECK(w.defined(), InvalidArgument, op, ": weight is an undefined tensor");
  VITRT_CHECK(w.device() == Device::CPU, InvalidArgument, op, ": weight must be a host tensor");
  VITRT_CHECK(w.dim() == 2, InvalidArgument, op, ": weight must be 2-D, got ", shape_str(w.shape()));
  VITRT_CHECK(w.dtype() == DType::F32 || w.dtype() == DType::BF16 || w.dtype() == DType::F16 ||
                  w.dtype() == DType::F64,
              InvalidArgument, op, ": weight must be floating point, got ", dtype_name(w.dtype()));
}

bool mask_set(const Tensor& mask, int64_t i) {
  switch (mask.dtype()) {
    case DType::Bool:
    case DType::U8: return mask.data<uint8_t>()[i] != 0;
    case DType::F32: return mask.data<float>()[i] != 0.f;
    default: throw InvalidArgument(detail::concat("bsr: mask must be Bool, U8 or F32, got ", dtype_name(mask.dtype())));
  }
}

// Packs from an F32 view of the weight and a per-block keep decision.
template <class KeepBlock, class ElementScale>
BsrMatrix pack(const Tensor& w32, int block, DType out_dtype, KeepBlock keep, ElementScale scale) {
  const int64_t R = w32.size(0), C = w32.size(1), br_n = R / block, bc_n = C / block;
  const float* w = w32.data<float>();
  std::vector<int32_t> row_ptr(br_n + 1, 0), col_idx;
  for (int64_t br = 0; br < br_n; ++br) {
    for (int64_t bc = 0; bc < bc_n; ++bc)
      if (keep(br, bc)) col_idx.push_back(static_cast<int32_t>(bc));
    row_ptr[br + 1] = static_cast<int32_t>(col_idx.size());
  }
  const int64_t nnz = static_cast<int64_t>(col_idx.size());
  BsrMatrix m;
  m.rows = R;
  m.cols = C;
  m.block = block;
  m.row_ptr = Tensor::empty({br_n + 1}, DType::I32);
  std::memcpy(m.row_ptr.raw(), row_ptr.data(), row_ptr.size() * sizeof(int32_t));
  m.col_idx = Tensor::empty({nnz}, DType::I32);
  if (nnz) std::memcpy(m.col_idx.raw(), col_idx.data(), col_idx.size() * sizeof(int32_t));
  m.values = Tensor::empty({nnz, block, block}, out_dtype);
  const int64_t bb = int64_t{block} * block;
  for (int64_t br = 0; br < br_n; ++br)
    for (int64_t k = row_ptr[br]; k < row_ptr[br + 1]; ++k) {
      const int64_t bc = col_idx[k];
      for (int64_t i = 0; i < block; ++i)
        for (int64_t j = 0; j < block; ++j) {
          const int64_t r = br * block + i, c = bc * block + j;
          const float v = w[r * C + c] * scale(r * C + c);
          const int64_t dst = k * bb + i * block + j;
          if (out_dtype == DType::BF16) m.values.data<uint16_t>()[dst] = f32_to_bf16(v);
          else m.values.data<float>()[dst] = v;
        }
    }
  return m;
}

}  // namespace

bool is_supported_bsr_block(int block) { return block == 16 || block == 32 || block == 64; }

void check_bsr_block(const Shape& shape, int block, const std::string& what) {
  VITRT_CHECK(is_supported_bsr_block(block), InvalidArgument, what, ": BSR block size ", block,
              " is not supported (expected 16, 32 or 64)");
  VITRT_CHECK(shape.size() == 2, InvalidArgument, what, ": BSR needs a 2-D weight, got ", shape_str(shape));
  VITRT_CHECK(shape[0] % block == 0 && shape[1] % block == 0, InvalidArgument, what, ": shape ", shape_str(shape),
              " is not a multiple of the block size ", block, " in both dimensions");
}

BsrMatrix bsr_from_dense(const Tensor& w, int block, const Tensor* mask) {
  check_weight(w, "bsr_from_dense");
  check_bsr_block(w.shape(), block, "bsr_from_dense");
  const Tensor w32 = w.to_f32();
  const int64_t R = w.size(0), C = w.size(1), bc_n = C / block;
  const float* wp = w32.data<float>();
  const DType out = values_dtype_for(w.dtype());
  if (!mask) {
    auto any_nonzero = [&](int64_t br, int64_t bc) {
      for (int64_t i = 0; i < block; ++i)
        for (int64_t j = 0; j < block; ++j)
          if (wp[(br * block + i) * C + bc * block + j] != 0.f) return true;
      return false;
    };
    return pack(w32, block, out, any_nonzero, [](int64_t) { return 1.f; });
  }
  VITRT_CHECK(mask->defined() && mask->device() == Device::CPU, InvalidArgument,
              "bsr_from_dense: mask must be a defined host tensor");
  if (mask->shape() == w.shape()) {
    auto any_set = [&](int64_t br, int64_t bc) {
      for (int64_t i = 0; i < block; ++i)
        for (int64_t j = 0; j < block; ++j)
          if (mask_set(*mask, (br * block + i) * C + bc * block + j)) return true;
      return false;
    };
    return pack(w32, block, out, any_set, [&](int64_t e) { return mask_set(*mask, e) ? 1.f : 0.f; });
  }
  VITRT_CHECK(mask->shape() == (Shape{R / block, bc_n}), InvalidArgument, "bsr_from_dense: mask ",
              shape_str(mask->shape()), " must be the weight's shape ", shape_str(w.shape()),
              " or the block grid [", R / block, ", ", bc_n, "]");
  return pack(w32, block, out, [&](int64_t br, int64_t bc) { return mask_set(*mask, br * bc_n + bc); },
              [](int64_t) { return 1.f; });
}

Tensor bsr_to_dense(const BsrMatrix& m) {
  validate(m, "bsr_to_dense");
  Tensor d = Tensor::zeros({m.rows, m.cols}, m.values.dtype());
  const int32_t* rp = m.row_ptr.data<int32_t>();
  const int32_t* ci = m.col_idx.data<int32_t>();
  const int64_t b = m.block, bb = b * b, esz = static_cast<int64_t>(dtype_size(m.values.dtype()));
  const auto* src = static_cast<const uint8_t*>(m.values.raw());
  auto* dst = static_cast<uint8_t*>(d.raw());
  for (int64_t br = 0; br < m.block_rows(); ++br)
    for (int64_t k = rp[br]; k < rp[br + 1]; ++k)
      for (int64_t i = 0; i < b; ++i)  // one block row at a time: contiguous in both layouts
        std::memcpy(dst + ((br * b + i) * m.cols + int64_t{ci[k]} * b) * esz, src + (k * bb + i * b) * esz, b * esz);
  return d;
}

Tensor magnitude_block_mask(const Tensor& w, int block, double sparsity) {
  check_weight(w, "prune_blocks_by_magnitude");
  check_bsr_block(w.shape(), block, "prune_blocks_by_magnitude");
  VITRT_CHECK(std::isfinite(sparsity) && sparsity >= 0.0 && sparsity < 1.0, InvalidArgument,
              "prune_blocks_by_magnitude: sparsity ", sparsity, " must lie in [0, 1)");
  const Tensor w32 = w.to_f32();
  const float* wp = w32.data<float>();
  const int64_t C = w.size(1), br_n = w.size(0) / block, bc_n = C / block, total = br_n * bc_n;
  std::vector<double> norm2(total, 0.0);
  for (int64_t br = 0; br < br_n; ++br)
    for (int64_t i = 0; i < block; ++i) {
      const float* row = wp + (br * block + i) * C;
      for (int64_t bc = 0; bc < bc_n; ++bc) {
        double s = 0.0;
        for (int64_t j = 0; j < block; ++j) s += static_cast<double>(row[bc * block + j]) * row[bc * block + j];
        norm2[br * bc_n + bc] += s;
      }
    }
  const int64_t keep = std::clamp<int64_t>(std::llround((1.0 - sparsity) * static_cast<double>(total)), 0, total);
  std::vector<int64_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  // Squared norms order like norms. Largest first; ties: lower row-major block index first.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return norm2[a] > norm2[b]; });
  Tensor mask = Tensor::zeros({br_n, bc_n}, DType::U8);
  for (int64_t i = 0; i < keep; ++i) mask.data<uint8_t>()[order[i]] = 1;
  return mask;
}

BsrMatrix prune_blocks_by_magnitude(const Tensor& w, int block, double sparsity) {
  const Tensor mask = magnitude_block_mask(w, block, sparsity);
  return bsr_from_dense(w, block, &mask);
}

BsrMatrix bsr_to_cuda(const BsrMatrix& m, DType values_dtype) {
  validate(m, "bsr_to_cuda");
  VITRT_CHECK(values_dtype == DType::F32 || values_dtype == DType::BF16, InvalidArgument,
              "bsr_to_cuda: values dtype must be float32 or bfloat16, got ", dtype_name(values_dtype));
  const int64_t br_n = m.block_rows();
  const int32_t* rp = m.row_ptr.data<int32_t>();
  // Heaviest block-rows first: within a token tile they are launched in this order.
  std::vector<int32_t> order(br_n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return rp[a + 1] - rp[a] > rp[b + 1] - rp[b]; });
  Tensor order_host = Tensor::empty({br_n}, DType::I32);
  std::memcpy(order_host.raw(), order.data(), order.size() * sizeof(int32_t));

  Tensor values = m.values;
  if (values.dtype() != values_dtype) {  // host conversion: BF16 rounds to nearest even
    Tensor converted = Tensor::empty(values.shape(), values_dtype);
    const int64_t n = values.numel();
    if (values_dtype == DType::BF16) {
      const float* src = values.data<float>();
      uint16_t* dst = converted.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
    } else {
      const uint16_t* src = values.data<uint16_t>();
      float* dst = converted.data<float>();
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
    }
    values = converted;
  }
  BsrMatrix out = m;
  out.cuda.row_ptr = m.row_ptr.to(Device::CUDA);
  out.cuda.col_idx = m.col_idx.to(Device::CUDA);
  out.cuda.values = values.to(Device::CUDA);
  out.cuda.row_order = order_host.to(Device::CUDA);
  if (values_dtype == DType::BF16 && m.nnz_blocks() > 0)  // (blocks 16 / 32 / 64: bsr_gemm_xres.cu reads each)
    out.cuda.values_core_matrix = bsr_core_matrix_order(values, m.block).to(Device::CUDA);
  return out;
}

Tensor bsr_core_matrix_order(const Tensor& values, int block) {
  VITRT_CHECK(values.dim() == 3 && values.size(1) == block && values.size(2) == block && block % 8 == 0,
              InvalidArgument, "bsr_core_matrix_order: expected values [nnz, ", block, ", ", block, "], got ",
              shape_str(values.shape()));
  VITRT_CHECK(values.device() == Device::CPU, InvalidArgument, "bsr_core_matrix_order: values must be on the host");
  Tensor out = Tensor::empty(values.shape(), values.dtype());
  const size_t esize = dtype_size(values.dtype());
  const auto* in = static_cast<const unsigned char*>(values.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  const int64_t per_block = int64_t{block} * block, tiles_per_row = block / 8;
  for (int64_t b = 0; b < values.size(0); ++b)
    for (int64_t i = 0; i < block; ++i)
      for (int64_t j = 0; j < block; ++j) {
        const int64_t to = ((i / 8) * tiles_per_row + j / 8) * 64 + (i % 8) * 8 + j % 8;
        std::memcpy(dst + (b * per_block + to) * esize, in + (b * per_block + i * block + j) * esize, esize);
      }
  return out;
}

void validate(const BsrMatrix& m, const std::string& what) {
  VITRT_CHECK(is_supported_bsr_block(m.block), InvalidArgument, what, ": block size ", m.block,
              " is not supported (expected 16, 32 or 64)");
  VITRT_CHECK(m.rows > 0 && m.cols > 0 && m.rows % m.block == 0 && m.cols % m.block == 0, InvalidArgument, what,
              ": shape [", m.rows, ", ", m.cols, "] is not a positive multiple of the block size ", m.block);
  VITRT_CHECK(m.row_ptr.defined() && m.col_idx.defined() && m.values.defined(), InvalidArgument, what,
              ": row_ptr, col_idx and values must all be defined");
  VITRT_CHECK(m.row_ptr.device() == Device::CPU && m.col_idx.device() == Device::CPU &&
                  m.values.device() == Device::CPU,
              InvalidArgument, what, ": BSR arrays must be host tensors");
  VITRT_CHECK(m.row_ptr.dtype() == DType::I32 && m.col_idx.dtype() == DType::I32, InvalidArgument, what,
              ": row_ptr and col_idx must be int32, got ", dtype_name(m.row_ptr.dtype()), " and ",
              dtype_name(m.col_idx.dtype()));
  VITRT_CHECK(m.values.dtype() == DType::F32 || m.values.dtype() == DType::BF16, InvalidArgument, what,
              ": values must be F32 or BF16, got ", dtype_name(m.values.dtype()));
  const int64_t br_n = m.block_rows(), bc_n = m.block_cols();
  VITRT_CHECK(m.row_ptr.dim() == 1 && m.row_ptr.numel() == br_n + 1, InvalidArgument, what, ": row_ptr has shape ",
              shape_str(m.row_ptr.shape()), ", expected [", br_n + 1, "] (block-rows + 1)");
  VITRT_CHECK(m.col_idx.dim() == 1, InvalidArgument, what, ": col_idx must be 1-D, got ",
              shape_str(m.col_idx.shape()));
  const int64_t nnz = m.col_idx.numel();
  m.values.expect_shape({nnz, m.block, m.block}, what + " values");
  const int32_t* rp = m.row_ptr.data<int32_t>();
  const int32_t* ci = m.col_idx.data<int32_t>();
  VITRT_CHECK(rp[0] == 0, InvalidArgument, what, ": row_ptr[0] is ", rp[0], ", expected 0");
  // row_ptr in full first: the column checks below index col_idx through it.
  for (int64_t r = 0; r < br_n; ++r)
    VITRT_CHECK(rp[r + 1] >= rp[r] && rp[r + 1] <= nnz, InvalidArgument, what, ": row_ptr[", r + 1, "] = ", rp[r + 1],
                " is not within [row_ptr[", r, "] = ", rp[r], ", ", nnz, "] (row_ptr must be non-decreasing)");
  VITRT_CHECK(rp[br_n] == nnz, InvalidArgument, what, ": row_ptr ends at ", rp[br_n], " but col_idx holds ", nnz,
              " blocks");
  for (int64_t r = 0; r < br_n; ++r)
    for (int64_t k = rp[r]; k < rp[r + 1]; ++k) {
      VITRT_CHECK(ci[k] >= 0 && ci[k] < bc_n, InvalidArgument, what, ": col_idx[", k, "] = ", ci[k],
                  " is out of range [0, ", bc_n, ") in block-row ", r);
      VITRT_CHECK(k == rp[r] || ci[k] > ci[k - 1], InvalidArgument, what, ": col_idx of block-row ", r,
                  " is not strictly increasing (col_idx[", k - 1, "] = ", ci[k - 1], ", col_idx[", k, "] = ", ci[k],
                  ")");
    }
}

}  // namespace vitrt
