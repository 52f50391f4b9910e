// The `code_interpreter` tool (verl's SandboxFusionTool): the model's code is
// run by a SandboxFusion server (POST <url> {code, language, run_timeout,
// memory_limit_MB}, the request the sandbox_fusion grader sends); the result
// is what it printed.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/tool.h"

namespace rlcore::tools {

struct SandboxFusionToolOptions {
  std::string url;  // the run_code endpoint, e.g. http://localhost:8080/run_code; required
  std::string language = "python";
  double timeout_s = 30.0;  // compile_timeout and run_timeout
  int64_t memory_limit_mb = 1024;
};

class SandboxFusionTool : public Tool {
 public:
  // Throws ConfigError without a url or with a malformed one.
  explicit SandboxFusionTool(SandboxFusionToolOptions options);
  ToolSchema schema() const override;
  std::chrono::milliseconds timeout() const override;
  // {"code": "..."}: stdout and stderr; a sandbox that cannot be asked is an error result naming the url.
  ToolResult call(const nlohmann::json& arguments, const ToolCallContext& context) const override;

 private:
  SandboxFusionToolOptions options_;
  std::string base_url_;
  std::string path_;
};

}  // namespace rlcore::tools
