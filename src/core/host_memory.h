// The host block cache behind Tensor::empty on the CPU (core/tensor.cpp): blocks of 1 MiB and more
// are kept when freed, up to a limit, the ones idle the longest evicted first. Exposed for tests and
// for callers that want to bound the process's idle memory.
#pragma once
#include <cstddef>

namespace vitrt::host_memory {

// Bytes kept idle at most (default 2 GiB). Lowering it evicts at once.
void set_cache_limit(size_t bytes);
size_t cache_limit();
// Bytes currently idle in the cache.
size_t cache_idle_bytes();

}  // namespace vitrt::host_memory
