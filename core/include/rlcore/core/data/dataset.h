// Prompt datasets for RL and SFT: verl's dataset rows as JSON (JSONL or a JSON
// array), read once, templated, tokenized and length-checked up front, so a bad
// record fails before training starts with an error naming its file and line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/config_node.h"
#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/config/data_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore::data {

// Renders a chat-message list [{role, content}, ...] into the prompt text,
// generation prompt included: the checkpoint's chat template (see the trainers).
using ChatRenderer = std::function<std::string(const nlohmann::json& messages)>;

// Multi-turn SFT: a response given as chat messages (assistant turns and tool
// results) as ids and the loss mask (1: the assistant's tokens), in the agent
// loop's layout (rlcore/core/agent/agent_loop.h).
struct AssembledResponse {
  std::vector<int32_t> ids;
  std::vector<uint8_t> loss_mask;
};
using ResponseAssembler =
    std::function<AssembledResponse(const nlohmann::json& prompt_messages, const nlohmann::json& response_messages)>;

// data.apply_chat_template_kwargs as template options (generation prompt on).
// Throws ConfigError when they are not a map.
RLCORE_API chat::ChatTemplateOptions data_chat_template_options(const config::DataConfig& config);

// The chat template of the checkpoint in `model_dir` (rlcore/core/chat/chat_template.h)
// with data.apply_chat_template_kwargs, generation prompt on, and `tools` (the
// agent loop's tool schemas, or null); empty when the checkpoint has none.
// Throws chat::ChatTemplateError / FormatError naming the file.
RLCORE_API ChatRenderer checkpoint_chat_renderer(const std::string& model_dir, const config::DataConfig& config,
                                                 const nlohmann::ordered_json& tools = nullptr);

struct Example {
  std::vector<int32_t> prompt_ids;          // template applied, tokenized, truncated
  nlohmann::json prompt_messages;           // the prompt as chat messages, system prompt included (verl's raw_prompt)
  std::vector<int32_t> response_ids;        // SFT only (eos appended); empty otherwise
  std::vector<uint8_t> response_loss_mask;  // SFT from chat messages: 1 for the assistant's tokens; empty: all count
  std::string data_source;                  // record's "data_source" (default: "unknown")
  std::string ground_truth;                 // record's reward_model.ground_truth (numbers printed), or ""
  nlohmann::json extra_info;                // record's "extra_info" or null
  std::string agent_name;                   // record's "agent_name" (verl's agent loop name), or ""
  int64_t index = 0;                        // record index in its file set (counted before filtering)
};

// Immutable once loaded; copies share the examples.
class RLCORE_API Dataset {
 public:
  // Reads every file (.parquet: one row per record, verl's layout; .jsonl: one object
  // per line, blank lines skipped; .json: an array of objects). Throws IoError for an
  // unreadable file, FormatError naming the file, row (parquet), line (jsonl) or
  // element (json) and key or column for a bad record, and ValueError for
  // a prompt over max_prompt_length with truncation "error" or an empty file set.
  // With a `chat_renderer`, data.apply_chat_template and prompt_template "chat",
  // prompts are rendered by it (a string prompt as one user message) instead of ChatML.
  // With `assembler` (SFT), a response may be a list of chat messages.
  static Dataset load(const std::vector<std::string>& files, const config::DataConfig& config,
                      const Tokenizer& tokenizer, bool with_responses, const ChatRenderer& chat_renderer = {},
                      const ResponseAssembler& assembler = {});

  Dataset();
  int64_t size() const;
  // Throws ValueError for an index outside [0, size()).
  const Example& at(int64_t i) const;
  // Records dropped by filter_overlong_prompts.
  int64_t filtered_count() const { return filtered_; }

 private:
  std::shared_ptr<const std::vector<Example>> examples_;
  int64_t filtered_ = 0;
};

}  // namespace rlcore::data
