// `vitrt serve`: SAM over HTTP/JSON, the way annotation tools use it — an image is encoded once
// (POST /v1/embed, cached by content hash in an LRU bounded in bytes) and every click is a cheap
// decode against the cached embedding (POST /v1/segment). The endpoints, their JSON and their
// error codes are described in src/server/API.md; the click-to-segment page is served at /.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "server/classify_batcher.h"
#include "server/encode_batcher.h"
#include "vitrt/sam.h"
#include "vitrt/vit.h"

namespace vitrt::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see SamServer::port())

  // Transport limits.
  int http_threads = 64;                    // connections served at once; more wait for a thread
  size_t max_body_bytes = 32u << 20;        // larger bodies: 413
  int64_t max_image_pixels = 50'000'000;    // larger images: 400 before any pixel is allocated
  int read_timeout_s = 10, write_timeout_s = 10;  // a stalled client frees its thread after this
  int max_points = 64;                      // prompt points per request

  // Compute.
  EncodeOptions encode;                     // batching and the bound of the encode queue
  int encode_timeout_s = 120;               // a request waits this long for its embedding (then 503)
  int decode_workers = 1;                   // threads running decodes (each an OpenMP team)
  int decode_threads = 0;                   // OpenMP threads per decode worker; 0 = the default
  int decode_queue = 256;                   // decodes waiting beyond this: 503
  int decode_timeout_s = 30;

  // Caches (bytes).
  size_t embedding_cache_bytes = size_t(1) << 30;  // ~256 vit_b embeddings (4 MiB each)
  size_t logits_cache_bytes = size_t(64) << 20;    // low-res logits kept for mask_input_id (~85 clicks)

  // The ViT classifier behind POST /v1/classify (vitrt serve --vit-checkpoint), and its class names
  // (empty: classes by index only). Null: that endpoint answers 404. Images of concurrent requests
  // run as one batch (ClassifyBatcher: up to classify.max_batch, waiting classify.max_wait_ms for
  // companions; more than classify.max_queue waiting: 503), each within decode_timeout_s.
  std::shared_ptr<const VitModel> classifier;
  std::vector<std::string> class_names;
  ClassifyOptions classify;

  bool access_log = false;  // one line per request on stderr
  // Keep freed heap memory for reuse while requests come (glibc's default returns it to the
  // system at once, so every click page-faults its tens of MB of tensors in again: about a third
  // of a vit_b click), and hand it back (malloc_trim) once the server has been idle this long,
  // or every 15 such intervals under steady load. Process-wide malloc settings; false leaves
  // glibc's defaults. trim_idle_ms 0: never trim.
  bool tune_malloc = true;
  int trim_idle_ms = 2000;
};

class SamServer {
 public:
  SamServer(std::shared_ptr<const SamModel> model, ServerOptions options);
  ~SamServer();  // stops serving and joins the background thread, if any
  SamServer(const SamServer&) = delete;
  SamServer& operator=(const SamServer&) = delete;

  // Binds options.host:options.port (port 0: a free one) and returns the port. Throws IoError.
  int bind();
  // Serves on the bound socket until stop(); binds first if bind() was not called.
  void listen();
  // bind() + listen() on a background thread; returns the port once requests are accepted.
  int start();
  // Stops accepting and returns once listen() has; safe from any thread, idempotent.
  void stop();
  int port() const;

  // The encode queue (tests pause it to fill the queue deterministically).
  EncodeBatcher& encoder();
  // The classify queue; throws InvalidArgument when no classifier is loaded.
  ClassifyBatcher& classifier_queue();
  // Prometheus text, as served at /metrics.
  std::string metrics_text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether this build has "segment everything" (POST /v1/everything); 501 otherwise.
bool everything_available();

}  // namespace vitrt::server
