// The mask decoder's CUDA-graph cache; see decoder_graph.h.
#include "models/sam/decoder_graph.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/device_memory.h"
#include "models/sam/sam_model.h"
#include "ops/ops.h"
#include "vitrt/error.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace vitrt::sam {

DecoderGraphs::DecoderGraphs() : cache_(std::make_unique<DecoderGraphCache>()) {}
DecoderGraphs::DecoderGraphs(const DecoderGraphs&) : DecoderGraphs() {}
DecoderGraphs& DecoderGraphs::operator=(const DecoderGraphs& other) {
  if (this != &other) cache_ = std::make_unique<DecoderGraphCache>();
  return *this;
}
DecoderGraphs::~DecoderGraphs() = default;

namespace {
bool enabled_by_environment() {
  const char* v = std::getenv("VITRT_DECODER_GRAPH");
  return !(v && std::strcmp(v, "0") == 0);
}
}  // namespace

DecoderGraphCache::DecoderGraphCache() : enabled_(enabled_by_environment()) {}

bool DecoderGraphCache::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}
void DecoderGraphCache::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = on;
}
DecoderGraphCache::Stats DecoderGraphCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.entries = entries_.size();
  return s;
}

#ifndef VITRT_HAVE_CUDA

struct DecoderGraphCache::Entry {};
DecoderGraphCache::~DecoderGraphCache() = default;
void DecoderGraphCache::clear() {}
std::shared_ptr<DecoderGraphCache::Entry> DecoderGraphCache::acquire(const Key&) { return nullptr; }
void DecoderGraphCache::run(const DecoderGraphCall&, const DeviceWork&, Tensor&, Tensor&) {
  throw Error("the mask decoder's CUDA graphs are not available: this vitrt build has no CUDA backend");
}

#else

struct DecoderGraphCache::Entry {
  std::mutex mu;  // one call at a time (an entry belongs to one stream; this also covers misuse)
  // Inputs the graph reads and outputs it writes, at fixed addresses.
  Tensor tokens;  // [B, T, out] float32
  Tensor images;  // [I, out, g, g]
  Tensor masks;   // [B, num_masks, plane]
  Tensor iou;     // [B, M]
  bool ran_eagerly = false;
  bool capture_failed = false;
  // Recorded on the entry's stream after the last work that used the buffers.
  cudaEvent_t last_use = nullptr;
  // Declared last, so destroyed first.
  cuda::Graph graph;

  ~Entry() {
    // An entry may be dropped by another thread (eviction, clear(), the model's destruction), and
    // its buffers are then freed in that thread's stream order. So first wait, on the host, for
    // the last work that used them on the entry's own stream -- an event, not that stream, which
    // may be capturing another graph meanwhile (no other thread may synchronise or enqueue on it).
    if (last_use) {
      cudaEventSynchronize(last_use);
      cudaEventDestroy(last_use);
    }
  }
};

DecoderGraphCache::~DecoderGraphCache() = default;

void DecoderGraphCache::clear() {
  std::list<std::pair<Key, std::shared_ptr<Entry>>> dropped;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  dropped.swap(entries_);
}

std::shared_ptr<DecoderGraphCache::Entry> DecoderGraphCache::acquire(const Key& key) {
  std::shared_ptr<Entry> evicted;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == key) {
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      return it->second;
    }
  }
  auto e = std::make_shared<Entry>();
  entries_.emplace_front(key, e);
  if (entries_.size() > kCapacity) {
    // A call still using the evicted entry keeps it alive until it returns.
    evicted = std::move(entries_.back().second);
    entries_.pop_back();
    ++stats_.evictions;
  }
  return e;
}

