#include "vitrt/tensor.h"

#include "core/device_memory.h"
#include "core/host_memory.h"

#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <cstring>
#include <sstream>

namespace vitrt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I64: return "int64";
    case DType::I32: return "int32";
    case DType::I16: return "int16";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

namespace {
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int16_t>() { return DType::I16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::BF16; }  // raw 16-bit access
}  // namespace

namespace {

// Host memory for tensors. Large blocks (the encoder's qkv and MLP activations are 10-50 MB) are
// kept in a small cache when freed: glibc returns blocks above its mmap threshold to the kernel, and
// faulting those pages back in on every forward cost about 20% of the CPU encoder's time (and makes
// device-to-host copies into them several times slower). When the cache is full the blocks idle the
// longest make room: a model's load-time temporaries (e.g. every weight converted for the GPU) must
// not fill it for good and leave the blocks reused on every call uncached, which made vit_h's
// mask downloads 4x slower than vit_b's.
using HostBlock = std::shared_ptr<const void>;
constexpr size_t kCacheMin = size_t{1} << 20;  // cache blocks of 1 MiB and more

struct HostCache {
  struct Idle {
    size_t bytes;
    void* block;
  };
  std::mutex mu;
  std::list<Idle> lru;                                         // oldest first
  std::multimap<size_t, std::list<Idle>::iterator> by_size;  // rounded size -> entry of lru
  size_t idle_bytes = 0;
  size_t limit = size_t{2} << 30;  // keep at most 2 GiB idle

  void* take(size_t bytes) {
    auto it = by_size.find(bytes);
    if (it == by_size.end()) return nullptr;
    void* p = it->second->block;
    lru.erase(it->second);
    by_size.erase(it);
    idle_bytes -= bytes;
    return p;
  }
  // Frees the oldest idle blocks until `incoming` more bytes fit under the limit.
  void trim(size_t incoming) {
    while (!lru.empty() && idle_bytes + incoming > limit) {
      const Idle old = lru.front();
      for (auto it = by_size.find(old.bytes); it != by_size.end(); ++it)
        if (it->second == lru.begin()) {
          by_size.erase(it);
          break;
        }
      lru.pop_front();
      idle_bytes -= old.bytes;
      std::free(old.block);
    }
  }
  // Keeps `block` idle, evicting the oldest blocks as needed; false when it cannot be kept.
  bool keep(size_t bytes, void* block) {
    if (bytes > limit) return false;
    trim(bytes);
    by_size.emplace(bytes, lru.insert(lru.end(), Idle{bytes, block}));
    idle_bytes += bytes;
    return true;
  }
};
HostCache& host_cache() {
  static HostCache* c = new HostCache();  // never destroyed: tensors may outlive static destructors
  return *c;
}

}  // namespace

namespace host_memory {
void set_cache_limit(size_t bytes) {
  HostCache& c = host_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limit = bytes;
  c.trim(0);
}
size_t cache_limit() {
  HostCache& c = host_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.limit;
}
size_t cache_idle_bytes() {
  HostCache& c = host_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.idle_bytes;
}
}  // namespace host_memory

namespace {

HostBlock host_allocate(size_t bytes) {
  // 64-byte alignment for vector loads; at least one line so data is never null.
  size_t alloc = ((bytes + 63) / 64) * 64 + 64;
  if (alloc >= kCacheMin) alloc = ((alloc + 65535) / 65536) * 65536;  // coarse sizes so blocks are reused
  void* p = nullptr;
  if (alloc >= kCacheMin) {
    HostCache& c = host_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    p = c.take(alloc);
  }
  if (!p) p = std::aligned_alloc(64, alloc);
  if (!p) throw Error(detail::concat("out of memory allocating ", bytes, " bytes of host memory"));
  return HostBlock(p, [alloc](const void* q) {
    void* block = const_cast<void*>(q);
    if (alloc >= kCacheMin) {
      HostCache& c = host_cache();
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.keep(alloc, block)) return;
    }
    std::free(block);
  });
}

}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  // The byte count, checked as it grows: shapes can come from files (a .npy header), and a product
  // that wraps would allocate a small buffer under a shape that claims a huge one.
  int64_t bytes_checked = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape) {
    VITRT_CHECK(d >= 0, InvalidArgument, "negative dimension in shape ", shape_str(shape));
    VITRT_CHECK(!__builtin_mul_overflow(bytes_checked, d, &bytes_checked), InvalidArgument, "shape ", shape_str(shape),
                " of ", dtype_name(dtype), " holds more bytes than fit in 64 bits");
  }
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  size_t bytes = t.nbytes();
  if (device == Device::CUDA) {
    std::shared_ptr<void> mem = devmem::cuda_alloc(bytes);
    t.data_ = mem.get();
    t.owner_ = std::move(mem);
    return t;
  }
  HostBlock block = host_allocate(bytes);
  t.owner_ = std::move(block);
  t.data_ = const_cast<void*>(t.owner_.get());
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  devmem::memset_zero(t.data_, device, t.nbytes());
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  if (nbytes()) devmem::copy(t.data_, device, data_, device_, nbytes());
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<const void> owner, void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, Shape shape) {
  VITRT_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), InvalidArgument,
              "from_vector: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor t = empty(std::move(shape));
  std::memcpy(t.data_, values.data(), values.size() * sizeof(float));
  return t;
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  VITRT_CHECK(d >= 0 && d < n, InvalidArgument, "dimension ", d, " out of range for shape ", shape_str(shape_));
  return shape_[d];
}

