// Private to the core: the trainers' side of the agent loop. Builds the loop
// from the run's config and runs it over the actor's generate method, one call
// per turn for all live trajectories.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/registry.h"
#include "trainer/generation.h"

namespace rlcore::trainer {

// Null unless actor_rollout_ref.rollout.multi_turn.enable. Throws ConfigError
// for what the loop cannot run with: no chat template (checkpoint or
// data.prompt_template), verl's Python agent loops or function tools, a tool
// config that names no registered tool.
std::shared_ptr<const agent::AgentLoop> make_agent_loop(const config::RunConfig& config, const Registry& registry,
                                                        const Tokenizer& tokenizer);

// SFT data's multi-turn demonstrations (responses given as messages) in the
// agent loop's layout: through `loop`, else a loop without tools on the
// checkpoint's chat template; empty when the checkpoint has none or no EOS.
data::ResponseAssembler demonstration_assembler(const config::RunConfig& config, const Tokenizer& tokenizer,
                                                std::shared_ptr<const agent::AgentLoop> loop);

// The chat template's tools for the prompts (null without an agent loop).
nlohmann::ordered_json agent_tool_schemas(const agent::AgentLoop* loop);

// Throws FormatError naming the record for an agent_name the loop does not have.
void check_agent_names(const data::Dataset& dataset, const std::string& key);

// Runs the loop for rollout.examples (one row each, prompts as `prompt_ids`)
// and sets rollout.batch, engine_stats, extra_info and agent_metrics.
void run_agent_rollout(const RolloutWorkers& workers, const agent::AgentLoop& loop,
                       const std::vector<std::vector<int32_t>>& prompt_ids, const workers::Sampling& sampling,
                       const GenerationLimits& limits, int64_t expected_version, Rollout& rollout);

// num_turns/{mean,max,min} (verl's) and agent/{tool_calls_mean, tool_call_rate,
// tool_errors_mean, tool_latency_s_mean, tool_latency_s_max, length_rate,
// template_mismatch} of a batch of trajectories.
std::map<std::string, double> agent_metrics(const std::vector<agent::Trajectory>& trajectories);

}  // namespace rlcore::trainer
