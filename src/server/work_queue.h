// A fixed set of worker threads behind a bounded queue. The HTTP threads hand compute (mask
// decoding, "segment everything") to it instead of running it themselves, so that however many
// connections are open, only `workers` OpenMP teams compete for the cores, and a burst beyond
// `max_queue` waiting jobs is refused (Overloaded -> 503) instead of piling up.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/encode_batcher.h"  // Overloaded

namespace vitrt::server {

class WorkQueue {
 public:
  // `init` runs once on each worker thread before it takes jobs (e.g. to set OpenMP threads).
  WorkQueue(std::string name, int workers, int max_queue, std::function<void()> init = {})
      : name_(std::move(name)), max_queue_(max_queue) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this, init] {
        if (init) init();
        run();
      });
  }
  ~WorkQueue() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs fn on a worker; the future carries its exception, if any. Throws Overloaded when
  // max_queue jobs are already waiting.
  template <class F>
  auto submit(F&& fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> f = task->get_future();
    {
      std::lock_guard lock(mu_);
      if (stop_) throw Overloaded("the server is shutting down");
      if (jobs_.size() >= static_cast<size_t>(max_queue_))
        throw Overloaded(name_ + " queue is full (" + std::to_string(jobs_.size()) + " requests waiting, limit " +
                         std::to_string(max_queue_) + "); retry later");
      jobs_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return f;
  }

  size_t queue_depth() const {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  size_t running() const {
    std::lock_guard lock(mu_);
    return running_;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_ and nothing left: queued jobs are finished first
        job = std::move(jobs_.front());
        jobs_.pop_front();
        ++running_;
      }
      job();
      std::lock_guard lock(mu_);
      --running_;
    }
  }

  std::string name_;
  int max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vitrt::server
