// NumPy .npy files (format version 1.0): how the CLI exchanges low-res logits with Python users
// (np.load / np.save), e.g. to feed a mask back as a prompt.
#pragma once
#include <string>

#include "vitrt/tensor.h"

namespace vitrt {

// Writes a little-endian, C-order array of the tensor's dtype (F32, U8, I64).
void write_npy(const std::string& path, const Tensor& t);
// Reads a little-endian C-order float32 or float64 array as F32. Anything else: InvalidArgument.
Tensor read_npy_f32(const std::string& path);

}  // namespace vitrt
