// safetensors: [u64 little-endian header length N][N bytes of JSON header][data]. The header maps
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} relative to the data start.
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/mapped_file.h"
#include "vitrt/checkpoint.h"

namespace vitrt {
namespace {

// The reference implementation's own limit; anything larger is corrupt or hostile.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64},
      {"I64", DType::I64}, {"I32", DType::I32}, {"I16", DType::I16},   {"I8", DType::I8},
      {"U8", DType::U8},   {"BOOL", DType::Bool}};
  for (const auto& [key, dtype] : table)
    if (s == key) return dtype;
  throw CheckpointError(detail::concat("safetensors '", path, "': tensor '", name, "' has unsupported dtype '", s, "'"));
}

}  // namespace

StateDict load_safetensors(const std::string& path) {
  using nlohmann::json;
  std::shared_ptr<io::MappedFile> file = io::MappedFile::open(path);
  const uint64_t size = file->size();
  VITRT_CHECK(size >= 8, CheckpointError, "safetensors '", path, "' is ", size == 0 ? "empty (0 bytes)" : "truncated",
              ": no room for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file->data()[i];
  VITRT_CHECK(header_len <= size - 8 && header_len <= kMaxHeaderBytes, CheckpointError, "safetensors '", path,
              "': header length ", header_len, " is larger than the file (", size,
              " bytes) or the 100 MB limit: truncated or corrupt");
  const uint64_t data_start = 8 + header_len, data_size = size - data_start;

  json header;
  try {
    header = json::parse(file->data() + 8, file->data() + data_start);
  } catch (const json::exception& e) {
    throw CheckpointError(detail::concat("safetensors '", path, "': header is not valid JSON: ", e.what()));
  }
  VITRT_CHECK(header.is_object(), CheckpointError, "safetensors '", path, "': header is not a JSON object");

  StateDict out;
  for (const auto& item : header.items()) {
    // (Named, not a structured binding: clang before 16 cannot capture those in the lambda below.)
    const std::string& name = item.key();
    const json& info = item.value();
    if (name == "__metadata__") continue;  // free-form string map, nothing we need
    auto bad = [&](const std::string& why) {
      return CheckpointError(detail::concat("safetensors '", path, "': tensor '", name, "': ", why));
    };
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2)
      throw bad("entry needs \"dtype\", \"shape\" and a two-element \"data_offsets\"");
    const DType dtype = parse_dtype(info["dtype"].get<std::string>(), path, name);

    Shape shape;
    uint64_t bytes = dtype_size(dtype);
    for (const json& d : info["shape"]) {
      if (!d.is_number_unsigned()) throw bad("shape must hold non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 62) || __builtin_mul_overflow(bytes, dim, &bytes)) throw bad("shape is too large");
      shape.push_back(static_cast<int64_t>(dim));
    }
    const json& offs = info["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw bad("data_offsets must be non-negative integers");
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw bad(detail::concat("data_offsets [", begin, ", ", end, "] lie outside the ", data_size,
                               "-byte data section (truncated or corrupt file)"));
    if (end - begin != bytes)
      throw bad(detail::concat("data_offsets span ", end - begin, " bytes but shape ", shape_str(shape), " of ",
                               dtype_name(dtype), " needs ", bytes));

    const uint64_t offset = data_start + begin;
    if (reinterpret_cast<uintptr_t>(file->data() + offset) % dtype_size(dtype) == 0) {
      void* p = file->mutable_at(offset);  // in place: the tensor keeps the mapping alive
      out[name] = Tensor::wrap(std::shared_ptr<const void>(file, p), p, shape, dtype);
    } else {  // misaligned start (the format does not promise alignment): copy
      Tensor t = Tensor::empty(shape, dtype);
      if (bytes) std::memcpy(t.raw(), file->data() + offset, bytes);
      out[name] = std::move(t);
    }
  }
  return out;
}

}  // namespace vitrt
