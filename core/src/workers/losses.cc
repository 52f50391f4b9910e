// The trainer's per-micro-batch losses (see trainer/losses.h).
#include "workers/losses.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "rlcore/metric_names.h"
#include "rlcore/rl_functional.h"

namespace rlcore::workers {
namespace {

// The aggregation that makes micro-batch losses sum to the global mini-batch
// loss (verl's agg_loss with global token / sequence counts).
LossAggregation global_aggregation(const std::string& mode, const GlobalBatchInfo& global) {
  LossAggregation aggregation;
  aggregation.mode = mode;
  aggregation.dp_size = global.dp_size;
  aggregation.batch_num_tokens = global.num_tokens;
  aggregation.global_batch_size = global.num_sequences;
  return aggregation;
}

// The same quantity as a plain mean over this micro-batch, for logging: a
// globally normalised loss is only a share of the batch's loss.
at::Tensor local_mean(const at::Tensor& values, const at::Tensor& mask, const std::string& mode) {
  LossAggregation local;
  local.mode = mode;
  return agg_loss(values, mask, local).detach();
}

}  // namespace

LossFunction actor_loss(ActorLossSettings settings) {
  return [settings = std::move(settings)](const Batch& micro, const ModelOutput& output,
                                          const GlobalBatchInfo& global) {
    const at::Tensor& mask = micro.tensor(columns::kResponseMask);
    PolicyLossInput input;
    input.old_log_prob = micro.tensor(columns::kOldLogProbs);
    input.log_prob = output.log_prob;
    input.advantages = micro.tensor(columns::kAdvantages);
    input.response_mask = mask;
    if (micro.contains(columns::kRolloutIsWeights)) input.rollout_is_weights = micro.tensor(columns::kRolloutIsWeights);
    PolicyLossConfig config = settings.policy;
    config.aggregation = global_aggregation(settings.policy.aggregation.mode, global);
    PolicyLossOutput policy = settings.policy_loss->compute(input, config);

    LossOutput result;
    result.loss = policy.loss;
    result.metrics = std::move(policy.metrics);
    {
      LossAggregation local;
      local.mode = config.aggregation.mode;
      PolicyLossConfig local_config = settings.policy;
      local_config.aggregation = local;
      at::NoGradGuard no_grad;
      result.metrics[metric_names::kActorPgLoss] = settings.policy_loss->compute(input, local_config).loss.detach();
    }
    if (settings.entropy_coeff != 0.0 && output.entropy.defined()) {
      result.loss = result.loss - settings.entropy_coeff * aggregate_entropy(output.entropy, mask, config.aggregation);
      result.metrics[metric_names::kActorEntropy] = local_mean(output.entropy, mask, config.aggregation.mode);
    }
    if (settings.use_kl_loss) {
      const at::Tensor kl = kl_penalty(output.log_prob, micro.tensor(columns::kRefLogProb), settings.kl_loss_type);
      result.loss = result.loss + settings.kl_loss_coef * agg_loss(kl, mask, config.aggregation);
      result.metrics[metric_names::kActorKlLoss] = local_mean(kl, mask, config.aggregation.mode);
      result.metrics["actor/kl_coef"] = at::scalar_tensor(settings.kl_loss_coef);
    }
    return result;
  };
}

LossFunction critic_loss(double cliprange_value, std::string loss_agg_mode) {
  return [cliprange_value, mode = std::move(loss_agg_mode)](const Batch& micro, const ModelOutput& output,
                                                            const GlobalBatchInfo& global) {
    const at::Tensor& mask = micro.tensor(columns::kResponseMask);
    const ValueLossResult value =
        compute_value_loss(output.values, micro.tensor(columns::kReturns), micro.tensor(columns::kValues), mask,
                           cliprange_value, global_aggregation(mode, global));
    LossOutput result;
    result.loss = value.loss;
    {
      at::NoGradGuard no_grad;
      LossAggregation local;
      local.mode = mode;
      result.metrics[metric_names::kCriticVfLoss] =
          compute_value_loss(output.values, micro.tensor(columns::kReturns), micro.tensor(columns::kValues), mask,
                             cliprange_value, local)
              .loss.detach();
    }
    result.metrics["critic/vf_clipfrac"] = value.clipfrac.detach();
    result.metrics["critic/vpred_mean"] = masked_mean(output.values, mask).detach();
    return result;
  };
}

LossFunction sft_loss() {
  return [](const Batch& micro, const ModelOutput& output, const GlobalBatchInfo& global) {
    const at::Tensor& mask = micro.tensor(columns::kResponseMask);
    LossOutput result;
    result.loss = agg_loss(-output.log_prob, mask, global_aggregation("token-mean", global));
    result.metrics[metric_names::kSftLoss] = local_mean(-output.log_prob, mask, "token-mean");
    return result;
  };
}

}  // namespace rlcore::workers
