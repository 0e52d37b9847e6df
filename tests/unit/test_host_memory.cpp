// The host block cache (core/host_memory.h): large blocks are reused after being freed, and when
// the cache is full the blocks idle the longest make room for the newest (a process's load-time
// temporaries must not keep the blocks of every later call out of the cache).
#include <gtest/gtest.h>

#include "core/host_memory.h"
#include "vitrt/tensor.h"

namespace vitrt {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Restores the default limit when a test ends.
struct LimitGuard {
  size_t saved = host_memory::cache_limit();
  ~LimitGuard() { host_memory::set_cache_limit(saved); }
};

const void* block_of(int64_t mib) {
  Tensor t = Tensor::empty({mib * kMiB}, DType::U8);
  return t.raw();  // freed (kept idle) when t goes out of scope
}

TEST(HostMemory, FreedLargeBlockIsReused) {
  LimitGuard g;
  host_memory::set_cache_limit(64 * kMiB);
  const void* first = block_of(5);
  EXPECT_EQ(block_of(5), first);  // the same size again: the idle block comes back
  EXPECT_GE(host_memory::cache_idle_bytes(), static_cast<size_t>(5 * kMiB));
}

TEST(HostMemory, FullCacheEvictsTheOldestBlocks) {
  LimitGuard g;
  host_memory::set_cache_limit(0);  // start empty
  host_memory::set_cache_limit(24 * kMiB);
  // Fill the cache with blocks of sizes never asked for again (load-time temporaries)...
  {
    Tensor a = Tensor::empty({7 * kMiB}, DType::U8), b = Tensor::empty({8 * kMiB}, DType::U8);
    a = Tensor();  // freed first: the oldest idle block
  }
  EXPECT_GT(host_memory::cache_idle_bytes(), static_cast<size_t>(15 * kMiB));
  // ...then the block a call uses each time: kept (the 7 MiB block, idle the longest, makes room)
  // and handed back on the next call.
  const void* hot = block_of(10);
  // Idle now: the 8 MiB and the 10 MiB blocks (sizes rounded up to 64 KiB), not the 7 MiB one.
  EXPECT_GE(host_memory::cache_idle_bytes(), static_cast<size_t>(18 * kMiB));
  EXPECT_LT(host_memory::cache_idle_bytes(), static_cast<size_t>(19 * kMiB));
  EXPECT_EQ(block_of(10), hot);
  EXPECT_EQ(block_of(10), hot);
}

TEST(HostMemory, LimitIsRespected) {
  LimitGuard g;
  host_memory::set_cache_limit(10 * kMiB);
  { Tensor a = Tensor::empty({4 * kMiB}, DType::U8), b = Tensor::empty({4 * kMiB}, DType::U8),
           c = Tensor::empty({4 * kMiB}, DType::U8); }
  EXPECT_LE(host_memory::cache_idle_bytes(), static_cast<size_t>(10 * kMiB));
  block_of(20);  // larger than the limit: never kept
  EXPECT_LE(host_memory::cache_idle_bytes(), static_cast<size_t>(10 * kMiB));
  host_memory::set_cache_limit(0);
  EXPECT_EQ(host_memory::cache_idle_bytes(), 0u);
}

}  // namespace
}  // namespace vitrt
