#include "io/pickle.h"

#include <bit>
#include <cstring>
#include <unordered_map>

#include "vitrt/error.h"

namespace vitrt::io {

PickleValue::~PickleValue() {
  std::vector<PickleValuePtr> pending = std::move(items);
  for (auto& [k, v] : entries) {
    pending.push_back(std::move(k));
    pending.push_back(std::move(v));
  }
  while (!pending.empty()) {
    PickleValuePtr p = std::move(pending.back());
    pending.pop_back();
    if (p && p.use_count() == 1) {  // last owner: adopt its children before it dies
      for (auto& c : p->items) pending.push_back(std::move(c));
      for (auto& [k, v] : p->entries) {
        pending.push_back(std::move(k));
        pending.push_back(std::move(v));
      }
      p->items.clear();
      p->entries.clear();
    }
  }
}

const char* pickle_kind_name(PickleValue::Kind kind) {
  using K = PickleValue::Kind;
  switch (kind) {
    case K::None: return "None";
    case K::Bool: return "bool";
    case K::Int: return "int";
    case K::Float: return "float";
    case K::String: return "str";
    case K::Bytes: return "bytes";
    case K::Tuple: return "tuple";
    case K::List: return "list";
    case K::Dict: return "dict";
    case K::Global: return "global";
    case K::Storage: return "storage";
    case K::Tensor: return "tensor";
  }
  return "?";
}

namespace {

using Kind = PickleValue::Kind;

// Limits far above any real state_dict pickle (ViT-H: ~12k values), low enough that a hostile
// file cannot make us allocate without bound.
constexpr size_t kMaxValues = size_t{1} << 22;
constexpr size_t kMaxStack = size_t{1} << 20;
constexpr size_t kMaxMemo = size_t{1} << 22;

struct AllowedGlobal {
  const char* module;
  const char* name;
  PickleGlobal kind;
  DType dtype;
};
constexpr AllowedGlobal kAllowedGlobals[] = {
    {"collections", "OrderedDict", PickleGlobal::OrderedDict, DType::F32},
    {"torch._utils", "_rebuild_tensor_v2", PickleGlobal::RebuildTensorV2, DType::F32},
    {"torch._utils", "_rebuild_parameter", PickleGlobal::RebuildParameter, DType::F32},
    {"torch._utils", "_rebuild_parameter_with_state", PickleGlobal::RebuildParameterWithState, DType::F32},
    {"torch", "FloatStorage", PickleGlobal::StorageType, DType::F32},
    {"torch", "DoubleStorage", PickleGlobal::StorageType, DType::F64},
    {"torch", "HalfStorage", PickleGlobal::StorageType, DType::F16},
    {"torch", "BFloat16Storage", PickleGlobal::StorageType, DType::BF16},
    {"torch", "LongStorage", PickleGlobal::StorageType, DType::I64},
    {"torch", "IntStorage", PickleGlobal::StorageType, DType::I32},
    {"torch", "ShortStorage", PickleGlobal::StorageType, DType::I16},
    {"torch", "CharStorage", PickleGlobal::StorageType, DType::I8},
    {"torch", "ByteStorage", PickleGlobal::StorageType, DType::U8},
    {"torch", "BoolStorage", PickleGlobal::StorageType, DType::Bool},
    {"argparse", "Namespace", PickleGlobal::Namespace, DType::F32},
};

// Opcodes we recognise but refuse, named in the error so a user can tell what the file tried.
const char* refused_opcode_name(uint8_t op) {
  switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'F': return "FLOAT";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'g': return "GET";
    case 'p': return "PUT";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> data, const std::string& where) : data_(data), where_(where) {}

