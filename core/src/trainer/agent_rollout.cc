// The trainers' side of the agent loop (see trainer/agent_rollout.h).
#include "trainer/agent_rollout.h"

#include <algorithm>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/error.h"
#include "workers/sequences.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

constexpr int64_t kTurnSeedStride = 7919;  // each turn its own random stream

bool uses_tools(const std::string& agent_name) { return agent_name == agent::kToolAgent; }

}  // namespace

std::shared_ptr<const agent::AgentLoop> make_agent_loop(const config::RunConfig& config, const Registry& registry,
                                                        const Tokenizer& tokenizer) {
  const config::RolloutConfig& rollout = config.actor_rollout_ref.rollout;
  const agent::MultiTurnConfig& multi_turn = rollout.multi_turn;
  if (!multi_turn.enable) return nullptr;
  const std::string prefix = "actor_rollout_ref.rollout.";
  if (!rollout.agent.agent_loop_config_path.empty()) {
    throw ConfigError(prefix +
                      "agent.agent_loop_config_path: verl's Python agent loops do not run in rlcore; its "
                      "loops are built in (single_turn_agent, tool_agent; docs/agent-loop.md)");
  }
  if (!config.data.apply_chat_template || config.data.prompt_template != "chat") {
    throw ConfigError(prefix +
                      "multi_turn.enable needs the checkpoint's chat template for the tool turns: set "
                      "data.prompt_template: chat and data.apply_chat_template: true");
  }
  const std::string& model_path = config.actor_rollout_ref.model.path;
  std::optional<chat::ChatTemplate> chat_template = chat::ChatTemplate::from_checkpoint(model_path);
  if (!chat_template) {
    throw ConfigError(prefix + "multi_turn.enable needs a chat template, and the checkpoint " + model_path +
                      " has none (tokenizer_config.json's chat_template or chat_template.jinja)");
  }
  if (!tokenizer.eos_token_id()) {
    throw ConfigError(prefix + "multi_turn.enable needs an EOS token to end the model's turns; " + model_path +
                      " has none");
  }
  agent::ToolSet tools;
  if (!multi_turn.tool_config_path.empty()) tools = agent::ToolSet::from_file(registry, multi_turn.tool_config_path);
  if (!multi_turn.function_tool_path.empty()) agent::add_function_tools(registry, multi_turn.function_tool_path, tools);
  agent::AgentLoopSettings settings;
  settings.multi_turn = multi_turn;
  settings.num_workers = rollout.agent.num_workers;
  settings.default_agent_loop = rollout.agent.default_agent_loop;
  settings.response_length = config.data.max_response_length;
  settings.stop_token_id = *tokenizer.eos_token_id();
  settings.template_options = data::data_chat_template_options(config.data);
  return std::make_shared<const agent::AgentLoop>(settings, tokenizer, std::move(*chat_template), std::move(tools));
}

data::ResponseAssembler demonstration_assembler(const config::RunConfig& config, const Tokenizer& tokenizer,
                                                std::shared_ptr<const agent::AgentLoop> loop) {
  if (!loop) {
    std::optional<chat::ChatTemplate> chat_template =
        chat::ChatTemplate::from_checkpoint(config.actor_rollout_ref.model.path);
    if (!chat_template || !tokenizer.eos_token_id()) return {};
    agent::AgentLoopSettings settings;
    settings.response_length = config.data.max_response_length;
    settings.stop_token_id = *tokenizer.eos_token_id();
    settings.template_options = data::data_chat_template_options(config.data);
    loop = std::make_shared<const agent::AgentLoop>(settings, tokenizer, std::move(*chat_template), agent::ToolSet());
  }
  return [loop](const nlohmann::json& prompt_messages, const nlohmann::json& response_messages) {
    const agent::Trajectory demonstration = loop->assemble(prompt_messages, response_messages);
    return data::AssembledResponse{demonstration.response_ids, demonstration.response_mask};
  };
}

nlohmann::ordered_json agent_tool_schemas(const agent::AgentLoop* loop) {
  if (loop == nullptr || loop->tools().empty()) return nullptr;
  return loop->tools().schemas();
}

void check_agent_names(const data::Dataset& dataset, const std::string& key) {
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const std::string& name = dataset.at(i).agent_name;
    if (!name.empty() && name != agent::kSingleTurnAgent && name != agent::kToolAgent) {
      throw FormatError(key + " record " + std::to_string(dataset.at(i).index) + ": agent_name '" + name +
                        "' is not an agent loop of rlcore's; loops: " + agent::kSingleTurnAgent + ", " +
                        agent::kToolAgent);
    }
  }
}

