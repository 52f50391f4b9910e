// File helpers the train engines' checkpoints share: JSON reads with errors
// naming the file, and the Hugging Face export directory.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_common {

// IoError for a missing file (naming `what` it belongs to), FormatError for bad JSON.
nlohmann::json read_json(const std::filesystem::path& path, const std::string& what);

// A Hugging Face checkpoint directory: `tensors` as model.safetensors (sharded
// above 2 GB, with an index), `config` as config.json, and every other file of
// `source_dir` (tokenizer, generation config) copied unchanged.
void write_hf_export(const std::filesystem::path& dir, const nlohmann::json& config, const NamedTensors& tensors,
                     const std::filesystem::path& source_dir);

}  // namespace rlcore::train_common
