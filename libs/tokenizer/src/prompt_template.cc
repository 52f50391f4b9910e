// The prompt templates the built-in tasks offer, chosen by name in the config.
#include "rlcore/tokenizer/prompt_template.h"

#include <utility>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {
namespace {

struct NamedKind {
  const char* name;
  PromptTemplate::Kind kind;
};

constexpr NamedKind kKinds[] = {
    {"chat", PromptTemplate::Kind::kChat},
    {"plain", PromptTemplate::Kind::kPlain},
};

}  // namespace

PromptTemplate::PromptTemplate(Kind kind, std::string system_message)
    : kind_(kind), system_message_(std::move(system_message)) {}

PromptTemplate PromptTemplate::from_name(std::string_view name, std::string system_message) {
  for (const NamedKind& entry : kKinds) {
    if (name != entry.name) continue;
    if (entry.kind == Kind::kPlain && !system_message.empty()) {
      throw ConfigError("prompt template 'plain' takes no system message; use 'chat' for one");
    }
    return PromptTemplate(entry.kind, std::move(system_message));
  }
  throw ConfigError("unknown prompt template '" + std::string(name) + "' (valid: " + join(names()) + ")");
}

std::vector<std::string> PromptTemplate::names() {
  std::vector<std::string> result;
  for (const NamedKind& entry : kKinds) result.emplace_back(entry.name);
  return result;
}

std::string PromptTemplate::name() const {
  for (const NamedKind& entry : kKinds) {
    if (entry.kind == kind_) return entry.name;
  }
  return "";
}

std::string PromptTemplate::apply(std::string_view prompt) const {
  if (kind_ == Kind::kPlain) return std::string(prompt);
  std::string text;
  if (!system_message_.empty()) {
    text.append("<|im_start|>system\n").append(system_message_).append("<|im_end|>\n");
  }
  text.append("<|im_start|>user\n").append(prompt).append("<|im_end|>\n<|im_start|>assistant\n");
  return text;
}

}  // namespace rlcore
