// Hugging Face transformers (SamModel, facebook/sam-vit-*) checkpoints use different names for the
// same SAM weights. These map them back to the official segment-anything names
// (image_encoder.*, prompt_encoder.*, mask_decoder.*), which the rest of vitrt uses.
#pragma once
#include "vitrt/checkpoint.h"

namespace vitrt {

// True when the names look like a transformers SamModel state_dict (vision_encoder.*, ...).
bool is_hf_sam_state_dict(const StateDict& sd);
// Renames every key to its official name; tensors are moved, never copied or reshaped (the two
// layouts agree on shapes). The positional-embedding matrix HF stores twice (tied) becomes
// prompt_encoder.pe_layer.positional_encoding_gaussian_matrix. Throws CheckpointError on a key it
// does not recognise.
StateDict sam_state_dict_from_hf(StateDict hf);

}  // namespace vitrt
