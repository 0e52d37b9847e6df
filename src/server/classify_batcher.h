// The classify queue of `vitrt serve` (POST /v1/classify): images from concurrent requests, each
// already preprocessed on its request's thread (torchvision's eval transform), gathered into one
// forward of the ViT ([B, S, S, 3]) as the encode queue gathers SAM's images. Bounded (submit
// throws Overloaded, answered 503); a batch waits at most max_wait_ms for companions after its first
// image arrived. Each image's logits are those of a batch of one up to the GEMMs' summation order.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "server/encode_batcher.h"  // Overloaded
#include "server/metrics.h"
#include "vitrt/tensor.h"
#include "vitrt/vit.h"

namespace vitrt::server {

struct ClassifyOptions {
  int max_batch = 32;    // images per forward
  int max_wait_ms = 5;   // how long the first image of a batch waits for companions
  int max_queue = 256;   // images waiting (not counting the batch running); beyond: Overloaded
};

class ClassifyBatcher {
 public:
  ClassifyBatcher(std::shared_ptr<const VitModel> model, ClassifyOptions options);
  ~ClassifyBatcher();  // finishes the batch running; queued requests fail with Overloaded
  ClassifyBatcher(const ClassifyBatcher&) = delete;
  ClassifyBatcher& operator=(const ClassifyBatcher&) = delete;

  // Queues one preprocessed image ([1, S, S, 3] float32, host) and returns its logits
  // ([num_classes] float32) when its batch has run. Throws Overloaded when the queue is full.
  std::future<Tensor> submit(Tensor pixels);

  size_t queue_depth() const;  // waiting, not yet in a forward
  size_t running() const;      // in the forward running now
  int batches() const;         // forwards run so far
  const ClassifyOptions& options() const { return options_; }

  // Holds the worker before it takes the next batch (tests use it to fill the queue on purpose).
  void set_paused(bool paused);

 private:
  struct Job {
    Tensor pixels;
    std::promise<Tensor> promise;
    std::chrono::steady_clock::time_point enqueued;
  };
  void run();

  std::shared_ptr<const VitModel> model_;
  ClassifyOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  size_t running_ = 0;
  int batches_ = 0;
  bool paused_ = false, stop_ = false;
  std::thread worker_;
};

}  // namespace vitrt::server
