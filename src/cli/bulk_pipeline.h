// The pieces of the bulk commands' pipelines (`embed`, `classify`): a bounded queue between two
// stages, and a batch of inputs read by a pool of threads, each item read or the reason it failed.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <omp.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace vitrt::cli {

// A queue of at most `cap` items between two pipeline stages. close(): no more items (pop drains
// what is left, then returns nothing); abort(): stop now (pending items dropped, push fails).
template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t cap) : cap_(cap) {}
  bool push(T v) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return items_.size() < cap_ || closed_; });
    if (closed_) return false;
    items_.push_back(std::move(v));
    cv_.notify_all();
    return true;
  }
  std::optional<T> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return v;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    items_.clear();
    cv_.notify_all();
  }

 private:
  size_t cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_ = false;
};

// paths[first .. first + count) read by `read` (path -> T) on `threads` threads (this one included):
// items[i] holds the result, or errors[i] why there is none. Each reader runs `read` with OpenMP
// teams of one: the pool is the parallelism (a team per reader per image would oversubscribe).
template <class T>
struct ReadBatch {
  std::vector<std::optional<T>> items;
  std::vector<std::string> errors;
};

template <class T, class Read>
ReadBatch<T> read_batch(const std::vector<std::string>& paths, size_t first, size_t count, int threads, Read&& read) {
  ReadBatch<T> d;
  d.items.resize(count);
  d.errors.resize(count);
  std::atomic<size_t> next{0};
  auto work = [&] {
    omp_set_num_threads(1);  // (this thread's setting only)
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        d.items[i] = read(paths[first + i]);
      } catch (const std::exception& e) {
        d.errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t helpers = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), count) - 1;
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return d;
}

// The default number of reader threads: every hardware thread but one (decoding JPEGs is the
// slowest stage on a big GPU), at least 1, at most 32.
inline int default_reader_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 33u) - 1);
}

}  // namespace vitrt::cli
