// CPU-only builds: device memory requests fail with a clear message.
#ifndef VITRT_HAVE_CUDA
#include <cstring>

#include "core/device_memory.h"

namespace vitrt::devmem {

bool cuda_available() { return false; }
std::shared_ptr<void> cuda_alloc(size_t) { throw Error("this vitrt build has no CUDA backend (built without nvcc)"); }
void copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) {
  if (dd == Device::CPU && sd == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  throw Error("this vitrt build has no CUDA backend (built without nvcc)");
}
void memset_zero(void* dst, Device dev, size_t bytes) {
  if (dev == Device::CPU) {
    std::memset(dst, 0, bytes);
    return;
  }
  throw Error("this vitrt build has no CUDA backend (built without nvcc)");
}

void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows,
               Device dev) {
  if (dev != Device::CPU) throw Error("this vitrt build has no CUDA backend (built without nvcc)");
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
}

}  // namespace vitrt::devmem
#endif
