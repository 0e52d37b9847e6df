// Prometheus metrics of the server, rendered as the text exposition format (version 0.0.4) at
// GET /metrics. Counters and histograms are updated by the request handlers and the encode
// worker; gauges (queue depths, cache sizes, memory) are read when the page is rendered.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vitrt::server {

// A cumulative histogram with fixed upper bounds (plus +Inf), thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends "<name>_bucket{<labels>le=...} n" lines, _sum and _count. `labels` is either empty or
  // `key="value",` pairs each followed by a comma.
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// Process resident memory (VmRSS) in bytes, 0 when /proc is not readable.
uint64_t resident_memory_bytes();

class Metrics {
 public:
  Metrics();

  // One answered HTTP request: endpoint is the route ("/v1/segment", or "other"), status the code.
  void observe_request(const std::string& endpoint, int status, double seconds);
  void observe_encode_batch(int batch_size, double seconds);
  void observe_decode(double seconds);
  // A request refused because a bounded queue was full ("encode", "decode", "everything").
  void count_rejection(const std::string& queue);

  // Everything above, in the exposition format. `gauges` are (name with labels, value, help)
  // lines appended as gauges by the server (queue depths, cache, memory).
  struct Gauge {
    std::string name;    // metric name, e.g. vitrt_cache_bytes
    std::string labels;  // e.g. cache="embeddings" (no braces), may be empty
    double value;
    std::string help;
  };
  std::string render(const std::vector<Gauge>& gauges) const;

  uint64_t encode_batches() const { return encode_batches_.load(); }
  uint64_t encoded_images() const { return encoded_images_.load(); }
  uint64_t max_batch_seen() const { return max_batch_seen_.load(); }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // per endpoint
  std::map<std::string, uint64_t> rejections_;
  Histogram encode_seconds_, decode_seconds_, batch_size_;
  std::atomic<uint64_t> encode_batches_{0}, encoded_images_{0}, max_batch_seen_{0};
};

}  // namespace vitrt::server
