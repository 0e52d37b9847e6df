// torch.save archives and format sniffing. What is accepted as a state_dict:
//  * the pickle's top level must be a dict;
//  * if it holds tensors directly it is the state_dict; otherwise its "model" or "state_dict"
//    entry (a dict) is, and the other top-level entries (epoch, optimizer state, config...) are
//    ignored. They have still passed the restricted unpickler, so nothing in them ran;
//  * inside the state_dict every key must be a string and every value a tensor (or Parameter):
//    anything else means the file is not a plain state_dict, and is refused naming the key.
// load_torch_checkpoint_with_settings may name the entry instead ("model_ema"), and also returns
// the scalars beside the weights (the epoch, a training script's argparse.Namespace "args").
#include <algorithm>
#include <charconv>
#include <cstring>

#include "io/mapped_file.h"
#include "io/pickle.h"
#include "io/zip_archive.h"
#include "vitrt/checkpoint.h"

namespace vitrt {
namespace {

using io::MappedFile;
using io::PickleValue;
using io::PickleValuePtr;
using io::TensorRef;
using Kind = PickleValue::Kind;

// a * b and a + b on element counts and byte sizes; false on overflow.
bool mul_ok(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
bool add_ok(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// The prefix of "<prefix>/data.pkl": torch uses the file stem or "archive", but any works.
std::string find_prefix(const io::ZipArchive& zip, const std::string& path) {
  std::string prefix;
  int found = 0;
  for (const io::ZipEntry& e : zip.entries()) {
    size_t slash = e.name.find('/');
    if (slash != std::string::npos && slash > 0 && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = e.name.substr(0, slash);
      ++found;
    }
  }
  VITRT_CHECK(found == 1, CheckpointError, "checkpoint '", path, "': ",
              found == 0 ? "no <prefix>/data.pkl entry: not a torch.save archive"
                         : "several <prefix>/data.pkl entries: ambiguous archive");
  return prefix;
}

// Copies a strided view into a new contiguous tensor, element by element (odometer over the dims).
Tensor copy_strided(const uint8_t* base, const TensorRef& t, size_t item) {
  Tensor out = Tensor::empty(t.size, t.storage.dtype);
  auto* dst = static_cast<uint8_t*>(out.raw());
  const int64_t n = out.numel(), dims = static_cast<int64_t>(t.size.size());
  std::vector<int64_t> index(dims, 0);
  int64_t src = t.offset;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * item, base + src * item, item);
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++index[d] < t.size[d]) {
        src += t.stride[d];
        break;
      }
      src -= (t.size[d] - 1) * t.stride[d];
      index[d] = 0;
    }
  }
  return out;
}

Tensor materialise(const std::shared_ptr<MappedFile>& file, const io::ZipArchive& zip, const std::string& prefix,
                   const std::string& name, const TensorRef& t) {
  const std::string& path = file->path();
  const std::string entry_name = prefix + "/data/" + t.storage.key;
  const io::ZipEntry* entry = zip.find(entry_name);
  VITRT_CHECK(entry, CheckpointError, "checkpoint '", path, "': tensor '", name, "': storage '", entry_name,
              "' is missing from the archive");
  std::span<const uint8_t> bytes = zip.stored_data(*entry);
  const DType dtype = t.storage.dtype;
  const auto item = static_cast<int64_t>(dtype_size(dtype));

  int64_t storage_bytes = 0;
  VITRT_CHECK(mul_ok(t.storage.numel, item, storage_bytes) && static_cast<uint64_t>(storage_bytes) <= bytes.size(),
              CheckpointError, "checkpoint '", path, "': tensor '", name, "': storage '", entry_name, "' holds ",
              bytes.size(), " bytes, too small for the ", t.storage.numel, " ", dtype_name(dtype),
              " elements it declares");

  // Element range the view touches, with overflow checks: sizes and strides come from the file.
  int64_t numel = 1, last = t.offset;
  bool ok = t.offset >= 0;
  for (size_t d = 0; d < t.size.size() && ok; ++d) {
    ok = t.size[d] >= 0 && t.stride[d] >= 0 && mul_ok(numel, t.size[d], numel);
    int64_t span = 0;
    if (ok && t.size[d] > 0) ok = mul_ok(t.size[d] - 1, t.stride[d], span) && add_ok(last, span, last);
  }
  VITRT_CHECK(ok && (numel == 0 || last < t.storage.numel), CheckpointError, "checkpoint '", path, "': tensor '",
              name, "' of shape ", shape_str(t.size), " (strides ", shape_str(t.stride), ", offset ", t.offset,
              ") reaches past the end of its storage '", entry_name, "' of ", t.storage.numel, " elements");
  if (numel == 0) return Tensor::empty(t.size, dtype);

  // Row-major strides, ignoring size-1 dims (their stride is arbitrary).
  bool contiguous = true;
  int64_t expected = 1;
  for (size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && t.stride[d] != expected) contiguous = false;
    expected *= t.size[d];
  }
  const uint8_t* data = bytes.data() + t.offset * item;
  if (contiguous && reinterpret_cast<uintptr_t>(data) % item == 0) {
    // In place: the tensor keeps the whole mapping alive.
    void* p = file->mutable_at(data - file->data());
    return Tensor::wrap(std::shared_ptr<const void>(file, p), p, t.size, dtype);
  }
  if (contiguous) {  // misaligned (a hand-made archive): copy
    Tensor out = Tensor::empty(t.size, dtype);
    std::memcpy(out.raw(), data, out.nbytes());
    return out;
  }
  return copy_strided(bytes.data(), t, static_cast<size_t>(item));
}

