// The registered architectures, one file each (the build lists them), and the
// pieces a family built on another one reuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/model/architecture.h"

namespace rlcore::model {

// Every file here, <family>.cc, defines `Architecture <family>_architecture()`;
// the build lists them (libs/CMakeLists.txt generates architecture_files.cc),
// so a new family is one new file.
std::vector<Architecture> architecture_files();

// mistral.cc: `sliding_window` (absent: `absent`, null: none), read and written.
void read_mistral_sliding_window(const nlohmann::json& json, const std::string& source, std::optional<int64_t> absent,
                                 ModelConfig& config);
void write_mistral_keys(const ModelConfig& config, nlohmann::json& json);
// qwen2.cc: the sliding-window keys Qwen2Config and its successors write (always off).
void write_qwen2_keys(const ModelConfig& config, nlohmann::json& json);
// qwen2.cc: the Qwen 2/3 presets' RoPE base and norm epsilon.
void set_qwen_preset(ModelConfig& config);
// qwen3.cc: Qwen3Config's keys.
void write_qwen3_keys(const ModelConfig& config, nlohmann::json& json);

}  // namespace rlcore::model
