// CUDA backend runtime: device discovery, error translation, the current stream, stream-ordered
// memory (a cudaMallocAsync pool, so steady-state forwards never call the driver to allocate and
// allocations can sit inside CUDA-graph captures), and memory statistics.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "vitrt/error.h"

namespace vitrt::cuda {

// Throws vitrt::Error (or OutOfMemory) naming `what` when `e` is not cudaSuccess.
void check(cudaError_t e, const char* what);
#define VITRT_CUDA_CHECK(expr) ::vitrt::cuda::check((expr), #expr)

class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int device_count();
// "NVIDIA H200, sm_90, 139 GiB" for device `index`; throws vitrt::Error on failure.
std::string device_description(int index);
int sm_count();
// The current device's peak memory bandwidth in GB/s (2 x memory clock x bus width; H100 SXM ~3350,
// H200 ~4800), read once; for defaults that were measured to differ between such cards.
double peak_memory_gbps();
// Whether the current device is compute capability 9.0, where the sm_90a (wgmma) kernels run (read once).
bool device_is_sm90();

// The stream every vitrt kernel of this host thread is launched on (created on first use).
cudaStream_t current_stream();
void set_current_stream(cudaStream_t s);
void synchronize();

// Pool statistics (bytes): high-water mark of memory in use since the last reset.
size_t peak_bytes_in_use();
void reset_peak_bytes();

// A CUDA graph captured from everything `body` launches on the current stream. The body must not
// synchronise with the host or allocate outside the stream-ordered pool; run it once eagerly first
// so libraries (cuBLASLt) have made their plans and workspaces.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  template <class F>
  void capture(F&& body) {
    begin_capture();
    try {
      body();
    } catch (...) {
      abort_capture();
      throw;
    }
    end_capture();
  }
  void launch();
  bool ready() const { return exec_ != nullptr; }

 private:
  void begin_capture();
  void end_capture();
  void abort_capture();
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Milliseconds of device time between two points on the current stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  void start();
  float stop_ms();  // synchronises

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// Bytes in use at the high-water mark by CUDA-graph allocations since the last reset.
size_t graph_peak_bytes();
void reset_graph_peak_bytes();

// Adds two float vectors on the GPU (used by the gpu test to prove the toolchain end to end).
void vector_add(const float* a, const float* b, float* out, int n);

}  // namespace vitrt::cuda
