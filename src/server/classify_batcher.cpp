#include "server/classify_batcher.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "server/batch_gather.h"
#include "vitrt/error.h"

namespace vitrt::server {

ClassifyBatcher::ClassifyBatcher(std::shared_ptr<const VitModel> model, ClassifyOptions options)
    : model_(std::move(model)), options_(options) {
  VITRT_CHECK(model_ != nullptr, InvalidArgument, "the classify queue needs a model");
  VITRT_CHECK(options_.max_batch >= 1 && options_.max_queue >= 1 && options_.max_wait_ms >= 0, InvalidArgument,
              "classify queue: max_batch and max_queue must be >= 1 and max_wait_ms >= 0");
  worker_ = std::thread([this] { run(); });
}

ClassifyBatcher::~ClassifyBatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  for (Job& j : queue_) j.promise.set_exception(std::make_exception_ptr(Overloaded("the server is shutting down")));
}

std::future<Tensor> ClassifyBatcher::submit(Tensor pixels) {
  const int s = vit_config(*model_).image_size;
  VITRT_CHECK(pixels.dtype() == DType::F32 && pixels.shape() == Shape({1, s, s, 3}), InvalidArgument,
              "classify queue: expected a preprocessed [1, ", s, ", ", s, ", 3] float32 image, got ",
              shape_str(pixels.shape()));
  std::unique_lock lock(mu_);
  if (stop_) throw Overloaded("the server is shutting down");
  if (queue_.size() >= static_cast<size_t>(options_.max_queue))
    throw Overloaded(detail::concat("the classify queue is full (", queue_.size(), " images waiting, limit ",
                                    options_.max_queue, "); retry later"));
  Job job{std::move(pixels), {}, std::chrono::steady_clock::now()};
  std::future<Tensor> f = job.promise.get_future();
  queue_.push_back(std::move(job));
  lock.unlock();
  cv_.notify_all();
  return f;
}

size_t ClassifyBatcher::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t ClassifyBatcher::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

int ClassifyBatcher::batches() const {
  std::lock_guard lock(mu_);
  return batches_;
}

void ClassifyBatcher::set_paused(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  cv_.notify_all();
}

void ClassifyBatcher::run() {
  const auto max_batch = static_cast<size_t>(options_.max_batch);
  const int s = vit_config(*model_).image_size, classes = vit_config(*model_).num_classes;
  const size_t per_image = static_cast<size_t>(s) * s * 3;
  for (;;) {
    std::vector<Job> batch;
    {
      std::unique_lock lock(mu_);
      batch = gather_batch(lock, cv_, queue_, stop_, paused_, max_batch, options_.max_wait_ms);
      if (batch.empty()) return;  // stopped
      running_ = batch.size();
    }
    std::vector<Tensor> rows;
    std::exception_ptr error;
    try {
      Tensor pixels = Tensor::empty({static_cast<int64_t>(batch.size()), s, s, 3});
      for (size_t i = 0; i < batch.size(); ++i)
        std::memcpy(pixels.data<float>() + i * per_image, batch[i].pixels.data<float>(), per_image * sizeof(float));
      const Tensor logits = vit_logits(*model_, pixels);
      for (size_t i = 0; i < batch.size(); ++i) {
        rows.push_back(Tensor::empty({classes}));
        std::copy_n(logits.data<float>() + i * classes, classes, rows.back().data<float>());
      }
    } catch (...) {
      error = std::current_exception();
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (error) batch[i].promise.set_exception(error);
      else batch[i].promise.set_value(std::move(rows[i]));
    }
    std::lock_guard lock(mu_);
    running_ = 0;
    ++batches_;
  }
}

}  // namespace vitrt::server
