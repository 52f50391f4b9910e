// The tools of a run (multi_turn.tool_config_path) and the one way the agent
// loop calls them: within the tool's timeout, an exception or a hang turned
// into an error result, the text made valid UTF-8 and cut to length.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/agent/tool_calls.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"
#include "rlcore/tool.h"

namespace rlcore::agent {

struct ToolOutcome {
  ToolResult result;
  double seconds = 0.0;
  bool timed_out = false;
};

class RLCORE_API ToolSet {
 public:
  ToolSet() = default;
  // tools: [{name: <registered tool>, config: {...}}] from `path`. Throws
  // ConfigError naming the file and entry for an unknown tool, a duplicate
  // name, or verl's Python class_name entries (not supported: a tool plugin or
  // function_tool_path instead).
  static ToolSet from_file(const Registry& registry, const std::string& path);

  // Throws ConfigError for a second tool of the same schema name.
  void add(std::shared_ptr<const Tool> tool);
  bool empty() const { return tools_.empty(); }
  std::vector<std::string> names() const;
  // The schemas in the order added, for the chat template's `tools`.
  nlohmann::ordered_json schemas() const;

  // Runs one call. An unknown tool, an exception or a call past the tool's
  // timeout (left to finish on its own thread; a tool with a subprocess kills
  // it itself) is an error result; never throws.
  ToolOutcome call(const ToolCall& call, const ToolCallContext& context) const;

 private:
  std::vector<std::shared_ptr<const Tool>> tools_;
  std::map<std::string, size_t> by_name_;
};

// verl's function_tool_path: each public function of the Python file (a
// top-level `def` whose name does not start with '_') as a `python_function`
// tool (the tools plugin's). Throws ConfigError naming the key when the file
// has none or the tool kind is not loaded, IoError when it cannot be read.
RLCORE_API void add_function_tools(const Registry& registry, const std::string& path, ToolSet& tools);

// Valid UTF-8: each ill-formed byte sequence becomes U+FFFD.
RLCORE_API std::string to_valid_utf8(const std::string& bytes);

// At most `max_chars` bytes of `text` (on character boundaries), keeping its
// start (side "left"), its end ("right") or both ends ("middle"), with a
// "...(truncated)..." marker where text was cut (verl's tool_response_truncate_side).
RLCORE_API std::string truncate_tool_text(const std::string& text, int64_t max_chars, const std::string& side);

}  // namespace rlcore::agent
