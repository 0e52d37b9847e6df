#include "server/metrics.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace vitrt::server {

namespace {

const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,     10,    30,   60};

std::string fmt_double(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mu_);
  return n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? fmt_double(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + "le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  std::string l = labels;
  if (!l.empty() && l.back() == ',') l.pop_back();
  const std::string braces = l.empty() ? "" : "{" + l + "}";
  out += name + "_sum" + braces + " " + fmt_double(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(n_) + "\n";
}

uint64_t resident_memory_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream is(line.substr(6));
      uint64_t kb = 0;
      is >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

Metrics::Metrics()
    : encode_seconds_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      decode_seconds_(kLatencyBounds),
      batch_size_({1, 2, 3, 4, 6, 8, 12, 16, 32}) {}

void Metrics::observe_request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
  latency_.try_emplace(endpoint, kLatencyBounds).first->second.observe(seconds);
}

void Metrics::observe_encode_batch(int batch_size, double seconds) {
  encode_seconds_.observe(seconds);
  batch_size_.observe(batch_size);
  ++encode_batches_;
  encoded_images_ += batch_size;
  uint64_t prev = max_batch_seen_.load();
  while (static_cast<uint64_t>(batch_size) > prev && !max_batch_seen_.compare_exchange_weak(prev, batch_size)) {
  }
}

void Metrics::observe_decode(double seconds) { decode_seconds_.observe(seconds); }

void Metrics::count_rejection(const std::string& queue) {
  std::lock_guard lock(mu_);
  ++rejections_[queue];
}

std::string Metrics::render(const std::vector<Gauge>& gauges) const {
  std::string out;
  {
    std::lock_guard lock(mu_);
    header(out, "vitrt_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : requests_)
      out += "vitrt_http_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
    header(out, "vitrt_http_request_duration_seconds", "histogram",
           "Time from the request being read to the answer being ready, by endpoint.");
    for (const auto& [endpoint, h] : latency_)
      h.render(out, "vitrt_http_request_duration_seconds", "endpoint=\"" + endpoint + "\",");
    header(out, "vitrt_rejected_total", "counter", "Requests answered 503 because a bounded queue was full.");
    for (const char* q : {"encode", "decode", "everything"}) {
      auto it = rejections_.find(q);
      out += std::string("vitrt_rejected_total{queue=\"") + q + "\"} " +
             std::to_string(it == rejections_.end() ? 0 : it->second) + "\n";
    }
  }
  header(out, "vitrt_encode_batches_total", "counter", "Image-encoder calls (each encodes a batch).");
  out += "vitrt_encode_batches_total " + std::to_string(encode_batches_.load()) + "\n";
  header(out, "vitrt_encoded_images_total", "counter", "Images run through the image encoder.");
  out += "vitrt_encoded_images_total " + std::to_string(encoded_images_.load()) + "\n";
  header(out, "vitrt_encode_batch_size", "histogram", "Images per image-encoder call.");
  batch_size_.render(out, "vitrt_encode_batch_size", "");
  header(out, "vitrt_encode_duration_seconds", "histogram", "Duration of one image-encoder call (whole batch).");
  encode_seconds_.render(out, "vitrt_encode_duration_seconds", "");
  header(out, "vitrt_decode_duration_seconds", "histogram", "Prompt encoding + mask decoding + post-processing of one request.");
  decode_seconds_.render(out, "vitrt_decode_duration_seconds", "");

  std::set<std::string> seen;
  for (const Gauge& g : gauges) {
    if (seen.insert(g.name).second) header(out, g.name, "gauge", g.help);
    out += g.name + (g.labels.empty() ? "" : "{" + g.labels + "}") + " " + fmt_double(g.value) + "\n";
  }
  return out;
}

}  // namespace vitrt::server
