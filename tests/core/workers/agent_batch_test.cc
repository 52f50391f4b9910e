// Multi-turn rows in the engine layout: the agent loop's trajectories give the
// same batch, and so the same loss, as the trajectory assembled by hand; the
// tool's tokens are attended but never in the loss, and the reward lands on
// the last token.
#include "workers/sequences.h"
#include "../../common/run_config_testing.h"

#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/rl_functional.h"
#include "rlcore/tokenizer/tokenizer.h"

using namespace rlcore;
using namespace rlcore::workers;

namespace agent_batch_test {

constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

class Echo : public Tool {
 public:
  ToolSchema schema() const override {
    ToolSchema schema;
    schema.name = "calculator";
    return schema;
  }
  ToolResult call(const nlohmann::json&, const ToolCallContext&) const override { return {"56088", false, 0.0}; }
};

std::vector<int32_t> plus(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A per-token "loss" that depends on the token and its position, so any misplaced token changes the sum.
at::Tensor token_loss(const Batch& batch) {
  const at::Tensor responses = batch.tensor(columns::kResponses).to(at::kDouble);
  const at::Tensor positions = at::arange(responses.size(1), at::kDouble).unsqueeze(0).expand_as(responses);
  return at::sin(responses * 0.37 + positions * 0.11);
}

}  // namespace agent_batch_test

using namespace agent_batch_test;

TEST_CASE("the agent loop's rows equal the hand-assembled trajectory, and so does every loss aggregation", "[agent]") {
  const Tokenizer tokenizer = make_builtin_tokenizer();
  const int32_t stop = tokenizer.encode("<|im_end|>").at(0);
  const chat::ChatTemplate chat = chat::ChatTemplate::from_string(kChatMlTemplate);
  agent::AgentLoopSettings settings;
  settings.multi_turn.enable = true;
  settings.response_length = 160;
  settings.stop_token_id = stop;
  agent::ToolSet tools;
  tools.add(std::make_shared<Echo>());
  const agent::AgentLoop loop(settings, tokenizer, chat, std::move(tools));

  const std::string call =
      "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"123*456\"}}</tool_call>";
  std::vector<agent::AgentTask> tasks(2);
  for (auto& task : tasks) {
    task.prompt_messages = nlohmann::json::array({{{"role", "user"}, {"content", "123*456="}}});
    task.prompt_ids = tokenizer.encode(chat.render(nlohmann::ordered_json::parse(task.prompt_messages.dump())));
  }
  tasks[1].prompt_messages[0]["content"] = "7*8=";
  tasks[1].prompt_ids = tokenizer.encode(chat.render(nlohmann::ordered_json::parse(tasks[1].prompt_messages.dump())));
  tasks[1].use_tools = false;  // a single-turn row beside the multi-turn one
  const agent::TurnGenerator model = [&](const std::vector<std::vector<int32_t>>& contexts, int64_t, int64_t turn) {
    std::vector<agent::TurnReply> replies;
    for (size_t i = 0; i < contexts.size(); ++i) {
      agent::TurnReply reply;
      reply.ids = plus(tokenizer.encode(turn == 0 && contexts.size() == 2 && i == 0 ? call : "#### 56088"), {stop});
      reply.logprobs.assign(reply.ids.size(), -0.5f);
      reply.stopped = true;
      replies.push_back(reply);
    }
    return replies;
  };
  const std::vector<agent::Trajectory> trajectories = loop.run(tasks, model);
  const Batch looped =
      workers::trajectory_batch({tasks[0].prompt_ids, tasks[1].prompt_ids}, trajectories, settings.response_length, 0);

  // By hand: the call as sampled, the tool's turn as the template renders it, the answer.
  const std::vector<int32_t> turn1 = plus(tokenizer.encode(call), {stop});
  const std::vector<int32_t> tool = tokenizer.encode("\n<|im_start|>tool\n56088<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> turn2 = plus(tokenizer.encode("#### 56088"), {stop});
  std::vector<uint8_t> mask0(turn1.size(), 1);
  mask0.insert(mask0.end(), tool.size(), 0);
  mask0.insert(mask0.end(), turn2.size(), 1);
  const std::vector<std::vector<uint8_t>> masks = {mask0, std::vector<uint8_t>(turn2.size(), 1)};
  Batch by_hand = workers::make_supervised_batch({tasks[0].prompt_ids, tasks[1].prompt_ids},
                                                 {plus(plus(turn1, tool), turn2), turn2}, 0, &masks);
  // The supervised layout pads responses to the longest; the rollout's to the response length.
  const int64_t width = by_hand.tensor(columns::kResponses).size(1);
  for (const char* column : {columns::kInputIds, columns::kAttentionMask, columns::kPositionIds}) {
    INFO(column);
    const at::Tensor full = looped.tensor(column);
    CHECK(at::equal(full.narrow(1, 0, full.size(1) - settings.response_length + width), by_hand.tensor(column)));
  }
  CHECK(at::equal(looped.tensor(columns::kResponseMask).narrow(1, 0, width), by_hand.tensor(columns::kResponseMask)));
  CHECK(looped.tensor(columns::kResponseMask).narrow(1, width, settings.response_length - width).sum().item<double>() ==
        0);

  for (const char* mode : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}) {
    INFO(mode);
    LossAggregation aggregation;
    aggregation.mode = mode;
    const double through_loop =
        agg_loss(token_loss(looped), looped.tensor(columns::kResponseMask).to(at::kDouble), aggregation).item<double>();
    const double assembled =
        agg_loss(token_loss(by_hand), by_hand.tensor(columns::kResponseMask).to(at::kDouble), aggregation)
            .item<double>();
    CHECK(through_loop == Approx(assembled).epsilon(1e-12));
  }

  // The tool's tokens: attended, out of the loss, log-prob 0; the rollout's own tokens keep theirs.
  const at::Tensor rollout_log_probs = looped.tensor(columns::kRolloutLogProbs);
  CHECK(rollout_log_probs[0][0].item<float>() == -0.5f);
  CHECK(rollout_log_probs[0][static_cast<int64_t>(turn1.size())].item<float>() == 0.0f);
  CHECK(workers::response_attention(looped)[0].sum().item<int64_t>() ==
        static_cast<int64_t>(turn1.size() + tool.size() + turn2.size()));
  CHECK(looped.tensor(columns::kResponseMask)[0].sum().item<double>() ==
        static_cast<double>(turn1.size() + turn2.size()));
  // What the grader reads and where the reward goes: the whole response, tool result included.
  const auto responses = workers::response_tokens(looped);
  CHECK(responses[0] == plus(plus(turn1, tool), turn2));
  CHECK(responses[1] == turn2);
  CHECK(looped.tensor(columns::kFinishedByStop)[0].item<int64_t>() == 1);
}