bool holds_tensor(const PickleValue& dict) {
  return std::any_of(dict.entries.begin(), dict.entries.end(),
                     [](const auto& kv) { return kv.second->kind == Kind::Tensor; });
}

// The value of the top-level string key `name` (the last such key: later keys win, as in Python),
// or null.
const PickleValue* top_level_entry(const PickleValue& root, const std::string& name) {
  for (auto it = root.entries.rbegin(); it != root.entries.rend(); ++it)
    if (it->first->kind == Kind::String && it->first->text == name) return it->second.get();
  return nullptr;
}

bool is_weights(const PickleValue& v) { return v.kind == Kind::Dict && holds_tensor(v); }

// Applies the policy described at the top of this file.
const PickleValue& select_state_dict(const PickleValue& root, const std::string& path) {
  VITRT_CHECK(root.kind == Kind::Dict, CheckpointError, "checkpoint '", path, "': top level is a ",
              pickle_kind_name(root.kind), ", expected a dict of tensors (a state_dict)");
  if (holds_tensor(root)) return root;
  for (const char* wrapper : {"model", "state_dict"})
    if (const PickleValue* v = top_level_entry(root, wrapper); v && is_weights(*v)) return *v;
  throw CheckpointError(detail::concat("checkpoint '", path,
                                       "': no tensors at the top level nor under \"model\" or \"state_dict\""));
}

// The named top-level entry, which must be a dict holding tensors.
const PickleValue& select_entry(const PickleValue& root, const std::string& path, const std::string& entry) {
  VITRT_CHECK(root.kind == Kind::Dict, CheckpointError, "checkpoint '", path, "': top level is a ",
              pickle_kind_name(root.kind), ", expected a dict with an entry '", entry, "'");
  if (const PickleValue* v = top_level_entry(root, entry)) {
    VITRT_CHECK(is_weights(*v), CheckpointError, "checkpoint '", path, "': entry '", entry, "' is a ",
                pickle_kind_name(v->kind), " without tensors, not a state_dict");
    return *v;
  }
  std::string candidates;  // (for the message: the entries that would do)
  for (auto it = root.entries.rbegin(); it != root.entries.rend(); ++it)
    if (it->first->kind == Kind::String && is_weights(*it->second))
      candidates += (candidates.empty() ? "" : ", ") + ("'" + it->first->text + "'");
  throw CheckpointError(detail::concat("checkpoint '", path, "' has no entry '", entry, "'",
                                       candidates.empty() ? std::string(" (and no dict of tensors at all)")
                                                          : " (entries holding tensors: " + candidates + ")"));
}

// A scalar as text ("" for anything else): see TorchCheckpoint::settings.
std::string scalar_text(const PickleValue& v) {
  switch (v.kind) {
    case Kind::None: return "None";
    case Kind::Bool: return v.integer ? "True" : "False";
    case Kind::Int: return std::to_string(v.integer);
    case Kind::Float: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof(buf), v.real);  // shortest text that reads back the same
      return std::string(buf, r.ptr);
    }
    case Kind::String: return v.text;
    default: return "";
  }
}

bool is_scalar(const PickleValue& v) {
  return v.kind == Kind::None || v.kind == Kind::Bool || v.kind == Kind::Int || v.kind == Kind::Float ||
         v.kind == Kind::String;
}

