// The agent loop on the built-in tokenizer and a ChatML template, with a
// scripted model: the token layout and its mask, the tool results fed back
// (errors, hangs, crashes, floods, bad bytes contained), the turn limits and
// the response length, and the multi-turn demonstrations SFT trains on.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/tokenizer/tokenizer.h"

using namespace rlcore;
using namespace rlcore::agent;

namespace agent_loop_test {

constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const Tokenizer& tokenizer() {
  static const Tokenizer instance = make_builtin_tokenizer();
  return instance;
}

int32_t im_end() { return tokenizer().encode("<|im_end|>").at(0); }

// A tool for the tests: echoes its "text" argument, or misbehaves as asked.
class ScriptedTool : public Tool {
 public:
  enum class Mode { kEcho, kHang, kThrow, kFlood, kBadBytes };
  ScriptedTool(std::string name, Mode mode) : name_(std::move(name)), mode_(mode) {}
  ToolSchema schema() const override {
    ToolSchema schema;
    schema.name = name_;
    schema.description = "test tool";
    return schema;
  }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(200); }
  ToolResult call(const nlohmann::json& arguments, const ToolCallContext&) const override {
    switch (mode_) {
      case Mode::kHang:
        std::this_thread::sleep_for(std::chrono::seconds(3));
        return {"too late", false, 0.0};
      case Mode::kThrow:
        throw std::runtime_error("boom");
      case Mode::kFlood:
        return {std::string(10 << 20, 'x'), false, 0.0};
      case Mode::kBadBytes:
        return {std::string("ok\xff\xfe\xc3"), false, 0.0};
      case Mode::kEcho:
        break;
    }
    return {arguments.value("text", std::string("?")), false, 0.5};
  }

 private:
  std::string name_;
  Mode mode_;
};

AgentLoop make_loop(ToolSet tools, int64_t response_length = 256, MultiTurnConfig multi_turn = {}) {
  AgentLoopSettings settings;
  settings.multi_turn = multi_turn;
  settings.multi_turn.enable = true;
  settings.response_length = response_length;
  settings.stop_token_id = im_end();
  settings.num_workers = 2;
  return AgentLoop(settings, tokenizer(), chat::ChatTemplate::from_string(kChatMl), std::move(tools));
}

ToolSet tools_with(ScriptedTool::Mode mode, const std::string& name = "echo") {
  ToolSet tools;
  tools.add(std::make_shared<ScriptedTool>(name, mode));
  return tools;
}

AgentTask task(const std::string& question) {
  AgentTask task;
  task.prompt_messages = nlohmann::json::array({{{"role", "user"}, {"content", question}}});
  task.prompt_ids = tokenizer().encode(
      chat::ChatTemplate::from_string(kChatMl).render(nlohmann::ordered_json::parse(task.prompt_messages.dump())));
  task.id = "t0";
  return task;
}

std::string call_text(const std::string& tool, const std::string& text) {
  return "<tool_call>{\"name\": \"" + tool + "\", \"arguments\": {\"text\": \"" + text + "\"}}</tool_call>";
}

// A model that says `turns[k]` (then its stop token) at its k-th turn, with log-prob -(k+1) per token.
struct ScriptedModel {
  std::vector<std::string> turns;
  std::vector<std::vector<std::vector<int32_t>>> contexts_seen;
  std::vector<int64_t> max_tokens_seen;

  TurnGenerator generator() {
    return [this](const std::vector<std::vector<int32_t>>& contexts, int64_t max_tokens, int64_t turn) {
      contexts_seen.push_back(contexts);
      max_tokens_seen.push_back(max_tokens);
      std::vector<TurnReply> replies;
      for (size_t i = 0; i < contexts.size(); ++i) {
        TurnReply reply;
        reply.ids = tokenizer().encode(turns.at(static_cast<size_t>(turn)));
        reply.ids.push_back(im_end());
        if (static_cast<int64_t>(reply.ids.size()) > max_tokens) {
          reply.ids.resize(static_cast<size_t>(max_tokens));
        } else {
          reply.stopped = true;
        }
        reply.logprobs.assign(reply.ids.size(), -static_cast<float>(turn + 1));
        replies.push_back(reply);
      }
      return replies;
    };
  }
};

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace agent_loop_test

using namespace agent_loop_test;