  PickleValuePtr run() {
    while (true) {
      op_pos_ = pos_;
      uint8_t op = read_u8();
      switch (op) {
        case 0x80: {  // PROTO
          uint8_t proto = read_u8();
          check(proto >= 2 && proto <= 5, "unsupported pickle protocol ", int(proto));
          break;
        }
        case 0x95: read_le(8); break;  // FRAME: framing only, the data follows inline
        case '.': {                    // STOP
          check(!stack_.empty(), "STOP with an empty stack");
          return stack_.back();
        }
        case '(': check(marks_.size() < kMaxStack, "too many marks"); marks_.push_back(stack_.size()); break;
        case '0': pop(); break;           // POP
        case '1': pop_to_mark(); break;   // POP_MARK
        case '2': push(top()); break;     // DUP
        case 'N': push(make(Kind::None)); break;
        case 0x88: push(make_int(Kind::Bool, 1)); break;  // NEWTRUE
        case 0x89: push(make_int(Kind::Bool, 0)); break;  // NEWFALSE
        case 'J': push(make_int(Kind::Int, static_cast<int32_t>(read_le(4)))); break;  // BININT
        case 'K': push(make_int(Kind::Int, read_u8())); break;                         // BININT1
        case 'M': push(make_int(Kind::Int, static_cast<int64_t>(read_le(2)))); break;  // BININT2
        case 0x8a: push(make_int(Kind::Int, read_long1())); break;                     // LONG1
        case 'G': {  // BINFLOAT: big-endian double
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | read_u8();
          auto v = make(Kind::Float);
          v->real = std::bit_cast<double>(bits);
          push(std::move(v));
          break;
        }
        case 'X': push(make_text(Kind::String, read_le(4))); break;     // BINUNICODE
        case 0x8c: push(make_text(Kind::String, read_u8())); break;     // SHORT_BINUNICODE
        case 0x8d: push(make_text(Kind::String, read_le(8))); break;    // BINUNICODE8
        case 'B': push(make_text(Kind::Bytes, read_le(4))); break;      // BINBYTES
        case 'C': push(make_text(Kind::Bytes, read_u8())); break;       // SHORT_BINBYTES
        case 0x8e: push(make_text(Kind::Bytes, read_le(8))); break;     // BINBYTES8
        case '}': push(make(Kind::Dict)); break;                        // EMPTY_DICT
        case ']': push(make(Kind::List)); break;                        // EMPTY_LIST
        case ')': push(make(Kind::Tuple)); break;                       // EMPTY_TUPLE
        case 't': {                                                     // TUPLE
          auto v = make(Kind::Tuple);
          v->items = pop_to_mark();
          push(std::move(v));
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          size_t n = op - 0x84u;
          check(stack_.size() >= stack_floor() + n, "TUPLE", n, " needs ", n, " values on the stack");
          auto v = make(Kind::Tuple);
          v->items.assign(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(std::move(v));
          break;
        }
        case 'a': {  // APPEND
          PickleValuePtr item = pop();
          expect(top(), Kind::List, "APPEND target")->items.push_back(std::move(item));
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_to_mark();
          auto& list = expect(top(), Kind::List, "APPENDS target")->items;
          list.insert(list.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          PickleValuePtr value = pop(), key = pop();
          expect(top(), Kind::Dict, "SETITEM target")->entries.emplace_back(std::move(key), std::move(value));
          break;
        }
        case 'u': {  // SETITEMS
          auto kv = pop_to_mark();
          check(kv.size() % 2 == 0, "SETITEMS with an odd number of values");
          auto& dict = expect(top(), Kind::Dict, "SETITEMS target")->entries;
          for (size_t i = 0; i < kv.size(); i += 2) dict.emplace_back(kv[i], kv[i + 1]);
          break;
        }
        case 'h': push(memo_get(read_u8())); break;                                   // BINGET
        case 'j': push(memo_get(static_cast<uint32_t>(read_le(4)))); break;          // LONG_BINGET
        case 'q': memo_put(read_u8()); break;                                         // BINPUT
        case 'r': memo_put(static_cast<uint32_t>(read_le(4))); break;                // LONG_BINPUT
        case 0x94: memo_put(static_cast<uint32_t>(memo_.size())); break;             // MEMOIZE
        case 'c': {  // GLOBAL "module\nname\n"
          std::string module = read_line(), name = read_line();
          push(make_global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          PickleValuePtr name = pop(), module = pop();
          check(module->kind == Kind::String && name->kind == Kind::String, "STACK_GLOBAL needs two strings");
          push(make_global(module->text, name->text));
          break;
        }
        case 'Q': push(persistent_load(pop())); break;  // BINPERSID
        case 'R': {                                     // REDUCE
          PickleValuePtr args = pop(), callable = pop();
          push(reduce(*callable, *args));
          break;
        }
        case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), only for argparse.Namespace with no arguments
          PickleValuePtr args = pop(), cls = pop();
          check(cls->kind == Kind::Global && cls->global == PickleGlobal::Namespace, "refusing pickle opcode NEWOBJ on ",
                cls->kind == Kind::Global ? cls->text : pickle_kind_name(cls->kind),
                " (only argparse.Namespace objects are built, as plain data)");
          check(args->kind == Kind::Tuple && args->items.empty(), "NEWOBJ of argparse.Namespace with arguments");
          auto ns = make(Kind::Dict);
          ns->is_namespace = true;
          push(std::move(ns));
          break;
        }
        case 'b': {  // BUILD
          PickleValuePtr state = pop();
          const PickleValuePtr& target = top();
          if (target->kind == Kind::Dict && target->is_namespace) {  // the Namespace's __dict__
            check(state->kind == Kind::Dict, "BUILD of an argparse.Namespace with a ", pickle_kind_name(state->kind),
                  " state, expected a dict");
            target->entries.insert(target->entries.end(), state->entries.begin(), state->entries.end());
            break;
          }
          // torch.save of a state_dict stores OrderedDict._metadata (per-module versions) this way.
          check(target->kind == Kind::Dict && target->ordered_dict &&
                    (state->kind == Kind::Dict || state->kind == Kind::None),
                "BUILD is only allowed to set an OrderedDict's metadata or an argparse.Namespace's attributes, not on a ",
                pickle_kind_name(target->kind));
          break;
        }
        default: {
          const char* name = refused_opcode_name(op);
          if (name) fail("refusing pickle opcode ", name, " (not needed by a state_dict)");
          fail("unknown pickle opcode 0x", hex(op), " (corrupt or not a torch checkpoint)");
        }
      }
    }
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw CheckpointError(detail::concat("checkpoint '", where_, "': data.pkl: ", args..., " (at byte ", op_pos_, ")"));
  }
  template <class... Args>
  void check(bool cond, const Args&... args) const {
    if (!cond) fail(args...);
  }
  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4], digits[v & 15]};
  }

  // --- input ---
  void need(uint64_t n) const {
    check(n <= data_.size() - pos_, "truncated: needs ", n, " more bytes, ", data_.size() - pos_, " left");
  }
  uint8_t read_u8() {
    need(1);
    return data_[pos_++];
  }
  uint64_t read_le(int bytes) {
    need(bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | data_[pos_ + i];
    pos_ += bytes;
    return v;
  }
  int64_t read_long1() {
    uint8_t n = read_u8();
    check(n <= 8, "LONG1 of ", int(n), " bytes does not fit in 64 bits");
    uint64_t v = read_le(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  std::string read_line() {
    const uint8_t* start = data_.data() + pos_;
    const void* nl = std::memchr(start, '\n', data_.size() - pos_);
    check(nl != nullptr, "unterminated GLOBAL name");
    size_t len = static_cast<const uint8_t*>(nl) - start;
    pos_ += len + 1;
    return {reinterpret_cast<const char*>(start), len};
  }

  // --- values ---
  PickleValuePtr make(Kind kind) {
    check(++values_ <= kMaxValues, "more than ", kMaxValues, " values: refusing to continue");
    return std::make_shared<PickleValue>(kind);
  }
  PickleValuePtr make_int(Kind kind, int64_t v) {
    auto p = make(kind);
    p->integer = v;
    return p;
  }
  PickleValuePtr make_text(Kind kind, uint64_t len) {
    need(len);  // the length is checked against the data before anything is allocated
    auto p = make(kind);
    p->text.assign(reinterpret_cast<const char*>(data_.data() + pos_), len);
    pos_ += len;
    return p;
  }
  PickleValuePtr make_global(const std::string& module, const std::string& name) {
    for (const AllowedGlobal& g : kAllowedGlobals) {
      if (module == g.module && name == g.name) {
        auto p = make(Kind::Global);
        p->global = g.kind;
        p->dtype = g.dtype;
        p->text = module + "." + name;
        return p;
      }
    }
    fail("refusing global '", module, ".", name,
         "': only collections.OrderedDict, argparse.Namespace and torch tensor/storage rebuild globals are "
         "allowed (the file may be malicious)");
  }

  // --- stack and memo ---
  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(PickleValuePtr v) {
    check(stack_.size() < kMaxStack, "stack deeper than ", kMaxStack);
    stack_.push_back(std::move(v));
  }
  const PickleValuePtr& top() const {
    check(stack_.size() > stack_floor(), "stack underflow");
    return stack_.back();
  }
  PickleValuePtr pop() {
    check(stack_.size() > stack_floor(), "stack underflow");
    PickleValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<PickleValuePtr> pop_to_mark() {
    check(!marks_.empty(), "missing MARK");
    size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValuePtr> items(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return items;
  }
  PickleValue* expect(const PickleValuePtr& v, Kind kind, const char* what) const {
    check(v->kind == kind, what, " is a ", pickle_kind_name(v->kind), ", expected a ", pickle_kind_name(kind));
    return v.get();
  }
  void memo_put(uint32_t index) {
    check(memo_.size() < kMaxMemo || memo_.count(index), "memo larger than ", kMaxMemo, " entries");
    memo_[index] = top();
  }
  PickleValuePtr memo_get(uint32_t index) const {
    auto it = memo_.find(index);
    check(it != memo_.end(), "memo index ", index, " was never stored (corrupt pickle)");
    return it->second;
  }

  // --- the interpreted calls ---
  int64_t int_arg(const PickleValuePtr& v, const char* what) const {
    check(v->kind == Kind::Int, what, " must be an int, got ", pickle_kind_name(v->kind));
    return v->integer;
  }
  std::vector<int64_t> int_tuple(const PickleValuePtr& v, const char* what) const {
    check(v->kind == Kind::Tuple || v->kind == Kind::List, what, " must be a tuple, got ", pickle_kind_name(v->kind));
    std::vector<int64_t> out;
    for (const auto& item : v->items) out.push_back(int_arg(item, what));
    return out;
  }

  // ('storage', torch.<T>Storage, key, location, numel) -> the storage it names. The location
  // (cpu, cuda:0, ...) does not matter: everything is loaded to host memory.
  PickleValuePtr persistent_load(const PickleValuePtr& pid) {
    check(pid->kind == Kind::Tuple && pid->items.size() == 5, "persistent id must be a 5-tuple, got a ",
          pickle_kind_name(pid->kind));
    const auto& f = pid->items;
    check(f[0]->kind == Kind::String && f[0]->text == "storage", "persistent id is not a storage");
    check(f[1]->kind == Kind::Global && f[1]->global == PickleGlobal::StorageType,
          "persistent id names no torch storage type");
    check(f[2]->kind == Kind::String && !f[2]->text.empty() && f[2]->text.find('/') == std::string::npos,
          "bad storage key in persistent id");
    auto v = make(Kind::Storage);
    v->storage = std::make_unique<StorageRef>(StorageRef{f[1]->dtype, f[2]->text, int_arg(f[4], "storage numel")});
    check(v->storage->numel >= 0, "negative storage size");
    return v;
  }

  PickleValuePtr reduce(const PickleValue& callable, const PickleValue& args) {
    check(callable.kind == Kind::Global, "REDUCE on a ", pickle_kind_name(callable.kind), ", not a global");
    check(args.kind == Kind::Tuple, "REDUCE arguments must be a tuple");
    const auto& a = args.items;
    switch (callable.global) {
      case PickleGlobal::OrderedDict: {
        check(a.empty(), "collections.OrderedDict called with arguments");
        auto v = make(Kind::Dict);
        v->ordered_dict = true;
        return v;
      }
      case PickleGlobal::RebuildTensorV2: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        check(a.size() == 6 || a.size() == 7, "_rebuild_tensor_v2 takes 6 or 7 arguments, got ", a.size());
        check(a[0]->kind == Kind::Storage, "_rebuild_tensor_v2: first argument is not a storage");
        auto v = make(Kind::Tensor);
        v->tensor = std::make_unique<TensorRef>(TensorRef{*a[0]->storage, int_arg(a[1], "storage offset"),
                                                          int_tuple(a[2], "tensor size"),
                                                          int_tuple(a[3], "tensor stride")});
        check(v->tensor->size.size() == v->tensor->stride.size(), "tensor size and stride differ in length");
        return v;
      }
      case PickleGlobal::RebuildParameter:
      case PickleGlobal::RebuildParameterWithState: {
        // (data, requires_grad, backward_hooks[, state]): a Parameter is just its tensor here.
        size_t n = callable.global == PickleGlobal::RebuildParameter ? 3 : 4;
        check(a.size() == n && a[0]->kind == Kind::Tensor, callable.text, " expects a tensor and ", n - 1,
              " more arguments");
        return a[0];
      }
      case PickleGlobal::StorageType:
      case PickleGlobal::Namespace: break;  // built by NEWOBJ, never called
    }
    fail("refusing to call ", callable.text);
  }

  std::span<const uint8_t> data_;
  const std::string& where_;
  size_t pos_ = 0, op_pos_ = 0, values_ = 0;
  std::vector<PickleValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, PickleValuePtr> memo_;
};

}  // namespace

PickleValuePtr unpickle_torch(std::span<const uint8_t> data, const std::string& where) {
  return Unpickler(data, where).run();
}

}  // namespace vitrt::io
