// The waiting rule shared by the server's batching queues (encode_batcher.cpp, classify_batcher.cpp).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace vitrt::server {

// With `lock` held on the queue's mutex: waits until the queue has a job and is not paused, then at
// most max_wait_ms from the first job's arrival for companions (under load the front job has
// usually waited through the previous batch already and goes at once), and takes up to max_batch
// jobs off the front. Returns nothing once `stop` is set. Jobs need an `enqueued` time point.
template <class Job>
std::vector<Job> gather_batch(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, std::deque<Job>& queue,
                              const bool& stop, const bool& paused, size_t max_batch, int max_wait_ms) {
  std::vector<Job> batch;
  cv.wait(lock, [&] { return stop || (!paused && !queue.empty()); });
  if (stop) return batch;
  const auto deadline = queue.front().enqueued + std::chrono::milliseconds(max_wait_ms);
  cv.wait_until(lock, deadline, [&] { return stop || queue.size() >= max_batch; });
  if (stop) return batch;
  while (!queue.empty() && batch.size() < max_batch) {
    batch.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  return batch;
}

}  // namespace vitrt::server
