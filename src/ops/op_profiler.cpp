#include "ops/op_profiler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace vitrt::ops::profiler {

namespace {
std::atomic<bool> g_enabled{false};

#ifdef VITRT_HAVE_CUDA
struct Record {
  std::string label;
  cudaEvent_t start = nullptr, stop = nullptr;
};
std::mutex g_mutex;
std::vector<Record> g_records;
#endif
}  // namespace

void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }

#ifdef VITRT_HAVE_CUDA

Scope::Scope(std::string label) {
  if (label.empty()) return;
  Record r;
  r.label = std::move(label);
  VITRT_CUDA_CHECK(cudaEventCreate(&r.start));
  VITRT_CUDA_CHECK(cudaEventCreate(&r.stop));
  VITRT_CUDA_CHECK(cudaEventRecord(r.start, cuda::current_stream()));
  std::lock_guard<std::mutex> lock(g_mutex);
  slot_ = static_cast<int>(g_records.size());
  g_records.push_back(std::move(r));
}

Scope::~Scope() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  // A failed record only loses this sample; a destructor must not throw.
  if (slot_ < static_cast<int>(g_records.size())) cudaEventRecord(g_records[slot_].stop, cuda::current_stream());
}

std::vector<Entry> take() {
  std::vector<Record> records;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    records.swap(g_records);
  }
  cuda::synchronize();
  std::map<std::string, Entry> by_label;
  for (Record& r : records) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, r.start, r.stop) == cudaSuccess) {
      Entry& e = by_label[r.label];
      e.label = r.label;
      e.calls += 1;
      e.ms += ms;
    }
    cudaEventDestroy(r.start);
    cudaEventDestroy(r.stop);
  }
  std::vector<Entry> out;
  for (auto& [label, e] : by_label) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.ms > b.ms; });
  return out;
}

#else  // no CUDA backend: nothing is ever recorded

Scope::Scope(std::string) {}
Scope::~Scope() = default;
std::vector<Entry> take() { return {}; }

#endif

}  // namespace vitrt::ops::profiler
