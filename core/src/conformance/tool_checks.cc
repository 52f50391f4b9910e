// Contract checks for tools (kind `tool`): a schema the chat template can show
// (a name, parameters a JSON-schema object), and calls with any arguments that
// return within the tool's timeout, without throwing, the same on concurrent
// threads as one by one.
#include <future>

#include <nlohmann/json.hpp>

#include "conformance/conformance.h"
#include "rlcore/core/agent/tool_set.h"
#include "rlcore/error.h"
#include "rlcore/tool.h"

namespace rlcore::conformance {
namespace {

std::shared_ptr<Tool> make_tool(CheckEnv& env) {
  auto made = std::static_pointer_cast<Tool>(env.candidate.factory(env.candidate_options, {}));
  if (!made) throw ValueError("the factory of tool '" + env.candidate.name + "' returned null");
  return made;
}

// Well-formed calls for the schema's own parameters, and arguments a model may write instead.
std::vector<nlohmann::json> tool_argument_sets(const ToolSchema& schema) {
  nlohmann::json filled = nlohmann::json::object();
  const nlohmann::json properties = schema.parameters.value("properties", nlohmann::json::object());
  for (const auto& [name, property] : properties.items()) {
    const std::string type = property.is_object() ? property.value("type", "string") : "string";
    if (type == "integer" || type == "number") {
      filled[name] = 2;
    } else if (type == "boolean") {
      filled[name] = true;
    } else if (type == "array") {
      filled[name] = nlohmann::json::array();
    } else if (type == "object") {
      filled[name] = nlohmann::json::object();
    } else {
      filled[name] = "1 + 1";
    }
  }
  nlohmann::json wrong_types = nlohmann::json::object();
  for (const auto& [name, value] : filled.items()) wrong_types[name] = nlohmann::json::array({nullptr, 3.5});
  return {filled,
          nlohmann::json::object(),
          wrong_types,
          {{"unexpected", std::string(5000, '(')}},
          {{"text", std::string("\xc3\x28 invalid utf-8")}}};
}

Outcome check_tool_schema(CheckEnv& env) {
  const ToolSchema schema = make_tool(env)->schema();
  if (schema.name.empty()) return Outcome::fail("the schema's name is empty");
  if (!schema.parameters.is_object() || schema.parameters.value("type", "") != "object") {
    return Outcome::fail("the schema's parameters must be a JSON schema of type \"object\", got " +
                         schema.parameters.dump());
  }
  if (make_tool(env)->timeout().count() <= 0) return Outcome::fail("the timeout must be positive");
  return Outcome::pass();
}

// Through the agent loop's own guard, so a hang fails the check instead of hanging it.
Outcome check_tool_arguments(CheckEnv& env) {
  auto tool = make_tool(env);
  agent::ToolSet tools;
  tools.add(tool);
  const auto sets = tool_argument_sets(tool->schema());
  for (size_t i = 0; i < sets.size(); ++i) {
    try {
      const agent::ToolOutcome outcome = tools.call({tool->schema().name, sets[i]}, ToolCallContext{});
      if (outcome.timed_out)
        return Outcome::fail("arguments " + sets[i].dump().substr(0, 80) + " ran past the timeout");
      if (outcome.result.error && outcome.result.text.rfind("error: the tool failed", 0) == 0) {
        return Outcome::fail("arguments " + sets[i].dump().substr(0, 80) +
                             " made call() throw (bad arguments must be an error result): " + outcome.result.text);
      }
    } catch (const std::exception& e) {
      return Outcome::fail(std::string("the call threw: ") + e.what());
    }
  }
  return Outcome::pass();
}

Outcome check_tool_thread_safe(CheckEnv& env) {
  auto tool = make_tool(env);
  agent::ToolSet tools;  // the loop's guard: a call that hangs fails the check instead of hanging it
  tools.add(tool);
  const agent::ToolCall call{tool->schema().name, tool_argument_sets(tool->schema()).front()};
  const nlohmann::json& arguments = call.arguments;
  const ToolResult first = tools.call(call, ToolCallContext{}).result;
  std::vector<std::future<ToolResult>> calls;
  for (int t = 0; t < 4; ++t) {
    calls.push_back(std::async(std::launch::async, [&] { return tools.call(call, ToolCallContext{}).result; }));
  }
  for (auto& call : calls) {
    const ToolResult result = call.get();
    if (result.text != first.text || result.error != first.error) {
      return Outcome::fail("4 concurrent calls with " + arguments.dump().substr(0, 80) +
                           " answered differently from one call");
    }
  }
  return Outcome::pass();
}

}  // namespace

std::vector<Check> tool_checks() {
  return {{"create",
           [](CheckEnv& env) {
             // A tool that needs an option to work (code_interpreter's url) says so with a
             // ConfigError here, which skips its checks.
             make_tool(env);
             return Outcome::pass();
           }},
          {"schema", check_tool_schema},
          {"any_arguments", check_tool_arguments},
          {"thread_safe", check_tool_thread_safe}};
}

}  // namespace rlcore::conformance
