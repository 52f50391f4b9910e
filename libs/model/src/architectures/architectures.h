// The registered architectures, one file each (architecture.cc lists them), and
// the pieces a family built on another one reuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/model/architecture.h"

namespace rlcore::model {

Architecture deepseek_v3_architecture();
Architecture gemma2_architecture();
Architecture llama_architecture();
Architecture mistral_architecture();
Architecture mixtral_architecture();
Architecture qwen2_architecture();
Architecture qwen3_architecture();
Architecture qwen3_moe_architecture();

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
