// Loading weights: PyTorch .pth files (torch.save zip archives holding a pickled state_dict) through
// a restricted unpickler that never runs code, and safetensors files. Storages are memory-mapped
// and used in place when the layout allows (stored, aligned zip entries), copied otherwise.
#pragma once
#include <map>
#include <string>

#include "vitrt/tensor.h"

namespace vitrt {

// Tensor name -> tensor. Tensors keep the checkpoint's dtype; call to_f32() where needed.
using StateDict = std::map<std::string, Tensor>;

// torch.save zip archive with a state_dict (a dict/OrderedDict of tensors, possibly nested under
// "model" or "state_dict"). Anything in the pickle beyond what a state_dict needs is refused with a
// CheckpointError naming the offending global or opcode.
StateDict load_torch_checkpoint(const std::string& path);
// A torch.save checkpoint as training scripts write it: a dict with the weights under "model"
// next to "optimizer", "epoch", "args" (an argparse.Namespace, read as plain data) and the like.
struct TorchCheckpoint {
  StateDict state_dict;
  // The scalars beside the weights: top-level ones ("epoch" -> "2") and those one level down in
  // top-level dicts and Namespaces ("args.sparsity_linear" -> "0.8"). ints in decimal, floats as
  // the shortest text that reads back the same double, bools "True" / "False", None "None".
  std::map<std::string, std::string> settings;
};
// entry "": the state_dict chosen as by load_torch_checkpoint; else the top-level entry of that
// name (e.g. "model_ema"), which must be a dict of tensors (CheckpointError otherwise, naming the
// entries that are).
TorchCheckpoint load_torch_checkpoint_with_settings(const std::string& path, const std::string& entry = "");
// Hugging Face safetensors.
StateDict load_safetensors(const std::string& path);
// Either of the above, chosen from the file's first bytes.
StateDict load_state_dict(const std::string& path);

}  // namespace vitrt
