// The agent loop with real tokenizers and chat templates (Qwen3, Llama 3.1,
// from tests/fixtures/tokenizers): the ids a trajectory is made of (the
// prompt, the model's sampled ids, the tool turns rendered as deltas) equal
// transformers' tokenization of the whole conversation re-rendered with
// apply_chat_template, up to the whitespace the template writes after the
// model's last stop token.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../common/reference_python.h"
#include "../common/test_paths.h"
#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/core/chat/chat_template.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace agent_turns_hf {

// Answers with its "text" argument: the scripted model decides what the tool says.
class EchoTool : public rlcore::Tool {
 public:
  rlcore::ToolSchema schema() const override {
    rlcore::ToolSchema schema;
    schema.name = "lookup";
    schema.description = "Looks a value up.";
    schema.parameters = {{"type", "object"},
                         {"properties", {{"text", {{"type", "string"}, {"description", "what to look up"}}}}},
                         {"required", {"text"}}};
    return schema;
  }
  rlcore::ToolResult call(const json& arguments, const rlcore::ToolCallContext&) const override {
    return {arguments.value("text", std::string()), false, 0.0};
  }
};

struct Family {
  std::string name;                // folder under tests/fixtures/tokenizers
  std::string format;              // multi_turn.format
  std::string stop_text;           // the token that ends a model turn
  std::vector<std::string> turns;  // what the model writes at each turn, its stop token after
  int64_t tool_calls = 0;
};

std::string script() { return rlcore_test::reference_script("hf/reference/hf_models.py"); }

std::vector<int32_t> transformers_ids(const fs::path& dir, const ordered_json& messages, const ordered_json& tools,
                                      bool add_generation_prompt) {
  const fs::path conversation = dir / "conversation.json";
  std::ofstream(conversation) << ordered_json{
      {"messages", messages},
      {"tools", tools},
      {"add_generation_prompt",
       add_generation_prompt}}.dump();
  return json::parse(rlcore_test::run_reference(script(), {"chat_render_ids", dir.string(), conversation.string()}))
      .get<std::vector<int32_t>>();
}

