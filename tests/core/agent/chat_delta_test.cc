// The delta rendering the agent loop appends after a model turn: the Qwen3 and
// Llama 3.1 templates' own text for tool results and the next generation
// prompt (spelled out here from the templates' rules), and a clear error for a
// template that renders earlier turns differently once more messages follow.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/test_paths.h"
#include "rlcore/core/agent/chat_delta.h"
#include "rlcore/core/chat/chat_template.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using rlcore::agent::chat_delta_text;
using rlcore::chat::ChatTemplate;

namespace {

ChatTemplate fixture_template(const char* name) {
  const auto loaded =
      ChatTemplate::from_checkpoint(fs::path(rlcore_test::source_dir()) / "tests/fixtures/chat_templates" / name);
  REQUIRE(loaded.has_value());
  return *loaded;
}

// A user question, then the model's turn: its thinking and a Hermes tool call, as it wrote them.
Json history() {
  return Json::array({{{"role", "user"}, {"content", "What is 123 * 456?"}},
                      {{"role", "assistant"},
                       {"content",
                        "<think>\nI should use the calculator.\n</think>\n\n<tool_call>\n{\"name\": \"calculator\", "
                        "\"arguments\": {\"expression\": \"123 * 456\"}}\n</tool_call>"}}});
}

Json tool(const std::string& content) { return {{"role", "tool"}, {"content", content}}; }

}  // namespace

TEST_CASE("Qwen3: tool results are one user turn of <tool_response> blocks, then the generation prompt",
          "[agent][chat_template]") {
  const ChatTemplate qwen3 = fixture_template("qwen3");
  CHECK(chat_delta_text(qwen3, history(), Json::array({tool("56088")})) ==
        "<|im_start|>user\n<tool_response>\n56088\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  CHECK(chat_delta_text(qwen3, history(), Json::array({tool("56088"), tool("error: division by zero")})) ==
        "<|im_start|>user\n<tool_response>\n56088\n</tool_response>\n<tool_response>\nerror: division by "
        "zero\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // The template's own kwargs reach the delta: no thinking, an empty think block opens the turn.
  rlcore::chat::ChatTemplateOptions no_thinking;
  no_thinking.extra = {{"enable_thinking", false}};
  CHECK(chat_delta_text(qwen3, history(), Json::array({tool("56088")}), no_thinking) ==
        "<|im_start|>user\n<tool_response>\n56088\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        "<think>\n\n</think>\n\n");
}

TEST_CASE("Llama 3.1: a tool result is its own header block, then the assistant header", "[agent][chat_template]") {
  const ChatTemplate llama = fixture_template("llama3_1");
  CHECK(chat_delta_text(llama, history(), Json::array({tool("56088")})) ==
        "<|start_header_id|>tool<|end_header_id|>\n\n56088<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("a template that renders earlier turns differently once more follow is an error saying where",
          "[agent][chat_template]") {
  const ChatTemplate marks_last =
      ChatTemplate::from_string("{% for m in messages %}{{ m.content }}{% if loop.last %}!{% endif %}{% endfor %}");
  const Json one = Json::array({{{"role", "user"}, {"content", "a"}}});
  CHECK_THROWS_AS(chat_delta_text(marks_last, one, Json::array({tool("b")})), rlcore::chat::ChatTemplateError);
  CHECK_THROWS_WITH(chat_delta_text(marks_last, one, Json::array({tool("b")})),
                    Catch::Contains("at character 1: '!' becomes 'b!'"));
}
