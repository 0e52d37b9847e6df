// The encode queue: image-encoder work from concurrent requests, gathered into batches so that
// one encoder call ([B, S, S, 3]) serves several images. The queue is bounded (submit throws
// Overloaded, answered 503, instead of growing without limit), a batch waits at most max_wait for
// companions after its first image arrived, and an image already queued or being encoded is not
// queued twice: later requests for it share the first one's result.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "models/sam/sam_model.h"
#include "vitrt/sam.h"

namespace vitrt::server {

// A bounded queue is full; the request should be retried later (HTTP 503).
class Overloaded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An image resized (ResizeLongestSide), normalised and padded exactly as SamPredictor::set_image
// does it, ready to be one row of an encoder batch.
// An image resized and padded for the encoder (where the model runs), by the library's own code, so
// an embedding from the server is the one SamPredictor computes.
using PreparedImage = sam::EncoderInput;
inline PreparedImage prepare_image(const Image& rgb, const SamModel& model) {
  return sam::prepare_encoder_input(rgb, model);
}

// Runs the image encoder once over several prepared images and returns one embedding each, as
// SamPredictor::set_image would have produced them (each with its own storage, so that dropping
// one from the cache frees its memory).
std::vector<ImageEmbedding> encode_batch(const SamModel& model, const std::vector<const PreparedImage*>& images);

struct EncodeOptions {
  int max_batch = 4;      // images per encoder call
  int max_wait_ms = 10;   // how long the first image of a batch waits for companions
  int max_queue = 16;     // images waiting (not counting the batch being encoded); beyond: Overloaded
};

class EncodeBatcher {
 public:
  using Result = std::shared_ptr<const ImageEmbedding>;
  // Called on the worker thread for every finished image before its waiters are woken, so that
  // the result is in the cache before the key leaves the in-flight set (no window where a new
  // request would find it in neither and encode it again).
  using OnEncoded = std::function<void(const std::string& key, const Result& embedding)>;

  EncodeBatcher(std::shared_ptr<const SamModel> model, EncodeOptions options, Metrics& metrics, OnEncoded on_encoded);
  ~EncodeBatcher();  // finishes the batch being encoded; queued requests fail with Overloaded
  EncodeBatcher(const EncodeBatcher&) = delete;
  EncodeBatcher& operator=(const EncodeBatcher&) = delete;

  // The result for `key` if it is queued or being encoded right now.
  std::optional<std::shared_future<Result>> find(const std::string& key) const;
  // Queues an image (or joins the identical one in flight). Throws Overloaded when full.
  std::shared_future<Result> submit(const std::string& key, std::shared_ptr<const PreparedImage> image);

  size_t queue_depth() const;  // waiting, not yet in an encoder call
  size_t encoding() const;     // in the encoder call running now
  const EncodeOptions& options() const { return options_; }

  // Holds the worker before it takes the next batch (tests use it to fill the queue on purpose).
  void set_paused(bool paused);

 private:
  struct Job {
    std::string key;
    std::shared_ptr<const PreparedImage> image;
    std::promise<Result> promise;
    std::chrono::steady_clock::time_point enqueued;
  };
  void run();

  std::shared_ptr<const SamModel> model_;
  EncodeOptions options_;
  Metrics& metrics_;
  OnEncoded on_encoded_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::map<std::string, std::shared_future<Result>> in_flight_;  // queued or encoding
  size_t encoding_ = 0;
  bool paused_ = false, stop_ = false;
  std::thread worker_;
};

}  // namespace vitrt::server
