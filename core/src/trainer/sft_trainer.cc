// Supervised fine-tuning on prompt/response pairs (see sft_trainer.h).
#include "rlcore/core/trainer/sft_trainer.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>

#include "rlcore/core/data/sampler.h"
#include "rlcore/core/metrics/metrics.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"
#include "rlcore/metric_names.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "trainer/agent_rollout.h"
#include "trainer/checkpoint.h"
#include "workers/sequences.h"
#include "trainer/validation.h"
#include "trainer/trainer_workers.h"

namespace rlcore::trainer {
namespace {

using Clock = std::chrono::steady_clock;

void check_batch_sizes(const config::RunConfig& config, int64_t workers, int64_t train_examples) {
  const int64_t batch_size = config.data.train_batch_size;
  if (batch_size % workers != 0) {
    throw ConfigError("data.train_batch_size (" + std::to_string(batch_size) + ") must split evenly over the " +
                      std::to_string(workers) + " data-parallel ranks of the actor");
  }
  const int64_t micro = config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu;
  if (micro > 0 && (batch_size / workers) % micro != 0) {
    throw ConfigError("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (" + std::to_string(micro) +
                      ") must divide the " + std::to_string(batch_size / workers) +
                      " examples each data-parallel rank gets per step (data.train_batch_size / data-parallel ranks)");
  }
  if (train_examples < batch_size) {
    throw ConfigError("data.train_batch_size (" + std::to_string(batch_size) + ") is larger than the training set (" +
                      std::to_string(train_examples) + " examples)");
  }
}

class SftRun {
 public:
  SftRun(const Registry& components, const config::ResolvedConfig& resolved,
         const std::vector<std::string>& plugin_paths, std::ostream& out)
      : config_(resolved.config),
        out_(out),
        tokenizer_(load_tokenizer(resolved.config)),
        agent_loop_(trainer::make_agent_loop(config_, components, tokenizer_)),
        chat_renderer_(data::checkpoint_chat_renderer(config_.actor_rollout_ref.model.path, config_.data,
                                                      trainer::agent_tool_schemas(agent_loop_.get()))),
        train_set_(data::Dataset::load(config_.data.train_files, config_.data, tokenizer_, /*with_responses=*/true,
                                       chat_renderer_,
                                       trainer::demonstration_assembler(config_, tokenizer_, agent_loop_))),
        rewards_(components, config_.reward) {
    const int64_t workers = trainer::TrainerWorkers::data_parallel_sizes(config_, components, false).first;
    check_batch_sizes(config_, workers, train_set_.size());
    trainer::check_stop_rule(config_);
    trainer::check_run_dir_writable(config_.run_dir());
    sampler_ = std::make_unique<data::EpochSampler>(train_set_.size(), config_.data.train_batch_size,
                                                    config_.data.shuffle, config_.data.seed);
    total_steps_ = config_.trainer.total_training_steps > 0
                       ? config_.trainer.total_training_steps
                       : config_.trainer.total_epochs * sampler_->steps_per_epoch();
    if (!config_.data.val_files.empty()) {
      val_set_ = data::Dataset::load(config_.data.val_files, config_.data, tokenizer_, /*with_responses=*/false,
                                     chat_renderer_);
    }
    // The rule graders only: SFT has no reward model workers.
    auto score = [this](const trainer::Rollout& rollout) {
      return trainer::compute_rewards(rollout.batch, rollout.examples, tokenizer_, rewards_,
                                      trainer::overlong_shaping(config_), nullptr,
                                      rollout.extra_info.empty() ? nullptr : &rollout.extra_info);
    };
    trainer::GenerationLimits limits =
        trainer::generation_limits(tokenizer_, config_.data.max_response_length, config_.actor_rollout_ref.rollout);
    limits.agent_loop = agent_loop_;  // validates with tools when multi_turn.enable
    validator_ = std::make_unique<trainer::Validator>(config_, val_set_, tokenizer_, score, limits);

    out_ << "rlcore sft: " << train_set_.size() << " examples, " << config_.data.train_batch_size << " per step, "
         << total_steps_ << " steps, " << workers << " data-parallel rank(s)"
         << (validator_->enabled() ? ", " + std::to_string(val_set_.size()) + " validation prompts" : std::string())
         << "\n";
    std::vector<std::string> console = {metric_names::kSftLoss, metric_names::kActorGradNorm, metric_names::kActorLr};
    for (const auto& name : validator_->core_metric_names()) console.push_back(name);
    console.push_back("val-aux/agent/tool_call_rate");  // validation through the agent loop only
    console.push_back(metric_names::kTimingStep);
    logger_.add(std::make_unique<metrics::ConsoleMetricsSink>(out_, console));
    metrics::set_aside_earlier_metrics(config_.trainer.logger, config_.run_dir(), out_);  // sft always starts at step 0
    metrics::add_file_sinks(logger_, config_.trainer.logger, config_.run_dir());
    trainer::WorkerRoles roles;
    roles.rollout = validator_->enabled();  // generation only serves validation
    roles.total_training_steps = total_steps_;
    workers_ = std::make_unique<trainer::TrainerWorkers>(resolved, components, plugin_paths, roles);
  }

