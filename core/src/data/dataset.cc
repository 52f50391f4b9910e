// Dataset::load: records -> templated, tokenized, length-checked examples.
#include "rlcore/core/data/dataset.h"

#include <utility>

#include "data/records.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer/prompt_template.h"

namespace rlcore::data {
namespace {

// What a record's prompt field says: the user text and, for chat message lists,
// the system text (empty when there is none).
struct PromptText {
  std::string user;
  std::string system;
};

void append_paragraph(std::string& text, const std::string& part) { text += (text.empty() ? "" : "\n") + part; }

PromptText read_messages(const nlohmann::json& messages, const std::string& where, const std::string& key) {
  PromptText text;
  bool has_user = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& message = messages[i];
    const std::string at = where + ": key '" + key + "[" + std::to_string(i) + "]'";
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content") || !message["content"].is_string()) {
      throw FormatError(at + ": a chat message must be an object with string 'role' and 'content'");
    }
    const std::string role = message["role"];
    if (role == "system") {
      append_paragraph(text.system, message["content"]);
    } else if (role == "user") {
      append_paragraph(text.user, message["content"]);
      has_user = true;
    } else {
      throw FormatError(at + ": role '" + role + "' is not supported in a prompt (only system and user)");
    }
  }
  if (!has_user) throw FormatError(where + ": key '" + key + "' has no user message");
  return text;
}

PromptText read_prompt(const nlohmann::json& record, const std::string& where, const std::string& key) {
  const auto it = record.find(key);
  if (it == record.end()) throw FormatError(where + ": missing key '" + key + "' (data.prompt_key)");
  if (it->is_string()) return PromptText{it->get<std::string>(), ""};
  if (it->is_array()) return read_messages(*it, where, key);
  throw FormatError(where + ": key '" + key + "' must be a string or a list of chat messages, got " +
                    std::string(it->type_name()));
}

std::string read_ground_truth(const nlohmann::json& record) {
  const auto reward_model = record.find("reward_model");
  if (reward_model == record.end() || !reward_model->is_object()) return "";
  const auto truth = reward_model->find("ground_truth");
  if (truth == reward_model->end() || truth->is_null()) return "";
  // Graders compare text; numeric ground truths (gsm8k-style) are printed.
  return truth->is_string() ? truth->get<std::string>() : truth->dump();
}

std::string read_data_source(const nlohmann::json& record, const std::string& where) {
  const auto it = record.find("data_source");
  if (it == record.end() || it->is_null()) return "unknown";
  if (!it->is_string()) throw FormatError(where + ": key 'data_source' must be a string");
  return it->get<std::string>();
}

// The record's prompt as chat messages for a chat template: a message list as
// given (each an object with string role and content), a string as one user
// message; data.system_prompt leads when the record has no system message.
nlohmann::json prompt_messages(const nlohmann::json& record, const std::string& where,
                               const config::DataConfig& config) {
  const auto it = record.find(config.prompt_key);
  if (it == record.end()) throw FormatError(where + ": missing key '" + config.prompt_key + "' (data.prompt_key)");
  nlohmann::json messages;
  if (it->is_string()) {
    messages = nlohmann::json::array({{{"role", "user"}, {"content", *it}}});
  } else if (it->is_array() && !it->empty()) {
    messages = *it;
  } else {
    throw FormatError(where + ": key '" + config.prompt_key +
                      "' must be a string or a non-empty list of chat messages");
  }
  bool has_system = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content") || !message["content"].is_string()) {
      throw FormatError(where + ": key '" + config.prompt_key + "[" + std::to_string(i) +
                        "]': a chat message must be an object with string 'role' and 'content'");
    }
    has_system = has_system || message["role"] == "system";
  }
  if (!has_system && !config.system_prompt.empty()) {
    messages.insert(messages.begin(), nlohmann::json{{"role", "system"}, {"content", config.system_prompt}});
  }
  return messages;
}

class ExampleBuilder {
 public:
  ExampleBuilder(const config::DataConfig& config, const Tokenizer& tokenizer, bool with_responses,
                 const ChatRenderer& chat_renderer, const ResponseAssembler& assembler)
      : config_(config),
        tokenizer_(tokenizer),
        with_responses_(with_responses),
        assembler_(assembler),
        chat_renderer_(config.apply_chat_template && config.prompt_template == "chat" ? chat_renderer : ChatRenderer()),
        // Validates the template name and rejects a system prompt for "plain".
        default_template_(PromptTemplate::from_name(config.prompt_template, config.system_prompt)) {
    if (config.truncation != "error" && config.truncation != "left" && config.truncation != "right") {
      throw ConfigError("data.truncation: unknown value '" + config.truncation + "'; values are: error, left, right");
    }
    if (config.max_prompt_length < 1 || config.max_response_length < 1) {
      throw ConfigError("data.max_prompt_length and data.max_response_length must be >= 1, got " +
                        std::to_string(config.max_prompt_length) + " and " +
                        std::to_string(config.max_response_length));
    }
    if (with_responses && !tokenizer.eos_token_id()) {
      throw ValueError("SFT data needs an eos token to end each response, and the tokenizer has none");
    }
  }

  // The example for `record`, or false when filter_overlong_prompts drops it.
  bool build(const nlohmann::json& record, const std::string& where, Example& example) const {
    if (!prompt_ids(record, where, example.prompt_ids)) return false;
    example.prompt_messages = prompt_messages(record, where, config_);
    if (with_responses_) read_response(record, where, example);
    const auto agent = record.find("agent_name");
    if (agent != record.end() && !agent->is_null()) {
      if (!agent->is_string()) throw FormatError(where + ": key 'agent_name' must be a string");
      example.agent_name = agent->get<std::string>();
    }
    example.data_source = read_data_source(record, where);
    example.ground_truth = read_ground_truth(record);
    const auto extra = record.find("extra_info");
    example.extra_info = extra == record.end() ? nlohmann::json() : *extra;
    return true;
  }

