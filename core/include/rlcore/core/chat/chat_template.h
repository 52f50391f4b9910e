// A checkpoint's own chat template (Jinja, as Hugging Face stores it), rendered
// without Python: the prompt text transformers' apply_chat_template(...,
// tokenize=False) gives, byte for byte, for the constructs real templates use
// (docs/chat-templates.md). A construct the renderer lacks is an error naming
// it, never a different prompt.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rlcore/error.h"
#include "rlcore/export.h"

namespace rlcore::chat {

// A template that cannot be parsed or rendered: its raise_exception message,
// an unsupported filter / test / statement, a type error; names the line.
class RLCORE_API ChatTemplateError : public ValueError {
 public:
  using ValueError::ValueError;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;  // null or an array of tool schemas
  // Extra template variables (verl's apply_chat_template_kwargs, vLLM's
  // chat_template_kwargs), e.g. {"enable_thinking": false}.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class RLCORE_API ChatTemplate {
 public:
  // Throws ChatTemplateError for a syntax error. `special_tokens` (bos_token,
  // eos_token, ...: strings) are template variables, as transformers passes them.
  static ChatTemplate from_string(const std::string& source,
                                  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());
  // <dir>/chat_template.jinja, else tokenizer_config.json's chat_template (a
  // string, or the "default" entry of a list of {name, template}); the special
  // tokens from tokenizer_config.json. nullopt when the checkpoint has none.
  // Throws IoError / FormatError naming the file for an unreadable or bad one.
  static std::optional<ChatTemplate> from_checkpoint(const std::filesystem::path& dir);

  // `messages`: [{role, content, ...}, ...]. Throws ChatTemplateError.
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options = {}) const;

  const std::string& source() const;

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&);
  ChatTemplate& operator=(const ChatTemplate&);

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace rlcore::chat