void DecoderGraphCache::run(const DecoderGraphCall& call, const DeviceWork& work, Tensor& masks_out,
                            Tensor& iou_out) {
  const DecoderGraphShape& s = call.shape;
  VITRT_CHECK(s.batch > 0 && call.tokens_host.defined() && !call.tokens_host.is_cuda() &&
                  call.tokens_host.dtype() == DType::F32 && call.tokens_host.dim() == 3 &&
                  call.tokens_host.size(0) == s.batch && call.tokens_host.size(1) == s.tokens &&
                  call.images.size() == s.prompts_per_image.size() && !call.images.empty(),
              InvalidArgument, "decoder graph: inconsistent call");
  const cudaStream_t stream = cuda::current_stream();
  const std::shared_ptr<Entry> entry = acquire(Key{stream, s});
  Entry& e = *entry;
  std::lock_guard<std::mutex> lock(e.mu);

  const Tensor& image0 = call.images.front();
  const int64_t num_images = static_cast<int64_t>(call.images.size());
  if (!e.tokens.defined()) {  // allocated on this stream, which the entry belongs to
    e.tokens = Tensor::empty(call.tokens_host.shape(), DType::F32, Device::CUDA);
    e.images = Tensor::empty({num_images, image0.size(1), image0.size(2), image0.size(3)}, call.dtype, Device::CUDA);
    e.masks = Tensor::empty({s.batch, s.num_masks, call.plane}, call.dtype, Device::CUDA);
    e.iou = Tensor::empty({s.batch, call.num_mask_tokens}, call.dtype, Device::CUDA);
    VITRT_CUDA_CHECK(cudaEventCreateWithFlags(&e.last_use, cudaEventDisableTiming));
  }
  // However this call ends, mark the buffers' last use on this stream (see Entry::~Entry).
  struct MarkLastUse {
    cudaEvent_t event;
    cudaStream_t stream;
    ~MarkLastUse() { cudaEventRecord(event, stream); }
  } mark_last_use{e.last_use, stream};

  // This call's inputs into the buffers the graph reads: the tokens from the host (a synchronous
  // copy, ordered after any launch still reading the buffer), the images device to device.
  devmem::copy(e.tokens.raw(), Device::CUDA, call.tokens_host.raw(), Device::CPU, call.tokens_host.nbytes());
  const size_t image_bytes = e.images.nbytes() / static_cast<size_t>(num_images);
  for (int64_t i = 0; i < num_images; ++i) {
    const Tensor& img = call.images[i];
    VITRT_CHECK(img.is_cuda() && img.dtype() == call.dtype && img.nbytes() == image_bytes, InvalidArgument,
                "decoder graph: image ", i, " is not a device [1, out, g, g] tensor of the decoder's dtype");
    devmem::copy_rows(static_cast<char*>(e.images.raw()) + i * image_bytes, image_bytes, img.raw(), image_bytes,
                      image_bytes, 1, Device::CUDA);
  }

  // The decoder, then its results into the output buffers: the requested mask planes of each
  // prompt (one strided copy), the IoU predictions. Every temporary dies inside.
  const size_t es = dtype_size(call.dtype);
  auto body = [&] {
    Tensor masks, iou;
    work(e.images, e.tokens, masks, iou);
    VITRT_CHECK(masks.nbytes() == static_cast<size_t>(s.batch * call.num_mask_tokens * call.plane) * es &&
                    iou.nbytes() == e.iou.nbytes() && masks.dtype() == call.dtype && iou.dtype() == call.dtype,
                Error, "decoder graph: the decoder returned ", shape_str(masks.shape()), " masks and ",
                shape_str(iou.shape()), " iou, not what the call describes");
    const size_t plane_bytes = static_cast<size_t>(call.plane) * es;
    devmem::copy_rows(e.masks.raw(), s.num_masks * plane_bytes,
                      static_cast<const char*>(masks.raw()) + s.first_mask * plane_bytes,
                      call.num_mask_tokens * plane_bytes, s.num_masks * plane_bytes, s.batch, Device::CUDA);
    devmem::copy_rows(e.iou.raw(), e.iou.nbytes(), iou.raw(), iou.nbytes(), iou.nbytes(), 1, Device::CUDA);
  };

  enum class Mode { Eager, Capture, Replay } mode = Mode::Eager;
  if (e.graph.ready())
    mode = Mode::Replay;
  else if (e.ran_eagerly && !e.capture_failed)
    mode = Mode::Capture;

  if (mode == Mode::Capture) {
    try {
      e.graph.capture(body);
    } catch (const std::exception& ex) {
      e.capture_failed = true;
      std::fprintf(stderr,
                   "vitrt: capturing the mask decoder as a CUDA graph failed (%s); this batch shape runs "
                   "eagerly from now on\n",
                   ex.what());
      std::lock_guard<std::mutex> stats_lock(mu_);
      ++stats_.capture_failures;
    }
    if (!e.graph.ready()) mode = Mode::Eager;
  }
  if (mode == Mode::Eager) {
    body();
    e.ran_eagerly = true;
  } else {
    e.graph.launch();
  }
  {
    std::lock_guard<std::mutex> stats_lock(mu_);
    if (mode == Mode::Eager) ++stats_.eager_runs;
    if (mode == Mode::Capture) ++stats_.captures;
    if (mode != Mode::Eager) ++stats_.replays;
  }
  // Fresh copies for the caller: the entry's buffers are overwritten by the next call.
  masks_out = ops::copy(e.masks);
  iou_out = ops::copy(e.iou);
}

#endif  // VITRT_HAVE_CUDA

}  // namespace vitrt::sam
