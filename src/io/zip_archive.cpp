#include "io/zip_archive.h"


#include "vitrt/error.h"

namespace vitrt::io {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndRecordSize = 22;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;

// Bounds-checked little-endian reads from the mapped file.
class Reader {
 public:
  Reader(const MappedFile& f) : f_(f) {}
  void need(uint64_t offset, uint64_t len, const char* what) const {
    VITRT_CHECK(offset <= f_.size() && len <= f_.size() - offset, CheckpointError, "zip archive '", f_.path(),
                "': ", what, " at offset ", offset, " (+", len, " bytes) lies past the end of the ", f_.size(),
                "-byte file (truncated or corrupt)");
  }
  uint64_t le(uint64_t offset, int bytes) const {
    need(offset, bytes, "field");
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | f_.data()[offset + i];
    return v;
  }
  uint16_t u16(uint64_t o) const { return static_cast<uint16_t>(le(o, 2)); }
  uint32_t u32(uint64_t o) const { return static_cast<uint32_t>(le(o, 4)); }
  uint64_t u64(uint64_t o) const { return le(o, 8); }

 private:
  const MappedFile& f_;
};

struct Directory {
  uint64_t count, offset, size;
};

// Locates the (zip64) end of central directory record. The classic record sits in the last
// 22 + 65535 bytes (its comment can be that long); zip64 archives put a locator right before it.
Directory find_directory(const MappedFile& f, const Reader& r) {
  const size_t n = f.size();
  VITRT_CHECK(n >= kEndRecordSize, CheckpointError, "zip archive '", f.path(), "' is only ", n,
              " bytes: truncated");
  size_t lowest = n > kEndRecordSize + 0xFFFF ? n - kEndRecordSize - 0xFFFF : 0;
  size_t eocd = SIZE_MAX;
  for (size_t pos = n - kEndRecordSize + 1; pos-- > lowest;) {
    if (r.u32(pos) == kEndOfCentralDirSig) { eocd = pos; break; }
  }
  VITRT_CHECK(eocd != SIZE_MAX, CheckpointError, "zip archive '", f.path(),
              "': end of central directory not found (truncated file?)");
  Directory d{r.u16(eocd + 10), r.u32(eocd + 16), r.u32(eocd + 12)};
  if (eocd >= 20 && r.u32(eocd - 20) == kZip64LocatorSig) {
    uint64_t rec = r.u64(eocd - 20 + 8);
    r.need(rec, 56, "zip64 end of central directory");
    VITRT_CHECK(r.u32(rec) == kZip64EndSig, CheckpointError, "zip archive '", f.path(),
                "': zip64 end of central directory record is missing or corrupt");
    d = {r.u64(rec + 32), r.u64(rec + 48), r.u64(rec + 40)};
  }
  r.need(d.offset, d.size, "central directory");
  // Each entry takes at least 46 bytes: a count beyond that is a lie, not a reason to allocate.
  VITRT_CHECK(d.count <= d.size / kCentralHeaderSize, CheckpointError, "zip archive '", f.path(),
              "': central directory claims ", d.count, " entries in ", d.size, " bytes");
  return d;
}

}  // namespace

ZipArchive::ZipArchive(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {
  const MappedFile& f = *file_;
  Reader r(f);
  Directory dir = find_directory(f, r);
  entries_.reserve(dir.count);
  uint64_t pos = dir.offset;
  const uint64_t dir_end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.count; ++i) {
    VITRT_CHECK(pos + kCentralHeaderSize <= dir_end && r.u32(pos) == kCentralHeaderSig, CheckpointError,
                "zip archive '", f.path(), "': central directory entry ", i, " is corrupt");
    ZipEntry e;
    uint16_t flags = r.u16(pos + 8);
    e.method = r.u16(pos + 10);
    e.compressed_size = r.u32(pos + 20);
    e.size = r.u32(pos + 24);
    uint16_t name_len = r.u16(pos + 28), extra_len = r.u16(pos + 30), comment_len = r.u16(pos + 32);
    uint64_t local = r.u32(pos + 42);
    uint64_t var_end = pos + kCentralHeaderSize + name_len + extra_len + comment_len;
    VITRT_CHECK(var_end <= dir_end, CheckpointError, "zip archive '", f.path(), "': central directory entry ", i,
                " runs past the directory");
    e.name.assign(reinterpret_cast<const char*>(f.data() + pos + kCentralHeaderSize), name_len);
    VITRT_CHECK(!(flags & 1), CheckpointError, "zip archive '", f.path(), "': entry '", e.name, "' is encrypted");

    // Zip64 extended information: the 64-bit values appear, in this order, only for the fields
    // whose 32-bit slot holds 0xFFFFFFFF.
    uint64_t x = pos + kCentralHeaderSize + name_len, x_end = x + extra_len;
    while (x + 4 <= x_end) {
      uint16_t id = r.u16(x), len = r.u16(x + 2);
      VITRT_CHECK(x + 4 + len <= x_end, CheckpointError, "zip archive '", f.path(), "': bad extra field in '",
                  e.name, "'");
      if (id == 0x0001) {
        uint64_t p = x + 4, end = p + len;
        auto take = [&](uint64_t& field) {
          if (field != 0xFFFFFFFFu) return;
          VITRT_CHECK(p + 8 <= end, CheckpointError, "zip archive '", f.path(), "': short zip64 field in '", e.name, "'");
          field = r.u64(p);
          p += 8;
        };
        take(e.size);
        take(e.compressed_size);
        take(local);
      }
      x += 4 + len;
    }
    pos = var_end;

    // The data follows the local header, whose name and extra field lengths may differ from the
    // central copy (torch pads the local extra field to align storages).
    r.need(local, kLocalHeaderSize, "local header");
    VITRT_CHECK(r.u32(local) == kLocalHeaderSig, CheckpointError, "zip archive '", f.path(),
                "': local header of '", e.name, "' is missing (corrupt offset ", local, ")");
    e.data_offset = local + kLocalHeaderSize + r.u16(local + 26) + r.u16(local + 28);
    r.need(e.data_offset, e.compressed_size, ("data of '" + e.name + "'").c_str());
    VITRT_CHECK(index_.emplace(e.name, entries_.size()).second, CheckpointError, "zip archive '", f.path(), "': duplicate entry '",
                e.name, "'");
    entries_.push_back(std::move(e));
  }
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::span<const uint8_t> ZipArchive::stored_data(const ZipEntry& e) const {
  VITRT_CHECK(e.method == 0, CheckpointError, "zip archive '", file_->path(), "': entry '", e.name,
              "' is compressed (method ", e.method,
              "); only stored entries are supported, as written by torch.save");
  VITRT_CHECK(e.size == e.compressed_size, CheckpointError, "zip archive '", file_->path(), "': stored entry '",
              e.name, "' has mismatched sizes ", e.compressed_size, " and ", e.size);
  return {file_->data() + e.data_offset, e.size};
}

}  // namespace vitrt::io
