// Reads the HF checkpoint directory infer-native serves (ComponentContext::model_path):
// config.json and the safetensors weights, single-file or sharded.
#pragma once

#include <string>

#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"

namespace rlcore::infer_native {

// Throws ConfigError naming model_path when it is empty or not a directory;
// the config loader's errors (IoError / ConfigError naming config.json) pass through.
model::ModelConfig read_model_config(const std::string& model_path);

// Strictly loads every parameter of `model` from the directory's safetensors
// files (memory-mapped, converted to the model's dtype and device), each
// sliced to tensor-parallel rank tp_rank's shard (tp_slice). IoError /
// FormatError name the file; a missing, unexpected or misshapen tensor is a
// ValueError naming the tensor and the directory.
void load_checkpoint_weights(model::Transformer& model, const std::string& model_path, int64_t tp_rank = 0,
                             int64_t tp_size = 1);

}  // namespace rlcore::infer_native
