// A small dense tensor: shape, dtype, and a pointer into storage kept alive by a shared owner
// (a heap buffer, or a memory-mapped checkpoint when weights are used in place).
// Always contiguous, row-major. Views (reshape, slice of the first dim) share storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vitrt/error.h"

namespace vitrt {

enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, U8, Bool };
size_t dtype_size(DType t);
const char* dtype_name(DType t);

enum class Device : uint8_t { CPU, CUDA };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[1, 256, 64, 64]"
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised / zero-filled host tensors.
  static Tensor empty(Shape shape, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor zeros(Shape shape, DType dtype = DType::F32, Device device = Device::CPU);
  // A tensor over memory owned by `owner` (kept alive as long as any view exists). No copy.
  static Tensor wrap(std::shared_ptr<const void> owner, void* data, Shape shape, DType dtype,
                     Device device = Device::CPU);
  // Copies `values` into a new F32 tensor of the given shape (numel must match).
  static Tensor from_vector(const std::vector<float>& values, Shape shape);

  bool defined() const { return data_ != nullptr || (owner_ && shape_numel(shape_) == 0); }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // Typed access; throws InvalidArgument if T does not match dtype().
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  // Same storage, new shape (one dim may be -1). numel must match.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // A deep copy on the same device.
  Tensor clone() const;
  // A copy on `device` (this tensor itself when it is already there).
  Tensor to(Device device) const;
  bool is_cuda() const { return device_ == Device::CUDA; }
  // F32 copy of any floating dtype (F32 returns a view of itself, no copy).
  Tensor to_f32() const;
  // Throws InvalidArgument naming `what` unless shape() == expected.
  void expect_shape(const Shape& expected, const std::string& what) const;

 private:
  std::shared_ptr<const void> owner_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

// bf16/f16 <-> f32 conversions used by the loaders and the fp32 compute path.
float bf16_to_f32(uint16_t v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_bf16(float v);  // round to nearest even

}  // namespace vitrt
