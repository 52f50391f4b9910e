// One rollout through the actor role (see trainer/generation.h).
#include "trainer/generation.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "trainer/agent_rollout.h"
#include "workers/sequences.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {

GenerationLimits generation_limits(const Tokenizer& tokenizer, int64_t max_tokens,
                                   const config::RolloutConfig& rollout) {
  GenerationLimits limits;
  limits.max_tokens = max_tokens;
  if (tokenizer.eos_token_id() && !rollout.ignore_eos) limits.stop_token_ids.push_back(*tokenizer.eos_token_id());
  limits.pad_token_id = tokenizer.pad_token_id().value_or(tokenizer.eos_token_id().value_or(0));
  return limits;
}

void add_generation_stats(GenerationStats& into, const GenerationStats& more) {
  into.decode_steps += more.decode_steps;
  into.running_rows += more.running_rows;
  into.max_running = std::max(into.max_running, more.max_running);
  into.max_waiting = std::max(into.max_waiting, more.max_waiting);
  into.prefill_rows += more.prefill_rows;
  into.joins += more.joins;
}

Batch call_generate(const RolloutWorkers& rollout, const std::vector<std::vector<int32_t>>& prompts,
                    const workers::Sampling& sampling, const GenerationLimits& limits, int64_t max_tokens,
                    int64_t expected_version, std::vector<GenerationStats>& engine_stats) {
  const workers::GenerateArgs arguments{sampling, {max_tokens, limits.stop_token_ids, limits.pad_token_id}};
  runtime::CallOutput generated = workers::call(rollout.group, rollout.generate,
                                                workers::make_prompt_batch(prompts, limits.pad_token_id), arguments)
                                      .get();
  const bool first = engine_stats.empty();
  size_t reporting = 0;
  for (const auto& reply : generated.replies) {
    const workers::GenerateReply parsed = workers::reply_of(rollout.generate, reply);
    if (parsed.stats) {
      if (first) {
        engine_stats.push_back(*parsed.stats);
      } else if (reporting < engine_stats.size()) {
        add_generation_stats(engine_stats[reporting], *parsed.stats);
      }
      ++reporting;
    }
    const int64_t version = parsed.weight_version;
    if (version != expected_version) {
      throw ValueError(rollout.generate.qualified() + " on rank " + std::to_string(reply.rank) +
                       " used weight version " + std::to_string(version) + ", expected " +
                       std::to_string(expected_version) +
                       " (the weights synced after the last update): stale rollout weights");
    }
  }
  return std::move(generated.batch);
}

Rollout generate_rollout(const RolloutWorkers& workers, const std::vector<const data::Example*>& prompts, int64_t n,
                         const workers::Sampling& sampling, const GenerationLimits& limits, int64_t expected_version) {
  Rollout rollout;
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> uid;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int64_t j = 0; j < n; ++j) {
      rollout.examples.push_back(prompts[p]);
      ids.push_back(prompts[p]->prompt_ids);
      uid.push_back(static_cast<int64_t>(p));
    }
  }
  if (limits.agent_loop) {
    run_agent_rollout(workers, *limits.agent_loop, ids, sampling, limits, expected_version, rollout);
  } else {
    rollout.batch =
        call_generate(workers, ids, sampling, limits, limits.max_tokens, expected_version, rollout.engine_stats);
  }
  rollout.batch.set(columns::kUid, at::tensor(uid, at::kLong));
  return rollout;
}

}  // namespace rlcore::trainer