  SftSummary run() {
    SftSummary summary;
    if (config_.trainer.val_before_train && validator_->enabled()) logger_.log(0, validate(0));
    for (int64_t step = 1; step <= total_steps_; ++step) {
      std::map<std::string, double> metrics = train_step();
      if (step == 1) summary.first_loss = metrics[metric_names::kSftLoss];
      summary.last_loss = metrics[metric_names::kSftLoss];
      summary.steps = step;
      const bool last = step == total_steps_;
      if (validator_->enabled() && config_.trainer.test_freq > 0 && (step % config_.trainer.test_freq == 0 || last)) {
        summary.last_validation = validate(step);
        metrics.insert(summary.last_validation.begin(), summary.last_validation.end());
        summary.stopped_at_val_reward = trainer::reached_stop_reward(config_.trainer, summary.last_validation);
      }
      logger_.log(step, metrics);
      if (summary.stopped_at_val_reward) {
        out_ << "rlcore sft: validation reward reached trainer.stop_at_val_reward ("
             << config_.trainer.stop_at_val_reward << ") at step " << step << "; stopping\n";
        break;
      }
    }
    logger_.flush();
    summary.model_dir = (std::filesystem::path(config_.run_dir()) / "hf").string();
    workers::call(workers_->actor(), workers::actor_methods::kExportHf, Batch(), {summary.model_dir}).get();
    return summary;
  }

 private:
  static Tokenizer load_tokenizer(const config::RunConfig& config) {
    const std::string& model_path = config.actor_rollout_ref.model.path;
    if (model_path.empty())
      throw ConfigError("actor_rollout_ref.model.path is required: the HF checkpoint to fine-tune");
    if (config.data.train_files.empty()) throw ConfigError("data.train_files is required: JSONL prompt/response pairs");
    return Tokenizer::from_pretrained_dir(model_path);
  }

  std::map<std::string, double> train_step() {
    const auto start = Clock::now();
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<int32_t>> responses;
    std::vector<std::vector<uint8_t>> loss_masks;  // multi-turn demonstrations: the assistant's tokens
    bool masked = false;
    for (int64_t index : sampler_->next()) {
      const data::Example& example = train_set_.at(index);
      prompts.push_back(example.prompt_ids);
      responses.push_back(example.response_ids);
      masked = masked || !example.response_loss_mask.empty();
      loss_masks.push_back(example.response_loss_mask.empty() ? std::vector<uint8_t>(example.response_ids.size(), 1)
                                                              : example.response_loss_mask);
    }
    const int64_t pad_id = tokenizer_.pad_token_id().value_or(tokenizer_.eos_token_id().value_or(0));
    const Batch batch = workers::make_supervised_batch(prompts, responses, pad_id, masked ? &loss_masks : nullptr);
    const runtime::CallOutput result = workers::call(workers_->actor(), workers::actor_methods::kSftStep, batch).get();
    std::map<std::string, double> metrics;
    workers::reply_of(workers::actor_methods::kSftStep, result.replies.front()).add_to(metrics, workers::kActorRole);
    metrics[metric_names::kTimingStep] = seconds_since(start);
    return metrics;
  }

  // The rollout gets the weights of `step` (the swap's version), then generates the validation set.
  std::map<std::string, double> validate(int64_t step) {
    const auto start = Clock::now();
    workers::call(workers_->actor(), workers::actor_methods::kSyncWeights, Batch(), {step}).get();
    std::map<std::string, double> metrics = validator_->run(trainer::colocated_rollout(workers_->actor()), step);
    metrics[metric_names::kTimingTesting] = seconds_since(start);
    return metrics;
  }

  const config::RunConfig& config_;
  std::ostream& out_;
  Tokenizer tokenizer_;
  std::shared_ptr<const agent::AgentLoop> agent_loop_;  // null unless multi_turn.enable
  data::ChatRenderer chat_renderer_;                    // the checkpoint's template; empty without one
  data::Dataset train_set_;
  data::Dataset val_set_;
  RewardRouter rewards_;
  std::unique_ptr<data::EpochSampler> sampler_;
  int64_t total_steps_ = 0;
  std::unique_ptr<trainer::Validator> validator_;
  metrics::MetricsLogger logger_;
  std::unique_ptr<trainer::TrainerWorkers> workers_;
};

}  // namespace

SftSummary run_sft(const Registry& components, const config::ResolvedConfig& resolved,
                   const std::vector<std::string>& plugin_paths, std::ostream& out) {
  return SftRun(components, resolved, plugin_paths, out).run();
}

}  // namespace rlcore::trainer
