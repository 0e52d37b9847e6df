// Block-sparse rows (BSR): a 2-D weight [rows, cols] cut into square block x block tiles, of which
// only the non-zero ones are stored. Used for pruned linear weights (PyTorch layout [out, in]).
//
//   row_ptr  int32 [rows/block + 1]   blocks of block-row r are row_ptr[r] .. row_ptr[r+1]-1
//   col_idx  int32 [nnz]              block-column of each stored block, strictly increasing per row
//   values   F32|BF16 [nnz, block, block]  each block row-major, i.e. values[k][i][j] is
//                                     W[r*block + i, col_idx[k]*block + j]
//
// The three arrays are Tensors so that a model file can hand out memory-mapped storage without
// copying. They stay on the host (validate() and the CPU kernels read them); bsr_to_cuda() adds
// device copies for the CUDA kernels alongside.
#pragma once
#include <cstdint>
#include <string>

#include "vitrt/tensor.h"

namespace vitrt {

// Device copies of a BSR matrix for the CUDA kernels (made by bsr_to_cuda).
struct BsrCudaArrays {
  Tensor row_ptr, col_idx;  // I32, as on the host
  Tensor values;            // F32 or BF16 [nnz, block, block]: the dtype the kernel computes in
  // I32 [rows / block]: the block-rows by decreasing stored-block count (ties: lower index first),
  // the order in which the kernel schedules them so the longest start first.
  Tensor row_order;
  // BF16 uploads only: `values` with each block in wgmma's core-matrix order
  // (bsr_core_matrix_order), so that the Hopper kernel loads a block with one bulk copy.
  Tensor values_core_matrix;
};

struct BsrMatrix {
  int64_t rows = 0, cols = 0;
  int block = 0;
  Tensor row_ptr;  // I32 [rows / block + 1]
  Tensor col_idx;  // I32 [nnz]
  Tensor values;   // F32 or BF16 [nnz, block, block]
  BsrCudaArrays cuda;  // undefined tensors unless bsr_to_cuda() made this matrix

  bool on_cuda() const { return cuda.row_ptr.defined(); }

  int64_t block_rows() const { return block ? rows / block : 0; }
  int64_t block_cols() const { return block ? cols / block : 0; }
  int64_t nnz_blocks() const { return col_idx.defined() ? col_idx.numel() : 0; }
  // Fraction of blocks stored (1 = dense).
  double density() const {
    const int64_t total = block_rows() * block_cols();
    return total ? static_cast<double>(nnz_blocks()) / static_cast<double>(total) : 0.0;
  }
};

// The block sizes vitrt packs and has kernels for.
bool is_supported_bsr_block(int block);

// Throws InvalidArgument unless `block` is one of 16, 32, 64 and divides both dims of `shape`
// (which must be 2-D). `what` names the weight in the message.
void check_bsr_block(const Shape& shape, int block, const std::string& what = "weight");

// Packs a dense 2-D weight (F32 or BF16; F16/F64 are converted to F32) into BSR.
// mask == nullptr: keeps every block with any non-zero element.
// mask of the same shape as w (Bool, U8 or F32, non-zero = keep): stores w * mask and keeps the
//   blocks where the mask has any set element.
// mask of shape [rows/block, cols/block]: keeps exactly the blocks whose mask entry is set (even
//   when their values are all zero), storing w's values.
BsrMatrix bsr_from_dense(const Tensor& w, int block, const Tensor* mask = nullptr);

// The dense [rows, cols] matrix (dtype of the values), zeros outside the stored blocks.
Tensor bsr_to_dense(const BsrMatrix& m);

// Block-magnitude pruning: ranks the blocks of w by their L2 norm (computed in double) and keeps
// the llround((1 - sparsity) * total) largest; equal norms keep the block that comes first in
// row-major block order, so the result is deterministic. sparsity must lie in [0, 1).
BsrMatrix prune_blocks_by_magnitude(const Tensor& w, int block, double sparsity);

// The per-block keep mask [rows/block, cols/block] (U8) that prune_blocks_by_magnitude applies.
Tensor magnitude_block_mask(const Tensor& w, int block, double sparsity);

// A copy of m (validated first; InvalidArgument otherwise) that also holds device copies of its
// arrays, the values converted to `values_dtype` (F32 or BF16: what ops::linear_bsr computes in for
// CUDA tensors of that dtype). The host arrays are shared, not copied. Throws vitrt::Error in a
// build without CUDA or without a device.
BsrMatrix bsr_to_cuda(const BsrMatrix& m, DType values_dtype);

// The values [nnz, block, block] (any dtype, contiguous, host) with each block rearranged into the
// no-swizzle core-matrix layout of Hopper's wgmma for a K-major operand: element (i, j) of a block
// (i: output feature, j: input feature) moves to ((i / 8) * (block / 8) + j / 8) * 64 + (i % 8) * 8
// + j % 8, i.e. 8 x 8 tiles of 128 contiguous bytes (bf16), row-major over the tiles.
Tensor bsr_core_matrix_order(const Tensor& values, int block);

// Checks everything a kernel relies on: block supported and dividing rows/cols, row_ptr I32 of
// length rows/block + 1, starting at 0, non-decreasing, ending at nnz; col_idx I32 [nnz] within
// [0, cols/block) and strictly increasing inside each block-row; values F32/BF16
// [nnz, block, block]; all host tensors. Throws InvalidArgument naming `what` and the first
// violation. O(nnz); safe on hostile data (never reads out of bounds).
void validate(const BsrMatrix& m, const std::string& what = "BSR matrix");

}  // namespace vitrt
