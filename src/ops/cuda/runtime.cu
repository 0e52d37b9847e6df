#include "ops/cuda/runtime.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/device_memory.h"

namespace vitrt::cuda {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  if (e == cudaErrorMemoryAllocation)
    throw OutOfMemory(detail::concat("CUDA out of memory (", what, ")"));
  throw Error(detail::concat("CUDA error in ", what, ": ", cudaGetErrorString(e)));
}

namespace {
__global__ void vector_add_kernel(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

thread_local cudaStream_t tls_stream = nullptr;

cudaMemPool_t pool() {
  static cudaMemPool_t p = [] {
    cudaMemPool_t mp;
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetDefaultMemPool(&mp, dev), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;  // keep freed memory in the pool instead of returning it to the driver
    check(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    return mp;
  }();
  return p;
}
}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver" error
    return 0;
  }
  return n;
}

std::string device_description(int index) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  return detail::concat(p.name, ", sm_", p.major, p.minor, ", ", p.totalGlobalMem >> 30, " GiB, ", p.multiProcessorCount,
                        " SMs");
}

int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    return v;
  }();
  return n;
}

double peak_memory_gbps() {
  static const double v = [] {
    int dev = 0, khz = 0, bits = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev), "cudaDeviceGetAttribute");
    return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;  // double data rate
  }();
  return v;
}

bool device_is_sm90() {
  static const bool v = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;
  }();
  return v;
}

cudaStream_t current_stream() {
  if (!tls_stream) check(cudaStreamCreateWithFlags(&tls_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return tls_stream;
}
void set_current_stream(cudaStream_t s) { tls_stream = s; }
void synchronize() { check(cudaStreamSynchronize(current_stream()), "cudaStreamSynchronize"); }

size_t peak_bytes_in_use() {
  uint64_t v = 0;
  check(cudaMemPoolGetAttribute(pool(), cudaMemPoolAttrUsedMemHigh, &v), "cudaMemPoolGetAttribute");
  return v;
}
void reset_peak_bytes() {
  uint64_t zero = 0;
  check(cudaMemPoolSetAttribute(pool(), cudaMemPoolAttrUsedMemHigh, &zero), "cudaMemPoolSetAttribute");
}

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}
void Graph::begin_capture() {
  check(cudaStreamBeginCapture(current_stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}
void Graph::abort_capture() {
  cudaGraph_t g = nullptr;
  cudaStreamEndCapture(current_stream(), &g);
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
}
void Graph::end_capture() {
  check(cudaStreamEndCapture(current_stream(), &graph_), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec_, graph_, cudaGraphInstantiateFlagAutoFreeOnLaunch), "cudaGraphInstantiate");
}
void Graph::launch() {
  if (!exec_) throw Error("cuda::Graph::launch before capture");
  check(cudaGraphLaunch(exec_, current_stream()), "cudaGraphLaunch");
}

EventTimer::EventTimer() {
  check(cudaEventCreate(&a_), "cudaEventCreate");
  check(cudaEventCreate(&b_), "cudaEventCreate");
}
EventTimer::~EventTimer() {
  cudaEventDestroy(a_);
  cudaEventDestroy(b_);
}
void EventTimer::start() { check(cudaEventRecord(a_, current_stream()), "cudaEventRecord"); }
float EventTimer::stop_ms() {
  check(cudaEventRecord(b_, current_stream()), "cudaEventRecord");
  check(cudaEventSynchronize(b_), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
  return ms;
}

size_t graph_peak_bytes() {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  uint64_t v = 0;
  check(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemHigh, &v), "cudaDeviceGetGraphMemAttribute");
  return v;
}
void reset_graph_peak_bytes() {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  uint64_t zero = 0;
  check(cudaDeviceSetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemHigh, &zero), "cudaDeviceSetGraphMemAttribute");
}

void vector_add(const float* a, const float* b, float* out, int n) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  auto da = devmem::cuda_alloc(bytes), db = devmem::cuda_alloc(bytes), dc = devmem::cuda_alloc(bytes);
  devmem::copy(da.get(), Device::CUDA, a, Device::CPU, bytes);
  devmem::copy(db.get(), Device::CUDA, b, Device::CPU, bytes);
  vector_add_kernel<<<(n + 255) / 256, 256, 0, current_stream()>>>(static_cast<float*>(da.get()),
                                                                   static_cast<float*>(db.get()),
                                                                   static_cast<float*>(dc.get()), n);
  check(cudaGetLastError(), "vector_add launch");
  devmem::copy(out, Device::CPU, dc.get(), Device::CUDA, bytes);
}

}  // namespace vitrt::cuda

namespace vitrt::devmem {

bool cuda_available() { return cuda::device_count() > 0; }

std::shared_ptr<void> cuda_alloc(size_t bytes) {
  void* p = nullptr;
  cuda::pool();
  cudaStream_t s = cuda::current_stream();
  cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, s);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw cuda::OutOfMemory(detail::concat("CUDA out of memory allocating ", bytes, " bytes"));
  }
  cuda::check(e, "cudaMallocAsync");
  // Freed on the stream current at release time; stream order keeps pending kernels safe.
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeAsync(q, cuda::current_stream()); });
}

void copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) {
  if (dd == Device::CPU && sd == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cudaStream_t s = cuda::current_stream();
  cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void memset_zero(void* dst, Device dev, size_t bytes) {
  if (dev == Device::CPU) {
    std::memset(dst, 0, bytes);
    return;
  }
  cuda::check(cudaMemsetAsync(dst, 0, bytes, cuda::current_stream()), "cudaMemsetAsync");
}

void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows,
               Device dev) {
  if (rows == 0 || row_bytes == 0) return;
  if (dev == Device::CPU) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
    return;
  }
  cuda::check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                                cuda::current_stream()),
              "cudaMemcpy2DAsync");
}

}  // namespace vitrt::devmem
