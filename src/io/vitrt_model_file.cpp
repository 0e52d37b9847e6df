#include "io/vitrt_model_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/mapped_file.h"

namespace vitrt::io {
namespace {

using nlohmann::json;

constexpr const char* kValues = ".bsr_values";
constexpr const char* kColIdx = ".bsr_col_idx";
constexpr const char* kRowPtr = ".bsr_row_ptr";
constexpr const char* kMeta = ".bsr";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
  }
  throw InvalidArgument("write_model_file: unknown dtype");
}

// The header's __metadata__ map (safetensors' loader skips it, so it is read here on its own).
json read_metadata(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  uint64_t header_len = 0;
  if (file->size() < 8) return json::object();
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file->data()[i];
  if (header_len > file->size() - 8) return json::object();  // load_safetensors already refused this
  json header = json::parse(file->data() + 8, file->data() + 8 + header_len, nullptr, false);
  if (!header.is_object() || !header.contains("__metadata__")) return json::object();
  const json& meta = header["__metadata__"];
  VITRT_CHECK(meta.is_object(), CheckpointError, "model file '", path, "': __metadata__ is not a JSON object");
  return meta;
}

}  // namespace

void write_model_file(const std::string& path, const StateDict& dense, const std::map<std::string, BsrMatrix>& sparse,
                      const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Tensor> tensors;
  json meta = json::object();
  meta["format"] = kVitrtModelFormat;
  for (const auto& [key, value] : metadata) {
    VITRT_CHECK(!ends_with(key, kMeta), InvalidArgument, "write_model_file: metadata key '", key,
                "' ends in '.bsr', which is reserved for BSR weights");
    meta[key] = value;
  }
  for (const auto& [name, t] : dense) {
    VITRT_CHECK(!ends_with(name, kValues) && !ends_with(name, kColIdx) && !ends_with(name, kRowPtr),
                InvalidArgument, "write_model_file: dense tensor name '", name, "' ends in a BSR suffix");
    VITRT_CHECK(t.defined() && !t.is_cuda(), InvalidArgument, "write_model_file: tensor '", name,
                "' must be a defined host tensor");
    tensors[name] = t;
  }
  for (const auto& [name, m] : sparse) {
    validate(m, "write_model_file: BSR weight '" + name + "'");
    VITRT_CHECK(!dense.count(name), InvalidArgument, "write_model_file: '", name, "' is both dense and BSR");
    tensors[name + kValues] = m.values;
    tensors[name + kColIdx] = m.col_idx;
    tensors[name + kRowPtr] = m.row_ptr;
    meta[name + kMeta] = json{{"rows", m.rows}, {"cols", m.cols}, {"block", m.block}}.dump();
  }
  // Largest element first keeps every offset a multiple of its own element size.
  std::vector<std::pair<std::string, Tensor>> order(tensors.begin(), tensors.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });
  json header = json::object();
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    header[name] = json{{"dtype", safetensors_dtype(t.dtype())}, {"shape", t.shape()},
                        {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  // Write to a temporary name and rename, so a failed write never leaves a half file at `path`.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    VITRT_CHECK(out, IoError, "cannot open '", tmp, "' for writing");
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : order)
      out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    VITRT_CHECK(out, IoError, "writing '", tmp, "' failed (disk full?)");
  }
  VITRT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IoError, "cannot rename '", tmp, "' to '", path, "'");
}

ModelFile load_model_file(const std::string& path) {
  StateDict all = load_safetensors(path);  // validates the container: offsets, sizes, dtypes
  const json meta = read_metadata(path);
  ModelFile f;
  for (const auto& [key, value] : meta.items()) {
    VITRT_CHECK(value.is_string(), CheckpointError, "model file '", path, "': __metadata__ entry '", key,
                "' is not a string");
    if (!ends_with(key, kMeta)) {
      f.metadata[key] = value.get<std::string>();
      continue;
    }
    const std::string name = key.substr(0, key.size() - std::strlen(kMeta));
    auto bad = [&](const std::string& why) {
      return CheckpointError(detail::concat("model file '", path, "': BSR weight '", name, "': ", why));
    };
    const json shape = json::parse(value.get<std::string>(), nullptr, false);
    if (!shape.is_object() || !shape.contains("rows") || !shape.contains("cols") || !shape.contains("block") ||
        !shape["rows"].is_number_integer() || !shape["cols"].is_number_integer() ||
        !shape["block"].is_number_integer())
      throw bad("metadata must be {\"rows\": R, \"cols\": C, \"block\": B} with integers, got '" +
                value.get<std::string>() + "'");
    BsrMatrix m;
    m.rows = shape["rows"].get<int64_t>();
    m.cols = shape["cols"].get<int64_t>();
    const int64_t block = shape["block"].get<int64_t>();
    if (!is_supported_bsr_block(static_cast<int>(std::clamp<int64_t>(block, 0, 1 << 20))))
      throw bad(detail::concat("block size ", block, " is not supported (expected 16, 32 or 64)"));
    m.block = static_cast<int>(block);
    for (const char* suffix : {kValues, kColIdx, kRowPtr}) {
      auto it = all.find(name + suffix);
      if (it == all.end()) throw bad(detail::concat("tensor '", name, suffix, "' is missing"));
      Tensor& slot = suffix == kValues ? m.values : suffix == kColIdx ? m.col_idx : m.row_ptr;
      slot = it->second;
      all.erase(it);
    }
    if (all.count(name)) throw bad("also stored as a dense tensor");
    try {
      validate(m, "model file '" + path + "': BSR weight '" + name + "'");
    } catch (const InvalidArgument& e) {
      throw CheckpointError(e.what());
    }
    f.sparse.emplace(name, std::move(m));
  }
  for (auto& [name, t] : all) {
    VITRT_CHECK(!ends_with(name, kValues) && !ends_with(name, kColIdx) && !ends_with(name, kRowPtr),
                CheckpointError, "model file '", path, "': tensor '", name,
                "' looks like part of a BSR weight but __metadata__ has no matching '.bsr' entry");
    f.dense.emplace(name, std::move(t));
  }
  return f;
}

StateDict fold_to_dense(const ModelFile& f) {
  StateDict out = f.dense;
  for (const auto& [name, m] : f.sparse) out[name] = bsr_to_dense(m);
  return out;
}

}  // namespace vitrt::io
