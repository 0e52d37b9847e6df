// A read-only view of a whole file through mmap, shared by the tensors that point into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace vitrt::io {

class MappedFile {
 public:
  // Maps `path` in full. Throws IoError if it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

  // Tensor storage wants a mutable pointer; the mapping is copy-on-write (MAP_PRIVATE), so a
  // stray write changes this process's copy of a page, never the file.
  void* mutable_at(size_t offset) const { return const_cast<uint8_t*>(data_) + offset; }

 private:
  MappedFile() = default;
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vitrt::io
