// Tool: the `tool` plugin kind (SDK 5.2). A function the policy may call in a
// multi-turn rollout (docs/agent-loop.md): its schema goes into the chat
// template, the agent loop parses the model's calls, runs them and feeds the
// results back as tool messages.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/export.h"

namespace rlcore {

// An OpenAI function schema: what the chat template shows the model.
struct ToolSchema {
  std::string name;
  std::string description;
  // A JSON schema of type "object" for the arguments.
  nlohmann::json parameters = {{"type", "object"}, {"properties", nlohmann::json::object()}};

  // {"type": "function", "function": {name, description, parameters}}.
  nlohmann::json to_json() const {
    return {{"type", "function"},
            {"function", {{"name", name}, {"description", description}, {"parameters", parameters}}}};
  }
};

struct ToolCallContext {
  std::string trajectory_id;  // unique in the run's current rollout
  // The sample's extra_info.tools_kwargs.<tool>.create_kwargs (verl's layout), or null.
  nlohmann::json create_kwargs;
};

struct ToolResult {
  std::string text;     // what the model reads as the tool message
  bool error = false;   // the call failed (bad arguments, a crash, a timeout): counted as a tool error
  double reward = 0.0;  // a step reward (verl's tool_rewards); 0 when the tool gives none
};

class RLCORE_API Tool {
 public:
  static constexpr const char* kKind = "tool";

  virtual ~Tool();

  virtual ToolSchema schema() const = 0;
  // How long one call may take. Past it the agent loop gives the model an
  // error result and goes on; a tool that runs a subprocess kills it then.
  virtual std::chrono::milliseconds timeout() const { return std::chrono::seconds(10); }
  // Must be thread-safe (trajectories call concurrently). Bad arguments are a
  // result with error = true, not an exception; an exception is contained and
  // reported to the model as an error result too.
  virtual ToolResult call(const nlohmann::json& arguments, const ToolCallContext& context) const = 0;
};

}  // namespace rlcore
