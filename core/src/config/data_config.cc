// The `data` config section's schema (verl's key names and defaults).
#include "rlcore/core/config/data_config.h"

#include "rlcore/tokenizer/prompt_template.h"

namespace rlcore::config {

const OptionsSchema<DataConfig>& data_config_schema() {
  static const OptionsSchema<DataConfig> schema = [] {
    OptionsSchema<DataConfig> data;
    data.key("train_files", &DataConfig::train_files,
             "Training data: a .parquet, .jsonl or .json file or a list of them (verl's row layout).", {},
             read_one_or_many)
        .key("val_files", &DataConfig::val_files, "Validation data: a file or a list of files.", {}, read_one_or_many)
        .key("prompt_key", &DataConfig::prompt_key,
             "Record field holding the prompt: a string or a list of chat messages [{role, content}].")
        .key("response_key", &DataConfig::response_key, "SFT only: record field holding the response text.")
        .key("max_prompt_length", &DataConfig::max_prompt_length, "Longest prompt in tokens, after the template.",
             at_least(1))
        .key("max_response_length", &DataConfig::max_response_length,
             "Longest response in tokens (generation limit; SFT responses are cut on the right).", at_least(1))
        .key("train_batch_size", &DataConfig::train_batch_size, "Prompts per training step.", at_least(1))
        .key("val_batch_size", &DataConfig::val_batch_size, "Prompts per validation batch (0: all in one).",
             at_least(0))
        .key("truncation", &DataConfig::truncation,
             "Prompts over max_prompt_length: error, or keep the last (left) or first (right) tokens.",
             one_of({"error", "left", "right"}))
        .key("filter_overlong_prompts", &DataConfig::filter_overlong_prompts,
             "Drop prompts over max_prompt_length when loading instead of applying truncation.")
        .key("shuffle", &DataConfig::shuffle, "Reshuffle the training set every epoch.")
        .key("seed", &DataConfig::seed, "Seed of the shuffle: epoch e's order depends only on (seed, e).")
        .key("prompt_template", &DataConfig::prompt_template,
             "How prompts are wrapped: chat (ChatML) or plain (the text as is).", one_of(PromptTemplate::names()))
        .key("system_prompt", &DataConfig::system_prompt,
             "System message for the chat template (a record's own system message replaces it).")
        .key("apply_chat_template", &DataConfig::apply_chat_template,
             "Render prompts with the checkpoint's own chat_template (tokenizer_config.json or chat_template.jinja) "
             "when it has one, as verl does; otherwise, or when false, prompt_template applies. plain always wins.")
        .subtree("apply_chat_template_kwargs", &DataConfig::apply_chat_template_kwargs,
                 "Extra variables for the checkpoint's chat template, e.g. {enable_thinking: false} (verl's key).");
    return data;
  }();
  return schema;
}

}  // namespace rlcore::config
