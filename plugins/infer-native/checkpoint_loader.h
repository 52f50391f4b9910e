// Reads the weights of the HF checkpoint directory infer-native serves
// (ComponentContext::model_path), single-file or sharded; its config.json is
// ModelConfig::from_checkpoint_dir's.
#pragma once

#include <string>

#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"

namespace rlcore::infer_native {

// Strictly loads every parameter of `model` from the directory's safetensors
// files (memory-mapped, converted to the model's dtype and device), each
// sliced to tensor-parallel rank tp_rank's shard (tp_slice). IoError /
// FormatError name the file; a missing, unexpected or misshapen tensor is a
// ValueError naming the tensor and the directory.
void load_checkpoint_weights(model::Transformer& model, const std::string& model_path, int64_t tp_rank = 0,
                             int64_t tp_size = 1);

}  // namespace rlcore::infer_native
