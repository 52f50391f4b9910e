// The `code_interpreter` tool (see sandbox_fusion_tool.h).
#include "sandbox_fusion_tool.h"

#include "common/http/http_json_client.h"
#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

constexpr const char* kToolName = "code_interpreter";
constexpr double kApiSlackSeconds = 10;  // on top of the sandbox's own timeouts

http::HttpSettings settings_for(const std::string& base_url, double request_timeout_s) {
  http::HttpSettings settings;
  settings.base_url = base_url;
  settings.client_name = kToolName;
  settings.connect_timeout_s = request_timeout_s;
  settings.request_timeout_s = request_timeout_s;
  settings.max_retries = 0;
  return settings;
}

}  // namespace

SandboxFusionTool::SandboxFusionTool(SandboxFusionToolOptions options) : options_(std::move(options)) {
  if (options_.url.empty()) {
    throw ConfigError(
        "tools[code_interpreter].config.url is required: the SandboxFusion run_code endpoint, e.g. "
        "http://localhost:8080/run_code");
  }
  const size_t scheme = options_.url.find("://");
  const size_t path = scheme == std::string::npos ? std::string::npos : options_.url.find('/', scheme + 3);
  base_url_ = options_.url.substr(0, path);
  path_ = path == std::string::npos ? "/" : options_.url.substr(path);
  http::HttpJsonClient check(settings_for(base_url_, options_.timeout_s));  // a malformed url fails here
}

ToolSchema SandboxFusionTool::schema() const {
  ToolSchema schema;
  schema.name = kToolName;
  schema.description = "Run " + options_.language + " code in a sandbox and return what it prints.";
  schema.parameters = {{"type", "object"},
                       {"properties", {{"code", {{"type", "string"}, {"description", "The program to run."}}}}},
                       {"required", {"code"}}};
  return schema;
}

std::chrono::milliseconds SandboxFusionTool::timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>((2 * options_.timeout_s + kApiSlackSeconds) * 1000));
}

ToolResult SandboxFusionTool::call(const nlohmann::json& arguments, const ToolCallContext&) const {
  const auto code = arguments.find("code");
  if (!arguments.is_object() || code == arguments.end() || !code->is_string()) {
    return {"error: code_interpreter takes {\"code\": \"<program>\"}", true, 0.0};
  }
  const nlohmann::json body = {{"code", *code},
                               {"language", options_.language},
                               {"compile_timeout", options_.timeout_s},
                               {"run_timeout", options_.timeout_s},
                               {"memory_limit_MB", options_.memory_limit_mb},
                               {"stdin", ""},
                               {"files", nlohmann::json::object()},
                               {"fetch_files", nlohmann::json::array()}};
  const double request_timeout_s = 2 * options_.timeout_s + kApiSlackSeconds;
  nlohmann::json reply;
  try {
    const http::HttpJsonClient client(settings_for(base_url_, request_timeout_s));
    const http::HttpReply answer = client.post(path_, body, http::Retry::kNo, request_timeout_s);
    if (answer.status != 200)
      return {"error: the sandbox answered: " + client.describe("POST", path_, answer), true, 0.0};
    reply = http::parse_json_bounded(answer.body);
  } catch (const std::exception& e) {
    return {std::string("error: the sandbox cannot be asked: ") + e.what(), true, 0.0};
  }
  if (!reply.is_object())
    return {"error: the sandbox at " + options_.url + " answered something other than a JSON object", true, 0.0};
  const nlohmann::json run = reply.value("run_result", nlohmann::json::object());
  const nlohmann::json compile = reply.value("compile_result", nlohmann::json());
  auto text_of = [](const nlohmann::json& result, const char* key) {
    return result.is_object() && result.contains(key) && result[key].is_string() ? result[key].get<std::string>()
                                                                                 : std::string();
  };
  std::string text = text_of(run, "stdout");
  const std::string err = text_of(run, "stderr") + text_of(compile, "stderr");
  const bool ok = reply.value("status", "") == "Success";
  if (!ok) {
    if (!err.empty()) text += (text.empty() ? "" : "\n") + err;
    const std::string status = run.is_object() ? run.value("status", reply.value("status", "unknown")) : "unknown";
    text += (text.empty() ? "" : "\n") + std::string("error: ") +
            (status == "TimeLimitExceeded" ? "over its time limit" : "the run ended with status " + status);
  }
  return {text, !ok, 0.0};
}

}  // namespace rlcore::tools
