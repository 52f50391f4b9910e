// Hermes and Llama 3.1 JSON tool calls (see rlcore/core/agent/tool_calls.h).
#include "rlcore/core/agent/tool_calls.h"

#include <cctype>
#include <cstddef>
#include <optional>
#include <string_view>
#include <variant>

#include "rlcore/error.h"

namespace rlcore::agent {
namespace {

using nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr size_t kQuotedCallChars = 200;  // of a malformed call, in its error

std::string quote_call(const std::string& text) {
  return text.size() <= kQuotedCallChars ? text : text.substr(0, kQuotedCallChars) + "...";
}

// {"name": str, <arguments_key>: object, or a string holding one}: the call, or why not.
std::variant<ToolCall, std::string> tool_call_of(const std::string& text, const char* arguments_key,
                                                 const char* other_arguments_key = nullptr) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::string("the tool call is not valid JSON");
  if (!parsed.is_object()) return std::string("the tool call must be a JSON object");
  const auto name = parsed.find("name");
  if (name == parsed.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::string("the tool call has no \"name\" string");
  }
  auto arguments = parsed.find(arguments_key);
  if (arguments == parsed.end() && other_arguments_key != nullptr) arguments = parsed.find(other_arguments_key);
  ToolCall call{name->get<std::string>(), json::object()};
  if (arguments == parsed.end() || arguments->is_null()) return call;
  json value = *arguments;
  if (value.is_string()) value = json::parse(value.get<std::string>(), nullptr, false);
  if (!value.is_object()) {
    return std::string("the \"") + arguments_key + "\" of tool call '" + call.name + "' must be a JSON object";
  }
  call.arguments = std::move(value);
  return call;
}

void add_parsed(ParsedTurn& turn, const std::string& text, std::variant<ToolCall, std::string> parsed) {
  if (auto* call = std::get_if<ToolCall>(&parsed)) {
    turn.calls.push_back(std::move(*call));
  } else {
    turn.errors.push_back({quote_call(text), std::get<std::string>(parsed)});
  }
}

ParsedTurn parse_hermes(const std::string& text) {
  ParsedTurn turn;
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, at);
    const size_t close = open == std::string::npos ? open : text.find(kHermesClose, open + kHermesOpen.size());
    if (close == std::string::npos) break;  // an unclosed block stays text, as verl reads it
    turn.content += text.substr(at, open - at);
    const std::string body = text.substr(open + kHermesOpen.size(), close - open - kHermesOpen.size());
    add_parsed(turn, body, tool_call_of(body, "arguments"));
    at = close + kHermesClose.size();
  }
  turn.content += text.substr(at);
  return turn;
}

// The end of the JSON object that starts at text[begin] == '{', or nullopt when it never closes.
std::optional<size_t> json_object_end(const std::string& text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::nullopt;
}

size_t skip_json_space(const std::string& text, size_t at) {
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  return at;
}

ParsedTurn parse_llama3_json(const std::string& text) {
  size_t at = skip_json_space(text, 0);
  if (text.compare(at, kPythonTag.size(), kPythonTag) == 0) at = skip_json_space(text, at + kPythonTag.size());
  if (at >= text.size() || text[at] != '{') return ParsedTurn{text, {}, {}};  // a plain answer
  ParsedTurn turn;
  while (at < text.size()) {
    const std::optional<size_t> end = json_object_end(text, at);
    if (!end) {
      const std::string rest = text.substr(at);
      turn.errors.push_back({quote_call(rest), "the tool call's JSON object never closes"});
      break;
    }
    const std::string object = text.substr(at, *end - at);
    add_parsed(turn, object, tool_call_of(object, "parameters", "arguments"));
    at = skip_json_space(text, *end);
    if (at < text.size() && text[at] == ';') at = skip_json_space(text, at + 1);
    if (at < text.size() && text[at] != '{') {
      turn.content = text.substr(at);  // text after the calls
      break;
    }
  }
  return turn;
}

}  // namespace

ToolCallFormat tool_call_format(const std::string& name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  throw ConfigError("key actor_rollout_ref.rollout.multi_turn.format: unknown tool-call format '" + name +
                    "' (hermes, llama3_json)");
}

ParsedTurn parse_tool_calls(const std::string& text, ToolCallFormat format) {
  return format == ToolCallFormat::kHermes ? parse_hermes(text) : parse_llama3_json(text);
}

}  // namespace rlcore::agent
