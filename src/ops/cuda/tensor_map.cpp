#include "ops/cuda/tensor_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "ops/cuda/runtime.h"
#include "vitrt/error.h"

namespace vitrt::cuda {

CUtensorMap bf16_tensor_map_2d(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                               CUtensorMapSwizzle swizzle) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    VITRT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    VITRT_CHECK(q == cudaDriverEntryPointSuccess && fn, Error, "cuTensorMapEncodeTiled is not available");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap m;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  VITRT_CHECK(r == CUDA_SUCCESS, Error, "cuTensorMapEncodeTiled failed (", static_cast<int>(r), ") for a bf16 [", rows,
              ", ", cols, "] matrix in boxes of ", box_rows, " x ", box_cols);
  return m;
}

}  // namespace vitrt::cuda