TEST_CASE("a tool call, its result and the answer: the model's ids as sampled, the tool's as the template's delta",
          "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho));
  ScriptedModel model{{call_text("echo", "56088"), "#### 56088"}};
  const std::vector<Trajectory> out = loop.run({task("123*456=")}, model.generator());
  REQUIRE(out.size() == 1);
  const Trajectory& t = out[0];
  CHECK(t.finish_reason == FinishReason::kStop);
  CHECK(t.assistant_turns == 2);
  CHECK(t.user_turns == 1);
  CHECK(t.num_turns() == 4);
  CHECK(t.tool_calls == 1);
  CHECK(t.tool_errors == 0);
  CHECK(t.tool_rewards == std::vector<double>{0.5});
  CHECK_FALSE(t.template_mismatch);

  // Exactly: turn 1 as sampled (mask 1), the tool turn's text tokenized (mask 0), turn 2 (mask 1).
  const std::vector<int32_t> turn1 = concat(tokenizer().encode(call_text("echo", "56088")), {im_end()});
  const std::vector<int32_t> tool = tokenizer().encode("\n<|im_start|>tool\n56088<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> turn2 = concat(tokenizer().encode("#### 56088"), {im_end()});
  CHECK(t.response_ids == concat(concat(turn1, tool), turn2));
  std::vector<uint8_t> mask(turn1.size(), 1);
  mask.insert(mask.end(), tool.size(), 0);
  mask.insert(mask.end(), turn2.size(), 1);
  CHECK(t.response_mask == mask);
  CHECK(t.logprobs.front() == -1.0f);
  CHECK(t.logprobs[turn1.size()] == 0.0f);
  CHECK(t.logprobs.back() == -2.0f);

  // The second turn was asked with the whole context, and the prompt + response is the template's own text.
  REQUIRE(model.contexts_seen.size() == 2);
  CHECK(model.contexts_seen[1][0] == concat(task("123*456=").prompt_ids, concat(turn1, tool)));
  CHECK(tokenizer().decode(concat(task("123*456=").prompt_ids, t.response_ids)) ==
        "<|im_start|>user\n123*456=<|im_end|>\n<|im_start|>assistant\n" + call_text("echo", "56088") +
            "<|im_end|>\n<|im_start|>tool\n56088<|im_end|>\n<|im_start|>assistant\n#### 56088<|im_end|>");
}

TEST_CASE("an answer without a call ends the trajectory; single_turn_agent samples never call tools", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho));
  ScriptedModel direct{{"#### 7"}};
  const Trajectory answered = loop.run({task("3+4=")}, direct.generator()).at(0);
  CHECK(answered.assistant_turns == 1);
  CHECK(answered.tool_calls == 0);
  CHECK(answered.response_mask == std::vector<uint8_t>(answered.response_ids.size(), 1));

  ScriptedModel caller{{call_text("echo", "7"), "#### 7"}};
  AgentTask single = task("3+4=");
  single.use_tools = false;
  const Trajectory once = loop.run({single}, caller.generator()).at(0);
  CHECK(once.assistant_turns == 1);
  CHECK(once.tool_calls == 0);
}

TEST_CASE("malformed calls and unknown tools are answered with an error the model reads, and counted", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho));
  ScriptedModel model{{"<tool_call>{not json</tool_call>", call_text("nope", "x"), "#### 1"}};
  const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
  CHECK(t.assistant_turns == 3);
  CHECK(t.tool_calls == 2);
  CHECK(t.tool_errors == 2);
  REQUIRE(t.messages.size() == 5);
  CHECK_THAT(t.messages[1]["content"].get<std::string>(), Catch::StartsWith("error: "));
  CHECK_THAT(t.messages[3]["content"].get<std::string>(),
             Catch::Contains("no tool named 'nope'") && Catch::Contains("echo"));
}

TEST_CASE("a tool that hangs costs its timeout and the trajectory goes on with an error result", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kHang));
  ScriptedModel model{{call_text("echo", "x"), "#### 1"}};
  // Had the loop waited out the 3 s hang, the tool's "too late" would be the result.
  const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
  CHECK(t.assistant_turns == 2);
  CHECK(t.tool_errors == 1);
  CHECK_THAT(t.messages[1]["content"].get<std::string>(), Catch::Contains("timed out after 0.2 s"));
}

TEST_CASE("a tool that throws, floods or returns bad bytes is contained", "[agent]") {
  MultiTurnConfig multi_turn;
  multi_turn.max_tool_response_length = 40;
  SECTION("throws") {
    const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kThrow), 256, multi_turn);
    ScriptedModel model{{call_text("echo", "x"), "#### 1"}};
    const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
    CHECK(t.tool_errors == 1);
    CHECK_THAT(t.messages[1]["content"].get<std::string>(), Catch::Contains("boom"));
  }
  SECTION("10 MB") {
    const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kFlood), 256, multi_turn);
    ScriptedModel model{{call_text("echo", "x"), "#### 1"}};
    const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
    const std::string seen = t.messages[1]["content"].get<std::string>();
    CHECK(seen.size() < 80);
    CHECK_THAT(seen, Catch::Contains("...(truncated)..."));
  }
  SECTION("invalid UTF-8") {
    const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kBadBytes), 256, multi_turn);
    ScriptedModel model{{call_text("echo", "x"), "#### 1"}};
    const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
    CHECK(t.messages[1]["content"].get<std::string>() == "ok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  }
}

TEST_CASE("the response length bounds the whole trajectory: finish reason length", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho), 60);
  ScriptedModel model{{call_text("echo", "a very long tool result that will not fit"), "#### 1"}};
  const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
  CHECK(t.finish_reason == FinishReason::kLength);
  CHECK(t.response_ids.size() == 60);
  CHECK(t.response_mask.size() == 60);
  // Every call asked for at most what was left.
  for (int64_t asked : model.max_tokens_seen) CHECK(asked <= 60);
}

