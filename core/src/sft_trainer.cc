// Supervised fine-tuning on prompt/response pairs (see sft_trainer.h).
#include "rlcore/core/trainer/sft_trainer.h"

#include <chrono>
#include <filesystem>
#include <ostream>

#include "rlcore/core/data/sampler.h"
#include "rlcore/core/metrics.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer.h"
#include "trainer_sequences.h"
#include "trainer_workers.h"

namespace rlcore {

SftSummary run_sft(const ResolvedConfig& resolved, const std::vector<std::string>& plugin_paths, std::ostream& out) {
  const RunConfig& config = resolved.config;
  const std::string& model_path = config.actor_rollout_ref.model.path;
  if (model_path.empty()) throw ConfigError("actor_rollout_ref.model.path is required: the HF checkpoint to fine-tune");
  if (config.data.train_files.empty()) throw ConfigError("data.train_files is required: JSONL prompt/response pairs");
  const Tokenizer tokenizer = Tokenizer::from_pretrained_dir(model_path);
  const Dataset train_set = Dataset::load(config.data.train_files, config.data, tokenizer, /*with_responses=*/true);
  const int64_t workers = trainer::TrainerWorkers::pool_sizes(config, false).first;
  const int64_t batch_size = config.data.train_batch_size;
  if (batch_size % workers != 0) {
    throw ConfigError("data.train_batch_size (" + std::to_string(batch_size) + ") must split evenly over the " +
                      std::to_string(workers) + " actor workers");
  }
  const int64_t micro = config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu;
  if (micro > 0 && (batch_size / workers) % micro != 0) {
    throw ConfigError("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (" + std::to_string(micro) +
                      ") must divide the " + std::to_string(batch_size / workers) +
                      " examples each worker gets per step (data.train_batch_size / workers)");
  }
  if (train_set.size() < batch_size) {
    throw ConfigError("data.train_batch_size (" + std::to_string(batch_size) + ") is larger than the training set (" +
                      std::to_string(train_set.size()) + " examples)");
  }
  EpochSampler sampler(train_set.size(), batch_size, config.data.shuffle, config.data.seed);
  const int64_t total_steps = config.trainer.total_training_steps > 0
                                  ? config.trainer.total_training_steps
                                  : config.trainer.total_epochs * sampler.steps_per_epoch();
  const int64_t pad_id = tokenizer.pad_token_id().value_or(tokenizer.eos_token_id().value_or(0));

  out << "rlcore sft: " << train_set.size() << " examples, " << batch_size << " per step, " << total_steps
      << " steps, " << workers << " worker(s)\n";
  trainer::WorkerRoles roles;
  roles.rollout = false;
  roles.total_training_steps = total_steps;
  trainer::TrainerWorkers group(resolved, plugin_paths, roles);

  MetricsLogger logger;
  logger.add(std::make_unique<ConsoleMetricsSink>(out, std::vector<std::string>{"sft/loss", "actor/grad_norm",
                                                                               "actor/lr", "timing_s/step"}));
  for (const auto& sink : config.trainer.logger) {
    if (sink == "jsonl") logger.add(std::make_unique<JsonlMetricsSink>(config.run_dir()));
  }
  SftSummary summary;
  for (int64_t step = 1; step <= total_steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<int32_t>> responses;
    for (int64_t index : sampler.next()) {
      prompts.push_back(train_set.at(index).prompt_ids);
      responses.push_back(train_set.at(index).response_ids);
    }
    const Batch batch = trainer::make_supervised_batch(prompts, responses, pad_id);
    const CallOutput result = group.actor().call("actor.sft_step", batch).get();
    std::map<std::string, double> metrics;
    for (const auto& [name, value] : result.replies.front().value.items()) {
      metrics[name == "lr" || name == "grad_norm" ? "actor/" + name : name] = value.get<double>();
    }
    metrics["timing_s/step"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step == 1) summary.first_loss = metrics["sft/loss"];
    summary.last_loss = metrics["sft/loss"];
    logger.log(step, metrics);
  }
  logger.flush();
  summary.steps = total_steps;
  summary.model_dir = (std::filesystem::path(config.run_dir()) / "hf").string();
  group.actor().call("actor.export_hf", Batch(), {{"dir", summary.model_dir}}).get();
  return summary;
}

}  // namespace rlcore