template <class T>
T* Tensor::data() {
  VITRT_CHECK(dtype_ == dtype_of<T>() || (sizeof(T) == 2 && dtype_size(dtype_) == 2), InvalidArgument,
              "tensor of dtype ", dtype_name(dtype_), " accessed as ", dtype_name(dtype_of<T>()));
  return static_cast<T*>(data_);
}
template <class T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}
template float* Tensor::data<float>();
template const float* Tensor::data<float>() const;
template double* Tensor::data<double>();
template const double* Tensor::data<double>() const;
template int64_t* Tensor::data<int64_t>();
template const int64_t* Tensor::data<int64_t>() const;
template int32_t* Tensor::data<int32_t>();
template const int32_t* Tensor::data<int32_t>() const;
template int16_t* Tensor::data<int16_t>();
template const int16_t* Tensor::data<int16_t>() const;
template int8_t* Tensor::data<int8_t>();
template const int8_t* Tensor::data<int8_t>() const;
template uint8_t* Tensor::data<uint8_t>();
template const uint8_t* Tensor::data<uint8_t>() const;
template bool* Tensor::data<bool>();
template const bool* Tensor::data<bool>() const;
template uint16_t* Tensor::data<uint16_t>();
template const uint16_t* Tensor::data<uint16_t>() const;

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      VITRT_CHECK(infer < 0, InvalidArgument, "reshape: more than one -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    VITRT_CHECK(known > 0 && numel() % known == 0, InvalidArgument, "reshape ", shape_str(shape_), " to ", shape_str(shape));
    shape[infer] = numel() / known;
  }
  VITRT_CHECK(shape_numel(shape) == numel(), InvalidArgument, "reshape ", shape_str(shape_), " to ", shape_str(shape),
              ": element counts differ");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  VITRT_CHECK(dim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], InvalidArgument,
              "slice0 [", begin, ", ", end, ") out of range for shape ", shape_str(shape_));
  Tensor t = *this;
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = static_cast<char*>(data_) + begin * row * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  if (nbytes()) devmem::copy(t.data_, device_, data_, device_, nbytes());
  return t;
}

float bf16_to_f32(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

Tensor Tensor::to_f32() const {
  if (dtype_ == DType::F32) return *this;
  VITRT_CHECK(device_ == Device::CPU, InvalidArgument, "to_f32() of a device tensor: use ops::cast");
  Tensor t = empty(shape_, DType::F32);
  float* o = t.data<float>();
  int64_t n = numel();
  switch (dtype_) {
    case DType::F64: { auto* s = static_cast<const double*>(data_); for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]); break; }
    case DType::F16: { auto* s = static_cast<const uint16_t*>(data_); for (int64_t i = 0; i < n; ++i) o[i] = f16_to_f32(s[i]); break; }
    case DType::BF16: { auto* s = static_cast<const uint16_t*>(data_); for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(s[i]); break; }
    default:
      throw InvalidArgument(detail::concat("cannot convert a ", dtype_name(dtype_), " tensor to float32"));
  }
  return t;
}

void Tensor::expect_shape(const Shape& expected, const std::string& what) const {
  VITRT_CHECK(shape_ == expected, InvalidArgument, what, ": expected shape ", shape_str(expected), ", got ",
              shape_str(shape_));
}

}  // namespace vitrt