void check_family(const Family& family) {
  INFO(family.name);
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "hf_tests" / ("agent_turns_" + family.name);
  fs::remove_all(dir);
  rlcore_test::run_reference(
      script(), {"tokenizer", rlcore_test::source_dir() + "/tests/fixtures/tokenizers/" + family.name, dir.string()});
  const rlcore::Tokenizer tokenizer = rlcore::Tokenizer::from_pretrained_dir(dir.string());
  const auto chat_template = rlcore::chat::ChatTemplate::from_checkpoint(dir);
  REQUIRE(chat_template.has_value());
  const auto stop = tokenizer.token_to_id(family.stop_text);
  REQUIRE(stop.has_value());

  rlcore::agent::ToolSet tools;
  tools.add(std::make_shared<EchoTool>());
  rlcore::agent::AgentLoopSettings settings;
  settings.multi_turn.enable = true;
  settings.multi_turn.format = family.format;
  settings.multi_turn.max_parallel_calls = 2;
  settings.response_length = 2048;
  settings.stop_token_id = *stop;
  const rlcore::agent::AgentLoop loop(settings, tokenizer, *chat_template, std::move(tools));

  rlcore::agent::AgentTask task;
  task.id = "t0";
  task.prompt_messages = json::array({{{"role", "system"}, {"content", "You are a careful assistant."}},
                                      {{"role", "user"}, {"content", "What is 123 * 456 + 7? Use the tools."}}});
  const ordered_json prompt_messages = ordered_json::parse(task.prompt_messages.dump());
  const ordered_json schemas = loop.tools().schemas();
  rlcore::chat::ChatTemplateOptions prompt_options;
  prompt_options.add_generation_prompt = true;
  prompt_options.tools = schemas;
  task.prompt_ids = tokenizer.encode(chat_template->render(prompt_messages, prompt_options));
  CHECK(task.prompt_ids == transformers_ids(dir, prompt_messages, schemas, true));

  std::vector<int32_t> sampled;  // every id the model wrote, in order
  const auto generate = [&](const std::vector<std::vector<int32_t>>& contexts, int64_t, int64_t turn) {
    REQUIRE(contexts.size() == 1);
    rlcore::agent::TurnReply reply;
    reply.ids = tokenizer.encode(family.turns.at(static_cast<size_t>(turn)));
    reply.ids.push_back(*stop);
    reply.logprobs.assign(reply.ids.size(), -1.0f);
    reply.stopped = true;
    sampled.insert(sampled.end(), reply.ids.begin(), reply.ids.end());
    return std::vector<rlcore::agent::TurnReply>{reply};
  };
  const auto trajectories = loop.run({task}, generate);
  REQUIRE(trajectories.size() == 1);
  const rlcore::agent::Trajectory& trajectory = trajectories[0];
  CHECK(trajectory.finish_reason == rlcore::FinishReason::kStop);
  CHECK(trajectory.assistant_turns == static_cast<int64_t>(family.turns.size()));
  CHECK(trajectory.tool_calls == family.tool_calls);
  CHECK(trajectory.tool_errors == 0);
  CHECK_FALSE(trajectory.template_mismatch);

  std::vector<int32_t> model_ids;
  for (size_t t = 0; t < trajectory.response_ids.size(); ++t) {
    if (trajectory.response_mask[t] != 0) model_ids.push_back(trajectory.response_ids[t]);
  }
  CHECK(model_ids == sampled);

  ordered_json conversation = prompt_messages;
  for (const auto& message : trajectory.messages) conversation.push_back(message);
  const std::vector<int32_t> rerendered = transformers_ids(dir, conversation, schemas, false);
  std::vector<int32_t> ours = task.prompt_ids;
  ours.insert(ours.end(), trajectory.response_ids.begin(), trajectory.response_ids.end());
  REQUIRE(rerendered.size() >= ours.size());
  CHECK(std::vector<int32_t>(rerendered.begin(), rerendered.begin() + static_cast<long>(ours.size())) == ours);
  const std::string tail =
      tokenizer.decode(std::vector<int32_t>(rerendered.begin() + static_cast<long>(ours.size()), rerendered.end()));
  CHECK(tail.find_first_not_of(" \n") == std::string::npos);
  fs::remove_all(dir);
}

}  // namespace agent_turns_hf

TEST_CASE("agent trajectories are transformers' tokens of the re-rendered conversation: Qwen3 (Hermes calls)",
          "[hf][agent]") {
  agent_turns_hf::check_family(
      {"qwen3",
       "hermes",
       "<|im_end|>",
       {"<think>\nI should look the product up.\n</think>\n\n<tool_call>\n{\"name\": \"lookup\", \"arguments\": "
        "{\"text\": \"123 * 456\"}}\n</tool_call>",
        "<think>\nThe tool said something odd; check twice — ✓.\n</think>\n\n<tool_call>\n{\"name\": \"lookup\", "
        "\"arguments\": {\"text\": \"56088\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"lookup\", \"arguments\": "
        "{\"text\": \"line one\\nline two: 中文 🎉\"}}\n</tool_call>",
        "<think>\nNow add 7.\n</think>\n\n123 * 456 + 7 = 56095."},
       3});
}

TEST_CASE("agent trajectories are transformers' tokens of the re-rendered conversation: Llama 3.1 (JSON calls)",
          "[hf][agent]") {
  agent_turns_hf::check_family(
      {"llama3_1",
       "llama3_json",
       "<|eot_id|>",
       {"{\"name\": \"lookup\", \"parameters\": {\"text\": \"123 * 456 = 56088 ✓\"}}", "123 * 456 + 7 = 56095."},
       1});
}
