// Tool calls parsed in the model's own format: Hermes blocks and Llama 3.1 JSON
// calls; what cannot be read becomes an error for the model, never an exception.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rlcore/core/agent/tool_calls.h"
#include "rlcore/error.h"

using nlohmann::json;
using rlcore::agent::parse_tool_calls;
using rlcore::agent::ToolCallFormat;

TEST_CASE("Hermes: every <tool_call> block is a call, the rest is the turn's content", "[agent]") {
  const auto turn = parse_tool_calls(
      "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"12*34\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}</tool_call>",
      ToolCallFormat::kHermes);
  REQUIRE(turn.calls.size() == 2);
  CHECK(turn.calls[0].name == "calculator");
  CHECK(turn.calls[0].arguments == json{{"expression", "12*34"}});
  CHECK(turn.calls[1].name == "search");
  CHECK(turn.calls[1].arguments == json{{"query", "x"}});  // arguments as a JSON string, read as vLLM does
  CHECK(turn.errors.empty());
  CHECK(turn.content == "Let me compute.\n\n");
}

TEST_CASE("Hermes: malformed calls are errors in order; an unclosed block stays text", "[agent]") {
  const auto turn = parse_tool_calls(
      "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": </tool_call>"
      "<tool_call>[1, 2]</tool_call><tool_call>{\"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"f\", \"arguments\": 7}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>"
      "tail <tool_call>{\"name\": \"h\"",
      ToolCallFormat::kHermes);
  REQUIRE(turn.errors.size() == 4);
  CHECK(turn.errors[0].message == "the tool call is not valid JSON");
  CHECK(turn.errors[0].text == "{\"name\": \"calculator\", \"arguments\": {\"expression\": ");
  CHECK(turn.errors[1].message == "the tool call must be a JSON object");
  CHECK(turn.errors[2].message == "the tool call has no \"name\" string");
  CHECK(turn.errors[3].message == "the \"arguments\" of tool call 'f' must be a JSON object");
  REQUIRE(turn.calls.size() == 1);  // no arguments: an empty object
  CHECK(turn.calls[0].name == "g");
  CHECK(turn.calls[0].arguments == json::object());
  CHECK(turn.content == "tail <tool_call>{\"name\": \"h\"");
  const auto none = parse_tool_calls("no calls here", ToolCallFormat::kHermes);
  CHECK(none.calls.empty());
  CHECK(none.errors.empty());
  CHECK(none.content == "no calls here");
}

TEST_CASE("Llama 3.1 JSON: the turn is one or more call objects, parameters or arguments", "[agent]") {
  const auto turn = parse_tool_calls(
      "<|python_tag|>{\"name\": \"calculator\", \"parameters\": {\"expression\": \"2+2\"}}; "
      "{\"name\": \"echo\", \"arguments\": {\"text\": \"a } in a string\"}}",
      ToolCallFormat::kLlama3Json);
  REQUIRE(turn.calls.size() == 2);
  CHECK(turn.calls[0].name == "calculator");
  CHECK(turn.calls[0].arguments == json{{"expression", "2+2"}});
  CHECK(turn.calls[1].arguments == json{{"text", "a } in a string"}});
  CHECK(turn.errors.empty());
  CHECK(turn.content.empty());

  const auto answer = parse_tool_calls("The answer is 4.", ToolCallFormat::kLlama3Json);
  CHECK(answer.calls.empty());
  CHECK(answer.content == "The answer is 4.");

  const auto broken =
      parse_tool_calls("{\"name\": \"calculator\", \"parameters\": {\"expression\": \"1", ToolCallFormat::kLlama3Json);
  CHECK(broken.calls.empty());
  REQUIRE(broken.errors.size() == 1);
  CHECK(broken.errors[0].message == "the tool call's JSON object never closes");

  const std::string long_call = "{\"name\": " + std::string(1000, 'x') + "}";
  const auto quoted = parse_tool_calls(long_call, ToolCallFormat::kLlama3Json);
  REQUIRE(quoted.errors.size() == 1);
  CHECK(quoted.errors[0].text.size() == 203);  // the first 200 characters and "..."
}

TEST_CASE("multi_turn.format names the parser; another name is a config error naming the key", "[agent]") {
  CHECK(rlcore::agent::tool_call_format("hermes") == ToolCallFormat::kHermes);
  CHECK(rlcore::agent::tool_call_format("llama3_json") == ToolCallFormat::kLlama3Json);
  CHECK_THROWS_WITH(rlcore::agent::tool_call_format("gpt-oss"),
                    Catch::Contains("actor_rollout_ref.rollout.multi_turn.format") && Catch::Contains("'gpt-oss'"));
}
