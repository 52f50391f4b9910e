// Writes HF checkpoint directories and the random presets of `rlcore model init`.
#include "rlcore/core/checkpoint_init.h"

#include <fstream>
#include <system_error>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTransformersVersion = "4.51.0";
constexpr int64_t kVocabMultiple = 64;

// ChatML, the format PromptTemplate "chat" produces.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw IoError("cannot write '" + path.string() + "'");
}

json token_or_null(const std::string& name) { return name.empty() ? json(nullptr) : json(name); }

// HF's tokenizer_config.json: special-token names, and added_tokens_decoder
// listing the added tokens by id as save_pretrained does.
std::string tokenizer_config_text(const TokenizerFiles& tokenizer, int64_t model_max_length) {
  const json tokenizer_json = json::parse(tokenizer.tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tokenizer_json.is_discarded()) throw ValueError("tokenizer.json text is not valid JSON");
  json decoder = json::object();
  if (tokenizer_json.contains("added_tokens") && tokenizer_json["added_tokens"].is_array()) {
    for (const json& token : tokenizer_json["added_tokens"]) {
      json entry = token;
      entry.erase("id");
      decoder[std::to_string(token.value("id", 0))] = entry;
    }
  }
  json config = {
      {"added_tokens_decoder", decoder},
      {"bos_token", token_or_null(tokenizer.special_tokens.bos)},
      {"clean_up_tokenization_spaces", false},
      {"eos_token", token_or_null(tokenizer.special_tokens.eos)},
      {"errors", "replace"},
      {"model_max_length", model_max_length},
      {"pad_token", token_or_null(tokenizer.special_tokens.pad)},
      {"split_special_tokens", false},
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"unk_token", nullptr},
  };
  if (!tokenizer.chat_template.empty()) config["chat_template"] = tokenizer.chat_template;
  return config.dump(2) + "\n";
}

std::string generation_config_text(const model::ModelConfig& config) {
  json generation = {{"_from_model_config", true}, {"transformers_version", kTransformersVersion}};
  if (config.bos_token_id) generation["bos_token_id"] = *config.bos_token_id;
  if (config.eos_token_ids.size() == 1) {
    generation["eos_token_id"] = config.eos_token_ids.front();
  } else if (!config.eos_token_ids.empty()) {
    generation["eos_token_id"] = config.eos_token_ids;
  }
  if (config.pad_token_id) generation["pad_token_id"] = *config.pad_token_id;
  return generation.dump(2) + "\n";
}

bool is_non_empty_directory(const fs::path& dir) {
  std::error_code error;
  return fs::is_directory(dir, error) && !fs::is_empty(dir, error);
}

}  // namespace

TokenizerFiles builtin_tokenizer_files() {
  TokenizerFiles files;
  files.tokenizer_json = make_builtin_tokenizer_json();
  files.special_tokens.eos = "<|im_end|>";
  files.special_tokens.pad = "<|endoftext|>";
  files.chat_template = kChatMlTemplate;
  return files;
}

std::vector<fs::path> write_hf_checkpoint(const fs::path& dir, const model::ModelConfig& config,
                                          const model::NamedTensors& weights, const TokenizerFiles& tokenizer,
                                          std::uint64_t max_shard_bytes) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw IoError("cannot create checkpoint directory '" + dir.string() + "': " + error.message());
  std::vector<fs::path> files;
  auto write = [&](const char* name, const std::string& text) {
    write_text_file(dir / name, text);
    files.push_back(dir / name);
  };
  write("config.json", config.to_json_text());
  for (const fs::path& file : save_safetensors_checkpoint(dir, weights, max_shard_bytes)) files.push_back(file);
  write("tokenizer.json", tokenizer.tokenizer_json);
  write("tokenizer_config.json", tokenizer_config_text(tokenizer, config.max_position_embeddings));
  write("generation_config.json", generation_config_text(config));
  return files;
}

ModelInitResult init_random_checkpoint(const ModelInitOptions& options) {
  if (options.out.empty()) throw ConfigError("model init: --out is required");
  if (!options.dtype.empty() && options.dtype != "float32" && options.dtype != "bfloat16") {
    throw ConfigError("model init: unknown dtype '" + options.dtype + "' (supported: float32, bfloat16)");
  }
  if (!options.force && is_non_empty_directory(options.out)) {
    throw ConfigError("model init: output directory '" + options.out.string() +
                      "' is not empty; choose another --out or pass --force to overwrite");
  }
  std::error_code error;
  if (fs::exists(options.out, error) && !fs::is_directory(options.out, error)) {
    throw ConfigError("model init: --out '" + options.out.string() + "' exists and is not a directory");
  }

  const Tokenizer tokenizer = make_builtin_tokenizer();
  const int64_t vocab = (tokenizer.vocab_size() + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple;
  model::ModelConfig config = model::preset(options.arch, options.size, vocab);
  if (!options.dtype.empty()) config.torch_dtype = options.dtype;
  if (auto bos = tokenizer.bos_token_id()) config.bos_token_id = *bos;
  if (auto eos = tokenizer.eos_token_id()) config.eos_token_ids = {*eos};

  model::Transformer model(config, model::ModelHead::kCausalLm, at::TensorOptions().dtype(config.dtype()));
  model.init_random(options.seed);

  ModelInitResult result;
  result.config = config;
  result.num_parameters = model::num_parameters(config);
  result.files = write_hf_checkpoint(options.out, config, model.named_parameters(), builtin_tokenizer_files());
  for (const fs::path& file : result.files) result.bytes += fs::file_size(file);
  return result;
}

}  // namespace rlcore