 private:
  std::string apply_template(const PromptText& prompt) const {
    // A record's own system message takes the place of data.system_prompt; "plain" has no slot for either.
    if (prompt.system.empty() || default_template_.kind() == PromptTemplate::Kind::kPlain) {
      return default_template_.apply(prompt.user);
    }
    return PromptTemplate::from_name(config_.prompt_template, prompt.system).apply(prompt.user);
  }

  std::string prompt_text(const nlohmann::json& record, const std::string& where) const {
    if (!chat_renderer_) return apply_template(read_prompt(record, where, config_.prompt_key));
    try {
      return chat_renderer_(prompt_messages(record, where, config_));
    } catch (const FormatError&) {
      throw;
    } catch (const std::exception& e) {
      throw ValueError(where + ": the checkpoint's chat template failed: " + e.what());
    }
  }

  bool prompt_ids(const nlohmann::json& record, const std::string& where, std::vector<int32_t>& ids) const {
    // As verl: the template's text tokenized without the post-processor (add_special_tokens=False).
    ids = tokenizer_.encode(prompt_text(record, where));
    const auto limit = static_cast<size_t>(config_.max_prompt_length);
    if (ids.size() <= limit) return true;
    if (config_.filter_overlong_prompts) return false;
    if (config_.truncation == "left") {
      ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(limit));
    } else if (config_.truncation == "right") {
      ids.resize(limit);
    } else {
      throw ValueError(where + ": prompt is " + std::to_string(ids.size()) + " tokens after the template, over " +
                       "data.max_prompt_length=" + std::to_string(limit) +
                       "; raise it, set data.truncation to left or right, or data.filter_overlong_prompts=true");
    }
    return true;
  }

  // A string (eos appended), or (with an assembler) the assistant and tool messages of a multi-turn demonstration.
  void read_response(const nlohmann::json& record, const std::string& where, Example& example) const {
    const auto it = record.find(config_.response_key);
    if (it == record.end()) {
      throw FormatError(where + ": missing key '" + config_.response_key + "' (data.response_key)");
    }
    const auto limit = static_cast<size_t>(config_.max_response_length);
    if (it->is_array() && assembler_) {
      AssembledResponse assembled;
      try {
        assembled = assembler_(example.prompt_messages, *it);
      } catch (const std::exception& e) {
        throw FormatError(where + ": key '" + config_.response_key + "': " + e.what());
      }
      example.response_ids = std::move(assembled.ids);
      example.response_loss_mask = std::move(assembled.loss_mask);
      if (example.response_ids.size() > limit) {
        example.response_ids.resize(limit);
        example.response_loss_mask.resize(limit);
      }
      return;
    }
    if (!it->is_string()) {
      throw FormatError(where + ": key '" + config_.response_key + "' must be a string" +
                        (it->is_array() ? std::string(" (a message list needs a checkpoint with a chat template)")
                                        : ", got " + std::string(it->type_name())));
    }
    std::vector<int32_t> ids = tokenizer_.encode(it->get<std::string>(), /*parse_special_tokens=*/false);
    ids.push_back(*tokenizer_.eos_token_id());
    if (ids.size() > limit) ids.resize(limit);
    example.response_ids = std::move(ids);
  }

  const config::DataConfig& config_;
  const Tokenizer& tokenizer_;
  bool with_responses_;
  ResponseAssembler assembler_;  // empty: string responses only
  ChatRenderer chat_renderer_;   // empty: ChatML or plain (default_template_)
  PromptTemplate default_template_;
};

}  // namespace

Dataset::Dataset() : examples_(std::make_shared<const std::vector<Example>>()) {}

Dataset Dataset::load(const std::vector<std::string>& files, const config::DataConfig& config,
                      const Tokenizer& tokenizer, bool with_responses, const ChatRenderer& chat_renderer,
                      const ResponseAssembler& assembler) {
  if (files.empty()) throw ValueError("no dataset files given (data.train_files / data.val_files)");
  const ExampleBuilder builder(config, tokenizer, with_responses, chat_renderer, assembler);
  auto examples = std::make_shared<std::vector<Example>>();
  Dataset dataset;
  int64_t index = 0;
  for (const std::string& file : files) {
    data::records::for_each_record(file, [&](const nlohmann::json& record, const std::string& where) {
      Example example;
      example.index = index++;
      if (builder.build(record, where, example)) {
        examples->push_back(std::move(example));
      } else {
        ++dataset.filtered_;
      }
    });
  }
  if (examples->empty()) {
    std::string names;
    for (const std::string& file : files) names += (names.empty() ? "'" : ", '") + file + "'";
    throw ValueError("dataset " + names + " has no examples (" + std::to_string(dataset.filtered_) +
                     " dropped by data.filter_overlong_prompts)");
  }
  dataset.examples_ = std::move(examples);
  return dataset;
}

int64_t Dataset::size() const { return static_cast<int64_t>(examples_->size()); }

const Example& Dataset::at(int64_t i) const {
  if (i < 0 || i >= size()) {
    throw ValueError("dataset index " + std::to_string(i) + " is outside [0, " + std::to_string(size()) + ")");
  }
  return (*examples_)[static_cast<size_t>(i)];
}

}  // namespace rlcore::data
