// The delta rendering of new messages (see rlcore/core/agent/chat_delta.h).
#include "rlcore/core/agent/chat_delta.h"

#include <algorithm>

namespace rlcore::agent {
namespace {

constexpr size_t kShownChars = 60;  // of each rendering where they part

std::string excerpt(const std::string& text, size_t at) { return text.substr(at, kShownChars); }

}  // namespace

std::string chat_delta_text(const chat::ChatTemplate& chat_template, const nlohmann::ordered_json& history,
                            const nlohmann::ordered_json& added, const chat::ChatTemplateOptions& options) {
  chat::ChatTemplateOptions before_options = options;
  before_options.add_generation_prompt = false;
  const std::string before = chat_template.render(history, before_options);
  nlohmann::ordered_json conversation = history;
  for (const auto& message : added) conversation.push_back(message);
  const std::string after = chat_template.render(conversation, options);
  const auto parted = std::mismatch(before.begin(), before.end(), after.begin(), after.end());
  if (parted.first != before.end()) {
    const auto at = static_cast<size_t>(parted.first - before.begin());
    throw chat::ChatTemplateError(
        "the chat template renders the conversation's earlier turns differently once " + std::to_string(added.size()) +
        " more message(s) follow (at character " + std::to_string(at) + ": '" + excerpt(before, at) + "' becomes '" +
        excerpt(after, at) + "'); the agent loop cannot append only the new messages' tokens");
  }
  return after.substr(before.size());
}

}  // namespace rlcore::agent
