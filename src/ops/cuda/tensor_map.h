// TMA tensor maps (CUtensorMap) for the Hopper kernels that load 2-D tiles with
// cp.async.bulk.tensor. The driver's encoder is fetched at run time through the runtime's
// entry-point query, so nothing links libcuda directly.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace vitrt::cuda {

// A row-major bf16 matrix [rows][cols] (row pitch cols * 2 bytes, a multiple of 16; base 16-byte
// aligned) loaded in boxes of box_cols x box_rows elements written to shared memory in `swizzle`
// (CU_TENSOR_MAP_SWIZZLE_128B / _64B: the layouts wgmma's swizzled descriptors read). Parts of a
// box past the matrix read as zeros. Throws vitrt::Error when the driver rejects the map.
CUtensorMap bf16_tensor_map_2d(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                               CUtensorMapSwizzle swizzle);

}  // namespace vitrt::cuda
