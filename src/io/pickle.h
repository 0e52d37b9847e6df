// Restricted unpickler for the data.pkl of torch.save archives. It understands the binary pickle
// protocols (2-5) and accepts only the globals a state_dict needs: collections.OrderedDict, the
// torch tensor/parameter rebuild functions and the typed storage classes, plus argparse.Namespace,
// which training scripts (torchvision's references, SuperBlock) save next to the weights as
// "args". Calls to those are interpreted here (a tensor becomes a TensorRef describing a view of a
// storage; a Namespace a dict of its attributes); nothing from the file is ever executed, and any
// other global or object-building opcode is a CheckpointError.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vitrt/tensor.h"

namespace vitrt::io {

// A storage named by torch's persistent id ('storage', torch.<T>Storage, key, location, numel);
// its bytes are the archive entry <prefix>/data/<key>.
struct StorageRef {
  DType dtype = DType::F32;
  std::string key;
  int64_t numel = 0;
};

// What torch._utils._rebuild_tensor_v2 would build: a strided view into a storage (in elements).
struct TensorRef {
  StorageRef storage;
  int64_t offset = 0;
  Shape size;
  std::vector<int64_t> stride;
};

// Allowed globals, by what the interpreter does with them.
enum class PickleGlobal : uint8_t {
  OrderedDict,
  RebuildTensorV2,
  RebuildParameter,
  RebuildParameterWithState,
  StorageType,
  Namespace,  // argparse.Namespace: plain data, built by NEWOBJ () then BUILD {attributes}
};

struct PickleValue;
using PickleValuePtr = std::shared_ptr<PickleValue>;

// Reference semantics (shared_ptr) because the memo lets a pickle mutate a dict or list after
// storing it elsewhere.
struct PickleValue {
  enum class Kind : uint8_t { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Storage, Tensor };
  Kind kind = Kind::None;
  bool ordered_dict = false;  // Dict made by collections.OrderedDict(): BUILD on it is allowed (and ignored)
  bool is_namespace = false;  // Dict made by argparse.Namespace(): BUILD adds its attributes as entries
  PickleGlobal global{};      // Global
  DType dtype = DType::F32;   // Global StorageType
  int64_t integer = 0;        // Bool, Int
  double real = 0;            // Float
  std::string text;           // String, Bytes; Global: "module.name"
  std::vector<PickleValuePtr> items;                                 // Tuple, List
  std::vector<std::pair<PickleValuePtr, PickleValuePtr>> entries;    // Dict, in insertion order; later keys win
  std::unique_ptr<StorageRef> storage;                               // Storage
  std::unique_ptr<TensorRef> tensor;                                 // Tensor

  PickleValue() = default;
  explicit PickleValue(Kind k) : kind(k) {}
  PickleValue(const PickleValue&) = delete;
  PickleValue& operator=(const PickleValue&) = delete;
  // Tears nested containers down iteratively: a deeply nested tuple in a hostile file must not
  // overflow the stack through recursive destructors.
  ~PickleValue();
};

const char* pickle_kind_name(PickleValue::Kind kind);

// Unpickles `data`; `where` names the file in error messages. Throws CheckpointError.
PickleValuePtr unpickle_torch(std::span<const uint8_t> data, const std::string& where);

}  // namespace vitrt::io
