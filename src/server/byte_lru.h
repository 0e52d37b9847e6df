// A thread-safe least-recently-used map bounded by the bytes its values hold, not by their
// number: embeddings (1x256x64x64 float32 = 4 MiB each) and low-res logits (256 KiB a mask) differ
// in size by 16x, and what the operator wants to cap is memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace vitrt::server {

struct CacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0, inserts = 0;
  size_t bytes = 0, entries = 0, capacity = 0;
};

template <class V>
class ByteLru {
 public:
  using Stats = CacheStats;

  explicit ByteLru(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The value for `key` (and marks it most recently used), or null. Counts a hit or a miss.
  std::shared_ptr<const V> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Like get() without touching the statistics or the order (for "is it there?" checks).
  bool contains(const std::string& key) const {
    std::lock_guard lock(mu_);
    return index_.count(key) != 0;
  }

  // Inserts or replaces; evicts least recently used entries until the total fits. A value
  // larger than the whole capacity is not stored (returns false) rather than emptying the cache.
  bool put(const std::string& key, std::shared_ptr<const V> value, size_t bytes) {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      bytes_ -= it->second->bytes;
      order_.erase(it->second);
      index_.erase(it);
    }
    if (bytes > capacity_) return false;
    while (bytes_ + bytes > capacity_ && !order_.empty()) {
      bytes_ -= order_.back().bytes;
      index_.erase(order_.back().key);
      order_.pop_back();
      ++stats_.evictions;
    }
    order_.push_front(Entry{key, std::move(value), bytes});
    index_[key] = order_.begin();
    bytes_ += bytes;
    ++stats_.inserts;
    return true;
  }

  Stats stats() const {
    std::lock_guard lock(mu_);
    Stats s = stats_;
    s.bytes = bytes_;
    s.entries = index_.size();
    s.capacity = capacity_;
    return s;
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const V> value;
    size_t bytes;
  };
  mutable std::mutex mu_;
  size_t capacity_;
  size_t bytes_ = 0;
  std::list<Entry> order_;  // front = most recently used
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
  Stats stats_;
};

}  // namespace vitrt::server
