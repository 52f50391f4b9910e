// Tool calls in a model's own format, parsed from the text of one assistant
// turn (the agent loop's multi_turn.format): Hermes-style
// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen2.5,
// Qwen3; vLLM's and verl's "hermes"), or Llama 3.1's JSON calls, the whole turn
// one or more `{"name": ..., "parameters": {...}}` objects separated by `;`,
// optionally after `<|python_tag|>` (vLLM's "llama3_json"). A call that cannot
// be read is an error for the model to see, never an exception.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/export.h"

namespace rlcore::agent {

enum class ToolCallFormat { kHermes, kLlama3Json };

// "hermes" | "llama3_json"; anything else is a ConfigError naming
// actor_rollout_ref.rollout.multi_turn.format.
RLCORE_API ToolCallFormat tool_call_format(const std::string& name);

struct ToolCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();  // always an object
};

// A call the model wrote that cannot be run: the text as written and why.
struct ToolCallError {
  std::string text;
  std::string message;
};

struct ParsedTurn {
  std::string content;  // the turn without its calls
  std::vector<ToolCall> calls;
  std::vector<ToolCallError> errors;  // in the order written, beside `calls`
};

RLCORE_API ParsedTurn parse_tool_calls(const std::string& text, ToolCallFormat format);

}  // namespace rlcore::agent
