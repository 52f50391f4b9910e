// PromptTemplate: wraps a task's user prompt into the text the policy sees,
// ChatML ("chat") or the prompt unchanged ("plain").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlcore {

class PromptTemplate {
 public:
  enum class Kind { kPlain, kChat };

  // Throws ConfigError listing the valid names when `name` is not one of
  // names(), or when a system message is given to "plain", which has no place for it.
  static PromptTemplate from_name(std::string_view name, std::string system_message = "");
  static std::vector<std::string> names();

  // chat: "<|im_start|>system\n{system}<|im_end|>\n" (only with a system
  // message), then "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n".
  std::string apply(std::string_view prompt) const;

  Kind kind() const { return kind_; }
  std::string name() const;
  const std::string& system_message() const { return system_message_; }

 private:
  PromptTemplate(Kind kind, std::string system_message);

  Kind kind_;
  std::string system_message_;
};

}  // namespace rlcore
