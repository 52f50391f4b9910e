// The `data` config section: where the prompts come from and how they are
// templated, cut and batched (verl's key names and defaults).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct DataConfig {
  std::vector<std::string> train_files;   // data.train_files: a path or a list (jsonl or json array)
  std::vector<std::string> val_files;     // data.val_files
  std::string prompt_key = "prompt";      // a string, or a chat message list [{role, content}, ...]
  std::string response_key = "response";  // SFT only: a string
  int64_t max_prompt_length = 512;        // tokens after the template
  int64_t max_response_length = 512;      // SFT: longer responses are truncated (right)
  int64_t train_batch_size = 1024;        // prompts per step
  int64_t val_batch_size = 0;             // 0: whole val set in one batch
  std::string truncation = "error";       // error | left | right  (prompts over max_prompt_length)
  bool filter_overlong_prompts = false;   // drop instead of truncating/erroring
  bool shuffle = true;
  int64_t seed = 1;
  std::string prompt_template = "chat";  // chat | plain  (rlcore/tokenizer/prompt_template.h)
  std::string system_prompt;             // chat only
  // Render prompts with the checkpoint's own chat_template when it has one
  // (verl's default); prompt_template's ChatML is the fallback.
  bool apply_chat_template = true;
  ConfigNode apply_chat_template_kwargs;  // extra template variables, e.g. {enable_thinking: false}
};

// For the trainer's config (a `section("data", ...)`); train_files/val_files accept a
// single path as well as a list.
RLCORE_API const OptionsSchema<DataConfig>& data_config_schema();

}  // namespace rlcore::config
