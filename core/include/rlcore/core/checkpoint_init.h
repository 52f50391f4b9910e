// Writing Hugging Face checkpoint directories (config, safetensors weights,
// tokenizer and generation config) and `rlcore model init`'s random presets.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore {

// Weights above this are split into shards plus model.safetensors.index.json.
inline constexpr std::uint64_t kCheckpointMaxShardBytes = 2'000'000'000;

// What a checkpoint directory needs to rebuild a tokenizer with HF's AutoTokenizer.
struct TokenizerFiles {
  std::string tokenizer_json;  // the text of tokenizer.json
  SpecialTokenNames special_tokens;
  std::string chat_template;  // Jinja; empty to leave it out
};

// The built-in tokenizer (make_builtin_tokenizer) with a ChatML chat template.
RLCORE_API TokenizerFiles builtin_tokenizer_files();

// Writes into `dir` (created if needed) config.json, model.safetensors (or
// shards + index above `max_shard_bytes`), tokenizer.json,
// tokenizer_config.json and generation_config.json. Existing files of the
// same names are replaced. Returns the files written. Throws IoError naming
// the file that could not be written, ValueError for a bad tensor.
RLCORE_API std::vector<std::filesystem::path> write_hf_checkpoint(
    const std::filesystem::path& dir, const model::ModelConfig& config, const model::NamedTensors& weights,
    const TokenizerFiles& tokenizer, std::uint64_t max_shard_bytes = kCheckpointMaxShardBytes);

struct ModelInitOptions {
  std::string arch;  // llama | qwen2 | qwen3 | qwen3_moe | deepseek_v3
  std::string size;  // tiny | 100m | 1b
  std::filesystem::path out;
  std::uint64_t seed = 0;
  std::string dtype;   // float32 | bfloat16; empty: the preset's
  bool force = false;  // write into a non-empty `out`
};

struct ModelInitResult {
  model::ModelConfig config;
  int64_t num_parameters = 0;
  std::uint64_t bytes = 0;  // the files' total size
  std::vector<std::filesystem::path> files;
};

// A randomly initialised preset(arch, size) with the built-in tokenizer's
// vocabulary (rounded up to a multiple of 64) and special tokens, written by
// write_hf_checkpoint. Throws ConfigError for an unknown arch/size/dtype or a
// non-empty `out` without `force`.
RLCORE_API ModelInitResult init_random_checkpoint(const ModelInitOptions& options);

}  // namespace rlcore
