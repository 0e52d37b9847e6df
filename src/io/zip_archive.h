// Minimal zip reader for torch.save archives: parses the central directory (zip64 included) and
// hands out the byte range of each stored entry inside the mapped file, so storages can be used
// in place. Every offset and length is checked against the file size.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"

namespace vitrt::io {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;          // 0 = stored; anything else is compressed
  uint64_t compressed_size = 0;
  uint64_t size = 0;            // uncompressed
  uint64_t data_offset = 0;     // first byte of the entry's data in the file
};

class ZipArchive {
 public:
  // Throws CheckpointError when the archive is truncated or inconsistent.
  explicit ZipArchive(std::shared_ptr<const MappedFile> file);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;
  // The bytes of a stored entry; CheckpointError for a compressed one.
  std::span<const uint8_t> stored_data(const ZipEntry& entry) const;
  const MappedFile& file() const { return *file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in entries_
};

}  // namespace vitrt::io