std::map<std::string, double> agent_metrics(const std::vector<agent::Trajectory>& trajectories) {
  std::map<std::string, double> metrics;
  if (trajectories.empty()) return metrics;
  const auto count = static_cast<double>(trajectories.size());
  double turns_sum = 0, turns_max = 0, turns_min = 1e300, calls = 0, calling = 0, errors = 0, seconds = 0,
         latency_max = 0, length = 0, mismatch = 0;
  for (const agent::Trajectory& t : trajectories) {
    const auto turns = static_cast<double>(t.num_turns());
    turns_sum += turns;
    turns_max = std::max(turns_max, turns);
    turns_min = std::min(turns_min, turns);
    calls += static_cast<double>(t.tool_calls);
    calling += t.tool_calls > 0 ? 1 : 0;
    errors += static_cast<double>(t.tool_errors);
    seconds += t.tool_seconds;
    latency_max = std::max(latency_max, t.max_tool_seconds);
    length += t.finish_reason == FinishReason::kLength ? 1 : 0;
    mismatch += t.template_mismatch ? 1 : 0;
  }
  metrics["num_turns/mean"] = turns_sum / count;
  metrics["num_turns/max"] = turns_max;
  metrics["num_turns/min"] = turns_min;
  metrics["agent/tool_calls_mean"] = calls / count;
  metrics["agent/tool_call_rate"] = calling / count;
  metrics["agent/tool_errors_mean"] = errors / count;
  metrics["agent/tool_latency_s_mean"] = calls > 0 ? seconds / calls : 0.0;
  metrics["agent/tool_latency_s_max"] = latency_max;
  metrics["agent/length_rate"] = length / count;
  metrics["agent/template_mismatch"] = mismatch / count;
  return metrics;
}

void run_agent_rollout(const RolloutWorkers& workers, const agent::AgentLoop& loop,
                       const std::vector<std::vector<int32_t>>& prompt_ids, const workers::Sampling& sampling,
                       const GenerationLimits& limits, int64_t expected_version, Rollout& rollout) {
  std::vector<agent::AgentTask> tasks(rollout.examples.size());
  const std::string& default_loop = loop.settings().default_agent_loop;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const data::Example& example = *rollout.examples[i];
    tasks[i].prompt_ids = prompt_ids[i];
    tasks[i].prompt_messages = example.prompt_messages;
    tasks[i].use_tools = uses_tools(example.agent_name.empty() ? default_loop : example.agent_name);
    if (example.extra_info.is_object() && example.extra_info.contains("tools_kwargs")) {
      tasks[i].tools_kwargs = example.extra_info["tools_kwargs"];
    }
    tasks[i].id = std::to_string(expected_version) + "-" + std::to_string(i);
  }
  const agent::TurnGenerator generate = [&](const std::vector<std::vector<int32_t>>& contexts, int64_t max_tokens,
                                            int64_t turn) {
    workers::Sampling turn_sampling = sampling;
    turn_sampling.seed += turn * kTurnSeedStride;
    const Batch out =
        call_generate(workers, contexts, turn_sampling, limits, max_tokens, expected_version, rollout.engine_stats);
    const std::vector<std::vector<int32_t>> ids = workers::response_tokens(out);
    const at::Tensor logprobs = out.tensor(columns::kRolloutLogProbs).contiguous();
    const at::Tensor stopped = out.tensor(columns::kFinishedByStop).contiguous();
    std::vector<agent::TurnReply> replies(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      replies[i].ids = ids[i];
      const float* row = logprobs[static_cast<int64_t>(i)].data_ptr<float>();
      replies[i].logprobs.assign(row, row + ids[i].size());
      replies[i].stopped = stopped[static_cast<int64_t>(i)].item<int64_t>() != 0;
    }
    return replies;
  };
  const std::vector<agent::Trajectory> trajectories = loop.run(tasks, generate);
  rollout.batch = workers::trajectory_batch(prompt_ids, trajectories, limits.max_tokens, limits.pad_token_id);
  rollout.agent_metrics = agent_metrics(trajectories);
  rollout.extra_info.resize(trajectories.size());
  for (size_t i = 0; i < trajectories.size(); ++i) {
    const nlohmann::json& prompt_extra = rollout.examples[i]->extra_info;
    nlohmann::json extra = prompt_extra.is_object() ? prompt_extra : nlohmann::json::object();
    extra["__num_turns__"] = trajectories[i].num_turns();
    extra["tool_rewards"] = trajectories[i].tool_rewards;
    extra["turn_scores"] = nlohmann::json::array();  // from interactions (verl's interaction_kwargs), none yet
    rollout.extra_info[i] = std::move(extra);
  }
}

}  // namespace rlcore::trainer
