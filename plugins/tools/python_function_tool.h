// The `python_function` tool (verl's function tools, multi_turn.function_tool_path):
// one Python function from a file, its schema made from its signature and
// docstring, called in a long-lived subprocess one JSON line per call (as the
// custom_function grader runs a reward function).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlcore/tool.h"

namespace rlcore::process {
class JsonLinesProcess;
}

namespace rlcore::tools {

struct PythonFunctionOptions {
  std::string path;      // the Python file
  std::string function;  // the function's name in it
  std::string python = "python3";
  double timeout_s = 30.0;  // one call; past it the subprocess is killed (and restarted for the next call)
};

class PythonFunctionTool : public Tool {
 public:
  // Starts the subprocess and reads the schema; throws ConfigError naming the
  // file and function when it cannot be imported or found.
  explicit PythonFunctionTool(PythonFunctionOptions options);
  ~PythonFunctionTool() override;
  ToolSchema schema() const override { return schema_; }
  std::chrono::milliseconds timeout() const override;
  // The function's return value (a string as it is, anything else as JSON);
  // an exception in it is an error result with its type and message.
  ToolResult call(const nlohmann::json& arguments, const ToolCallContext& context) const override;

 private:
  std::unique_ptr<process::JsonLinesProcess> start() const;

  PythonFunctionOptions options_;
  ToolSchema schema_;
  mutable std::mutex mutex_;  // one call at a time through the subprocess
  mutable std::unique_ptr<process::JsonLinesProcess> process_;
};

}  // namespace rlcore::tools
