// CUDA graphs of the mask decoder's GPU work (MaskDecoder::forward_shared_dense: prompts without a
// mask input -- clicks, boxes, the automatic mask generator's grid).
//
// Why: the decoder of 64 prompts is ~150 small kernels; launched one by one from the host they
// leave the GPU idle between them (4.6 ms per call against 3.8 ms of kernel time on an H200). A
// graph replays the same launches back to back.
//
// What a graph holds: the decoder's device work (MaskDecoder::forward_device) from two input
// buffers -- the prompt tokens [B, T, out] (float32) and the images [I, out, g, g] -- to two output
// buffers -- the requested mask planes [B, K, 4g, 4g] and the IoU predictions [B, M] -- all owned
// by the cache entry, at fixed addresses. Per call, outside the graph: the tokens are uploaded
// and the images copied (device to device) into the input buffers, the graph is launched, and the
// outputs are copied into fresh tensors for the caller (who may keep them as long as it likes;
// the entry's buffers are overwritten by the next call). The weights, image_pe and the shared
// dense embedding are read in place. Every temporary of the decoder is allocated and freed inside
// the graph (graph memory, kept reserved by the graph between launches).
//
// Key: the stream (cuda::current_stream(), one per host thread: the entry's buffers and graph are
// used on that stream only), the batch B and tokens per prompt T, the prompts per image, the mask
// planes returned, and the addresses of image_pe and the dense embedding. The image features are
// copied in, not keyed on: a new predictor, image or embedding upload of the same shape replays
// the same graph.
//
// Policy: the first call of a key runs the same work eagerly (through the entry's buffers), which
// makes cuBLASLt's plans and per-stream workspace for every GEMM shape; the second captures the
// graph and launches it; later ones launch it. A capture that fails (an operation that cannot be
// captured) is reported once on stderr and that key runs eagerly from then on (stats() counts it).
//
// Bound: at most kCapacity entries per model, the least recently used dropped first, so a server
// seeing many batch shapes does not grow. Each entry keeps its graph's working memory reserved
// between launches (about what the eager forward of that shape peaks at; the largest for the
// generator's 256-prompt batches) besides its small buffers. A dropped entry's graph memory goes
// back to CUDA's graph-memory cache, where later graphs reuse it.
//
// VITRT_DECODER_GRAPH=0 in the environment (read when a model is created or copied) turns graphs
// off, for A/B timing and debugging; set_enabled() does the same per model. While the op profiler
// (ops/op_profiler.h) is on, the decoder runs eagerly.
//
// Thread safety: SamModel may be shared by the server's threads. One mutex guards the cache's list
// and counters, one per entry a call. An entry may be dropped by another thread (eviction,
// clear(), the model's destruction): it then waits, on the host, for an event recorded after its
// last use on its own stream before its buffers are freed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "vitrt/tensor.h"

namespace vitrt::sam {

// Everything of a decoder call that fixes its launches and the addresses its graph reads, except
// the stream (added by the cache).
struct DecoderGraphShape {
  int64_t batch = 0;                       // B prompts
  int64_t tokens = 0;                      // T tokens per prompt: the output tokens and the sparse ones
  std::vector<int64_t> prompts_per_image;  // the images with prompts, in order; sums to B
  int64_t first_mask = 0, num_masks = 0;   // the mask planes returned
  const void* image_pe = nullptr;          // read in place by the graph
  const void* dense = nullptr;             // the shared dense embedding, read in place
  bool operator==(const DecoderGraphShape&) const = default;
};

// One decoder call through the cache.
struct DecoderGraphCall {
  DecoderGraphShape shape;
  Tensor tokens_host;          // [B, T, out] float32 on the CPU, uploaded before the launch
  std::vector<Tensor> images;  // one [1, out, g, g] per entry of prompts_per_image, on the device
  DType dtype = DType::F32;    // the decoder's (images, masks, iou)
  int64_t num_mask_tokens = 0;  // M: mask planes the decoder computes per prompt
  int64_t plane = 0;            // elements of one low-res mask plane, (4g)^2
};

class DecoderGraphCache {
 public:
  static constexpr size_t kCapacity = 8;

  struct Stats {
    int64_t eager_runs = 0;        // first calls of a key (and keys whose capture failed)
    int64_t captures = 0;          // graphs captured and instantiated
    int64_t replays = 0;           // graph launches (a capture's first launch included)
    int64_t capture_failures = 0;
    int64_t evictions = 0;
    size_t entries = 0;
  };

  // The decoder's device work: from the images [I, out, g, g] and tokens [B, T, out] to all mask
  // planes [B, M, plane] and the IoU predictions [B, M], on the current stream, with no host
  // synchronisation (it runs eagerly on a key's first call and is captured on its second).
  using DeviceWork = std::function<void(const Tensor& images, const Tensor& tokens, Tensor& masks, Tensor& iou)>;

  DecoderGraphCache();  // enabled unless VITRT_DECODER_GRAPH=0
  ~DecoderGraphCache();
  DecoderGraphCache(const DecoderGraphCache&) = delete;
  DecoderGraphCache& operator=(const DecoderGraphCache&) = delete;

  bool enabled() const;
  void set_enabled(bool on);
  Stats stats() const;
  void clear();  // drops every graph and buffer (waits for their last use first)

  // Runs `work` for `call` on the current stream (eagerly, capturing, or as a graph launch; see
  // the file comment). masks: [B, num_masks, plane], iou: [B, M], fresh device tensors of
  // call.dtype.
  void run(const DecoderGraphCall& call, const DeviceWork& work, Tensor& masks, Tensor& iou);

 private:
  struct Entry;
  struct Key {
    const void* stream = nullptr;
    DecoderGraphShape shape;
    bool operator==(const Key&) const = default;
  };
  std::shared_ptr<Entry> acquire(const Key& key);

  mutable std::mutex mu_;
  bool enabled_ = true;
  std::list<std::pair<Key, std::shared_ptr<Entry>>> entries_;  // most recently used first
  Stats stats_;
};

}  // namespace vitrt::sam
