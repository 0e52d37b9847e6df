// Shared oneDNN plumbing for the CPU kernels: one engine, a stream and a scratchpad per thread.
#pragma once
#include <cstddef>

#include <dnnl.hpp>

namespace vitrt::cpu::dnnl_util {

dnnl::engine& engine();
// One stream per calling thread: a stream is not meant to be shared between threads.
dnnl::stream& stream();
// Scratchpad memory owned by the calling thread, at least `bytes` long. Primitives are created
// with scratchpad_mode::user and given this: oneDNN's default shares one global scratchpad
// between primitives, which is unsafe if two threads run inferences at once.
dnnl::memory scratchpad(size_t bytes);
// Attributes every vitrt primitive starts from: strict fp32 math, user scratchpad.
dnnl::primitive_attr base_attr();

}  // namespace vitrt::cpu::dnnl_util