TEST_CASE("max_assistant_turns and max_parallel_calls bound the loop", "[agent]") {
  MultiTurnConfig multi_turn;
  multi_turn.max_assistant_turns = 2;
  multi_turn.max_parallel_calls = 1;
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho), 512, multi_turn);
  ScriptedModel model{{call_text("echo", "1") + call_text("echo", "2"), call_text("echo", "3"), "never"}};
  const Trajectory t = loop.run({task("q")}, model.generator()).at(0);
  CHECK(t.assistant_turns == 2);
  CHECK(t.tool_calls == 2);  // turn 1's two calls: one run, one refused
  CHECK(t.tool_errors == 1);
  CHECK_THAT(t.messages[2]["content"].get<std::string>(), Catch::Contains("at most 1 tool call"));
}

TEST_CASE("trajectories of one run share each turn's generate call", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho));
  ScriptedModel model{{call_text("echo", "1"), "#### 1"}};
  const std::vector<Trajectory> out = loop.run({task("a"), task("b"), task("c")}, model.generator());
  CHECK(out.size() == 3);
  REQUIRE(model.contexts_seen.size() == 2);
  CHECK(model.contexts_seen[0].size() == 3);
  CHECK(model.contexts_seen[1].size() == 3);
}

TEST_CASE("a demonstration in messages assembles to the layout the loop samples", "[agent]") {
  const AgentLoop loop = make_loop(tools_with(ScriptedTool::Mode::kEcho));
  ScriptedModel model{{call_text("echo", "56088"), "#### 56088"}};
  const Trajectory sampled = loop.run({task("123*456=")}, model.generator()).at(0);
  const Trajectory shown =
      loop.assemble(task("123*456=").prompt_messages,
                    nlohmann::json::array({{{"role", "assistant"}, {"content", call_text("echo", "56088")}},
                                           {{"role", "tool"}, {"content", "56088"}},
                                           {{"role", "assistant"}, {"content", "#### 56088"}}}));
  CHECK(shown.response_ids == sampled.response_ids);
  CHECK(shown.response_mask == sampled.response_mask);
  CHECK_THROWS_AS(
      loop.assemble(task("q").prompt_messages, nlohmann::json::array({{{"role", "tool"}, {"content", "x"}}})),
      FormatError);
  CHECK_THROWS_AS(
      loop.assemble(task("q").prompt_messages, nlohmann::json::array({{{"role", "assistant"}, {"content", "x"}},
                                                                      {{"role", "tool"}, {"content", "y"}}})),
      FormatError);
}

TEST_CASE("tool text: valid UTF-8 and truncation from either side", "[agent]") {
  CHECK(to_valid_utf8("a\xC3\xA9"
                      "b") ==
        "a\xC3\xA9"
        "b");
  CHECK(to_valid_utf8("a\xC3") == "a\xEF\xBF\xBD");
  CHECK(to_valid_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(truncate_tool_text("abcdefghij", 4, "left") == "abcd...(truncated)");
  CHECK(truncate_tool_text("abcdefghij", 4, "right") == "(truncated)...ghij");
  CHECK(truncate_tool_text("abcdefghij", 4, "middle") == "ab...(truncated)...ij");
  CHECK(truncate_tool_text("abc", 4, "middle") == "abc");
  CHECK(truncate_tool_text("\xC3\xA9\xC3\xA9\xC3\xA9", 3, "left") == "\xC3\xA9...(truncated)");
}

TEST_CASE("ids past the vocabulary and bytes cut mid-character are the model's to write: no crash", "[agent]") {
  const int32_t padded = tokenizer().vocab_size() + 3;                // a padded embedding row
  const std::vector<int32_t> half_char = tokenizer().encode("\xC3");  // the first byte of a 2-byte character
  const TurnGenerator model = [&](const std::vector<std::vector<int32_t>>& contexts, int64_t, int64_t) {
    TurnReply reply;
    reply.ids = tokenizer().encode("<tool_call>");
    reply.ids.push_back(padded);
    reply.ids.insert(reply.ids.end(), half_char.begin(), half_char.end());
    const std::vector<int32_t> close = tokenizer().encode("</tool_call>");
    reply.ids.insert(reply.ids.end(), close.begin(), close.end());
    reply.ids.push_back(im_end());
    reply.logprobs.assign(reply.ids.size(), -1.0f);
    reply.stopped = true;
    return std::vector<TurnReply>(contexts.size(), reply);
  };
  MultiTurnConfig multi_turn;
  multi_turn.max_assistant_turns = 2;
  const AgentLoop bounded = make_loop(tools_with(ScriptedTool::Mode::kEcho), 256, multi_turn);
  const Trajectory t = bounded.run({task("q")}, model).at(0);
  CHECK(t.assistant_turns == 2);
  CHECK(t.tool_errors == 1);  // the unreadable call is reported to the model
  CHECK(std::find(t.response_ids.begin(), t.response_ids.end(), padded) != t.response_ids.end());  // kept as sampled
}
