// Fixed and adaptive KL coefficient controllers and the in-reward KL penalty.
#include "rlcore/kl_controller.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore {

const OptionsSchema<KlControlConfig>& kl_control_schema() {
  static const OptionsSchema<KlControlConfig> schema = [] {
    OptionsSchema<KlControlConfig> s;
    s.key("type", &KlControlConfig::type, "fixed: beta stays kl_coef; adaptive: beta steers the KL to target_kl.",
          one_of({"fixed", "adaptive"}))
        .key("kl_coef", &KlControlConfig::kl_coef, "KL penalty coefficient beta (the initial one when adaptive).",
             at_least(0))
        .key("horizon", &KlControlConfig::horizon, "Adaptive: samples over which the KL error is corrected.",
             greater_than(0))
        .key("target_kl", &KlControlConfig::target_kl, "Adaptive: the KL per token the controller aims for.",
             greater_than(0));
    return s;
  }();
  return schema;
}

KlController::~KlController() = default;

FixedKlController::FixedKlController(double kl_coef) : KlController(kl_coef) {}

void FixedKlController::update(double, int64_t) {}

AdaptiveKlController::AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon)
    : KlController(init_kl_coef), target_(target_kl), horizon_(horizon) {
  if (horizon <= 0) throw ValueError("algorithm.kl_ctrl.horizon must be > 0, got " + std::to_string(horizon));
  if (!(target_kl > 0)) throw ValueError("algorithm.kl_ctrl.target_kl must be > 0, got " + std::to_string(target_kl));
}

void AdaptiveKlController::update(double current_kl, int64_t n_steps) {
  const double error = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + error * static_cast<double>(n_steps) / static_cast<double>(horizon_);
}

std::unique_ptr<KlController> make_kl_controller(const KlControlConfig& config) {
  if (config.type == "fixed") return std::make_unique<FixedKlController>(config.kl_coef);
  if (config.type == "adaptive") {
    return std::make_unique<AdaptiveKlController>(config.kl_coef, config.target_kl, config.horizon);
  }
  throw ValueError("algorithm.kl_ctrl.type must be fixed or adaptive, got '" + config.type + "'");
}

KlInRewardResult apply_kl_penalty(const at::Tensor& token_level_scores, const at::Tensor& old_log_prob,
                                  const at::Tensor& ref_log_prob, const at::Tensor& response_mask,
                                  KlController& controller, const std::string& kl_penalty_type) {
  require_float_matrix(token_level_scores, "token_level_scores");
  require_shape(old_log_prob, token_level_scores.sizes(), "old_log_probs");
  require_shape(ref_log_prob, token_level_scores.sizes(), "ref_log_prob");
  require_shape(response_mask, token_level_scores.sizes(), "response_mask");
  const at::Tensor mask = response_mask.to(token_level_scores.device()).ne(0).to(token_level_scores.scalar_type());
  const at::Tensor kl =
      kl_penalty(old_log_prob, ref_log_prob, kl_penalty_type).to(token_level_scores.scalar_type()) * mask;

  KlInRewardResult result;
  result.beta = controller.value();
  result.token_level_rewards = token_level_scores - result.beta * kl;
  const int64_t batch_size = token_level_scores.size(0);
  result.current_kl = batch_size == 0 ? 0.0 : masked_mean(kl, mask, -1).mean().item<double>();
  controller.update(result.current_kl, batch_size);
  return result;
}

}  // namespace rlcore
