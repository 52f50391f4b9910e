// PolicyLoss's vtable anchor and input checks.
#include "rlcore/policy_loss.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore {

PolicyLoss::~PolicyLoss() = default;

void validate_policy_loss_input(const PolicyLossInput& input, const PolicyLossConfig& config, const std::string& loss) {
  try {
    require_float_matrix(input.log_prob, "log_prob");
    const at::IntArrayRef shape = input.log_prob.sizes();
    require_shape(input.old_log_prob, shape, "old_log_prob");
    require_shape(input.advantages, shape, "advantages");
    require_shape(input.response_mask, shape, "response_mask");
    if (input.rollout_is_weights.defined()) require_shape(input.rollout_is_weights, shape, "rollout_is_weights");
    if (!(config.clip_ratio >= 0)) throw ValueError("actor.clip_ratio must be >= 0");
    if (!(config.low() >= 0 && config.low() <= 1)) throw ValueError("actor.clip_ratio_low must be in [0, 1]");
    if (!(config.high() >= 0)) throw ValueError("actor.clip_ratio_high must be >= 0");
    if (!(config.clip_ratio_c > 1.0)) {
      throw ValueError("actor.clip_ratio_c (the dual-clip bound) must be > 1, got " +
                       std::to_string(config.clip_ratio_c));
    }
  } catch (const ValueError& e) {
    throw ValueError("policy loss '" + loss + "': " + e.what());
  }
}

}  // namespace rlcore
