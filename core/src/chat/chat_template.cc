// ChatTemplate: the checkpoint's template text and special tokens, rendered
// with the variables transformers' apply_chat_template passes.
#include "rlcore/core/chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "chat/jinja_render.h"

namespace fs = std::filesystem;

namespace rlcore::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// transformers 5 fills reasoning_content from its older names (and thinking
// from it, for templates that read that) before rendering.
Json alias_reasoning_fields(const Json& messages) {
  Json aliased = Json::array();
  for (const Json& message : messages) {
    if (!message.is_object()) {
      aliased.push_back(message);
      continue;
    }
    const Json* reasoning = nullptr;
    for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
      const auto it = message.find(field);
      if (it != message.end() && !it->is_null()) {
        reasoning = &*it;
        break;
      }
    }
    if (reasoning == nullptr) {
      aliased.push_back(message);
      continue;
    }
    Json copy = {{"thinking", *reasoning}};
    for (const auto& [key, value] : message.items()) copy[key] = value;
    copy["reasoning_content"] = *reasoning;
    aliased.push_back(std::move(copy));
  }
  return aliased;
}

// tokenizer_config.json's special tokens, as strings (they may be {"content": ...}).
Json special_tokens_of(const Json& config) {
  Json tokens = Json::object();
  for (const char* name :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto it = config.find(name);
    if (it == config.end() || it->is_null()) continue;
    if (it->is_string())
      tokens[name] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      tokens[name] = (*it)["content"];
  }
  return tokens;
}

}  // namespace

struct ChatTemplate::Impl {
  std::string source;
  chat::jinja::Body body;
  Json special_tokens;
};

ChatTemplate::ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate&) = default;
ChatTemplate& ChatTemplate::operator=(const ChatTemplate&) = default;

ChatTemplate ChatTemplate::from_string(const std::string& source, Json special_tokens) {
  auto impl = std::make_shared<Impl>();
  impl->source = source;
  impl->body = chat::jinja::parse_template(source);
  impl->special_tokens = std::move(special_tokens);
  return ChatTemplate(std::move(impl));
}

std::optional<ChatTemplate> ChatTemplate::from_checkpoint(const fs::path& dir) {
  const fs::path config_path = dir / "tokenizer_config.json";
  Json config = Json::object();
  if (fs::exists(config_path)) {
    try {
      config = Json::parse(read_text(config_path));
    } catch (const Json::parse_error& e) {
      throw FormatError(config_path.string() + ": invalid JSON: " + e.what());
    }
  }
  const Json tokens = special_tokens_of(config);
  const fs::path jinja_file = dir / "chat_template.jinja";
  try {
    if (fs::exists(jinja_file)) return from_string(read_text(jinja_file), tokens);
    const auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return from_string(it->get<std::string>(), tokens);
    if (it->is_array()) {  // named templates: the "default" one is the chat template
      for (const Json& entry : *it) {
        if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
            entry["template"].is_string()) {
          return from_string(entry["template"].get<std::string>(), tokens);
        }
      }
      return std::nullopt;
    }
  } catch (const ChatTemplateError& e) {
    throw ChatTemplateError(std::string(e.what()) + " in " +
                            (fs::exists(jinja_file) ? jinja_file : config_path).string());
  }
  throw FormatError(config_path.string() + ": chat_template must be a string or a list of {name, template}");
}

std::string ChatTemplate::render(const Json& messages, const ChatTemplateOptions& options) const {
  if (!messages.is_array()) throw ChatTemplateError("chat template: messages must be a list");
  Json variables = impl_->special_tokens;
  if (options.extra.is_object()) {
    for (const auto& [key, value] : options.extra.items()) variables[key] = value;  // as transformers: kwargs win
  }
  variables["messages"] = alias_reasoning_fields(messages);
  variables["tools"] = options.tools;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = options.add_generation_prompt;
  return chat::jinja::render(impl_->body, variables);
}

const std::string& ChatTemplate::source() const { return impl_->source; }

}  // namespace rlcore::chat