std::map<std::string, std::string> collect_settings(const PickleValue& root) {
  std::map<std::string, std::string> out;
  if (root.kind != Kind::Dict) return out;
  for (const auto& [key, value] : root.entries) {  // later keys overwrite earlier ones, as in Python
    if (key->kind != Kind::String) continue;
    if (is_scalar(*value)) out[key->text] = scalar_text(*value);
    if (value->kind != Kind::Dict) continue;
    for (const auto& [k2, v2] : value->entries)
      if (k2->kind == Kind::String && is_scalar(*v2)) out[key->text + "." + k2->text] = scalar_text(*v2);
  }
  return out;
}

TorchCheckpoint load_zip(const std::shared_ptr<MappedFile>& file, const std::string& entry) {
  const std::string& path = file->path();
  io::ZipArchive zip(file);
  const std::string prefix = find_prefix(zip, path);

  // Storages are written in the saving machine's byte order; only little-endian is handled.
  if (const io::ZipEntry* order = zip.find(prefix + "/byteorder")) {
    std::span<const uint8_t> b = zip.stored_data(*order);
    std::string value(b.begin(), b.end());
    VITRT_CHECK(value == "little", CheckpointError, "checkpoint '", path, "': byte order '", value,
                "' is not supported (big-endian checkpoints must be re-saved on a little-endian machine)");
  }

  const io::ZipEntry* pkl = zip.find(prefix + "/data.pkl");
  PickleValuePtr root = io::unpickle_torch(zip.stored_data(*pkl), path);
  const PickleValue& dict = entry.empty() ? select_state_dict(*root, path) : select_entry(*root, path, entry);

  TorchCheckpoint ckpt;
  ckpt.settings = collect_settings(*root);
  StateDict& out = ckpt.state_dict;
  for (const auto& [key, value] : dict.entries) {
    VITRT_CHECK(key->kind == Kind::String, CheckpointError, "checkpoint '", path, "': state_dict key is a ",
                pickle_kind_name(key->kind), ", expected a string");
    VITRT_CHECK(value->kind == Kind::Tensor, CheckpointError, "checkpoint '", path, "': entry '", key->text,
                "' is a ", pickle_kind_name(value->kind), ", expected a tensor");
    out[key->text] = materialise(file, zip, prefix, key->text, *value->tensor);
  }
  return ckpt;
}

// torch.save before 1.6 (and _use_new_zipfile_serialization=False): a raw pickle stream that
// starts with PROTO and the LONG1 magic number 0x1950a86a20f9469cfc6c.
bool is_legacy_torch(std::span<const uint8_t> b) {
  static constexpr uint8_t magic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return b.size() >= 2 + sizeof(magic) && b[0] == 0x80 && std::memcmp(b.data() + 2, magic, sizeof(magic)) == 0;
}

void check_not_legacy_or_empty(const MappedFile& f) {
  VITRT_CHECK(f.size() > 0, CheckpointError, "checkpoint '", f.path(), "' is empty (0 bytes)");
  VITRT_CHECK(!is_legacy_torch(f.bytes()), CheckpointError, "checkpoint '", f.path(),
              "': legacy torch.save format not supported, re-save with torch>=1.6");
}

}  // namespace

StateDict load_torch_checkpoint(const std::string& path) { return load_torch_checkpoint_with_settings(path).state_dict; }

TorchCheckpoint load_torch_checkpoint_with_settings(const std::string& path, const std::string& entry) {
  auto file = io::MappedFile::open(path);
  check_not_legacy_or_empty(*file);
  return load_zip(file, entry);
}

StateDict load_state_dict(const std::string& path) {
  std::shared_ptr<MappedFile> file = io::MappedFile::open(path);
  check_not_legacy_or_empty(*file);
  std::span<const uint8_t> b = file->bytes();
  if (b.size() >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return load_zip(file, "").state_dict;
  // safetensors: 8-byte header length, then the JSON header, which starts with '{'.
  if (b.size() >= 9 && b[8] == '{') return load_safetensors(path);
  VITRT_CHECK(b[0] != 0x80, CheckpointError, "checkpoint '", path,
              "' is a bare pickle, not a torch.save zip archive: legacy torch.save format not supported, "
              "re-save with torch>=1.6");
  throw CheckpointError(detail::concat("checkpoint '", path,
                                       "': unrecognised format (neither a torch.save zip archive nor safetensors)"));
}

}  // namespace vitrt
