#include "server/encode_batcher.h"

#include "models/sam/sam_model.h"
#include "ops/ops.h"
#include "server/batch_gather.h"

namespace vitrt::server {

std::vector<ImageEmbedding> encode_batch(const SamModel& model, const std::vector<const PreparedImage*>& images) {
  VITRT_CHECK(!images.empty(), InvalidArgument, "encode_batch needs at least one image");
  return sam::encode_inputs(model, images);
}

EncodeBatcher::EncodeBatcher(std::shared_ptr<const SamModel> model, EncodeOptions options, Metrics& metrics,
                             OnEncoded on_encoded)
    : model_(std::move(model)), options_(options), metrics_(metrics), on_encoded_(std::move(on_encoded)) {
  VITRT_CHECK(options_.max_batch >= 1 && options_.max_queue >= 1 && options_.max_wait_ms >= 0, InvalidArgument,
              "encode queue: max_batch and max_queue must be >= 1 and max_wait_ms >= 0");
  worker_ = std::thread([this] { run(); });
}

EncodeBatcher::~EncodeBatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  for (Job& j : queue_)
    j.promise.set_exception(std::make_exception_ptr(Overloaded("the server is shutting down")));
}

std::optional<std::shared_future<EncodeBatcher::Result>> EncodeBatcher::find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return std::nullopt;
  return it->second;
}

std::shared_future<EncodeBatcher::Result> EncodeBatcher::submit(const std::string& key,
                                                                std::shared_ptr<const PreparedImage> image) {
  std::unique_lock lock(mu_);
  if (auto it = in_flight_.find(key); it != in_flight_.end()) return it->second;
  if (stop_) throw Overloaded("the server is shutting down");
  if (queue_.size() >= static_cast<size_t>(options_.max_queue))
    throw Overloaded(detail::concat("the encode queue is full (", queue_.size(), " images waiting, limit ",
                                    options_.max_queue, "); retry later"));
  Job job{key, std::move(image), {}, std::chrono::steady_clock::now()};
  std::shared_future<Result> f = job.promise.get_future().share();
  in_flight_.emplace(key, f);
  queue_.push_back(std::move(job));
  lock.unlock();
  cv_.notify_all();
  return f;
}

size_t EncodeBatcher::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t EncodeBatcher::encoding() const {
  std::lock_guard lock(mu_);
  return encoding_;
}

void EncodeBatcher::set_paused(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  cv_.notify_all();
}

void EncodeBatcher::run() {
  const auto max_batch = static_cast<size_t>(options_.max_batch);
  for (;;) {
    std::vector<Job> batch;
    {
      std::unique_lock lock(mu_);
      batch = gather_batch(lock, cv_, queue_, stop_, paused_, max_batch, options_.max_wait_ms);
      if (batch.empty()) return;  // stopped
      encoding_ = batch.size();
    }

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<const PreparedImage*> images;
    for (const Job& j : batch) images.push_back(j.image.get());
    std::vector<Result> results;
    std::exception_ptr error;
    try {
      for (ImageEmbedding& e : encode_batch(*model_, images))
        results.push_back(std::make_shared<const ImageEmbedding>(std::move(e)));
    } catch (...) {
      error = std::current_exception();
    }
    metrics_.observe_encode_batch(static_cast<int>(batch.size()),
                                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

    for (size_t i = 0; i < batch.size(); ++i) {
      if (!error && on_encoded_) on_encoded_(batch[i].key, results[i]);
      if (error)
        batch[i].promise.set_exception(error);
      else
        batch[i].promise.set_value(results[i]);
    }
    std::lock_guard lock(mu_);
    for (const Job& j : batch) in_flight_.erase(j.key);
    encoding_ = 0;
  }
}

}  // namespace vitrt::server
