#include "ops/cpu/dnnl_util.h"

#include <cstdlib>

#include "vitrt/error.h"

namespace vitrt::cpu::dnnl_util {
namespace {

struct ScratchBuffer {
  void* ptr = nullptr;
  size_t size = 0;
  ~ScratchBuffer() { std::free(ptr); }
  void* get(size_t bytes) {
    if (bytes > size) {
      std::free(ptr);
      size = (bytes + 4095) / 4096 * 4096;
      ptr = std::aligned_alloc(64, size);
      if (!ptr) throw Error(detail::concat("out of memory allocating a ", bytes, "-byte oneDNN scratchpad"));
    }
    return ptr;
  }
};
thread_local ScratchBuffer t_scratch;

}  // namespace

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory scratchpad(size_t bytes) {
  dnnl::memory::desc md({static_cast<dnnl::memory::dim>(bytes)}, dnnl::memory::data_type::u8,
                        dnnl::memory::dims{1});
  return dnnl::memory(md, engine(), t_scratch.get(bytes + 64));
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace vitrt::cpu::dnnl_util
