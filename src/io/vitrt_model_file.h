// vitrt model files: dense tensors plus BSR weights packed once, stored so that loading needs no
// repacking. The container is plain safetensors (any safetensors reader sees ordinary tensors):
// a BSR weight `name` is stored as three tensors
//   name.bsr_values   F32|BF16 [nnz, block, block]
//   name.bsr_col_idx  I32 [nnz]
//   name.bsr_row_ptr  I32 [rows/block + 1]
// and the header's "__metadata__" (a string -> string map) holds
//   "name.bsr": "{\"rows\": R, \"cols\": C, \"block\": B}"
//   "format":   "vitrt-model-1"
// Tensors are written largest element size first and the header is padded to 8 bytes, so every
// tensor is naturally aligned in the file and is used in place from the memory map.
#pragma once
#include <map>
#include <string>

#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"

namespace vitrt::io {

inline constexpr const char* kVitrtModelFormat = "vitrt-model-1";

struct ModelFile {
  StateDict dense;                             // every tensor that is not part of a BSR weight
  std::map<std::string, BsrMatrix> sparse;     // BSR weights by their original name
  std::map<std::string, std::string> metadata;  // the rest of __metadata__ (e.g. "format", "sparsify.*")
};

// Writes `dense` and `sparse` (each validated first) to `path`. Names must be unique across both
// maps and a dense name may not end in a BSR suffix. `metadata` is stored in __metadata__ next to
// the BSR entries (keys ending in ".bsr" are reserved). Throws InvalidArgument / IoError.
void write_model_file(const std::string& path, const StateDict& dense, const std::map<std::string, BsrMatrix>& sparse,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a file written by write_model_file (or any safetensors file: then everything is dense).
// Every BSR weight is checked with validate() -- out-of-range or unsorted indices, wrong sizes or
// dtypes, bad block sizes, orphan or missing parts all throw CheckpointError naming the file and
// the weight. The tensors point into the memory-mapped file.
ModelFile load_model_file(const std::string& path);

// Convenience for model loaders: a BSR weight turned back into a dense tensor of its values' dtype.
// (The sparse model's "folded" dense twin.)
StateDict fold_to_dense(const ModelFile& f);

}  // namespace vitrt::io
