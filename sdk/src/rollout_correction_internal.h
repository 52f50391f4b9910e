// The pieces rollout_correction.cc, rollout_correction_config.cc and
// rollout_rejection.cc share: the parsed config and the rejection step.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rlcore/rollout_correction.h"

namespace rlcore::rollout_correction_internal {

// exp(+-20): the bound verl clamps log-ratios to before exponentiating.
constexpr double kSafetyBound = 20.0;

struct IsThreshold {
  double upper = 2.0;
  std::optional<double> lower;  // set: IcePop; unset: TIS
};

struct RejectionOption {
  std::string name;             // "token_k1", "seq_mean_k3", ...
  double upper = 0;             // k1: the ratio bound (not its log)
  std::optional<double> lower;  // k1 options only
};

struct ParsedConfig {
  std::optional<std::string> is_level;  // "token" / "sequence"; unset: IS off
  IsThreshold is_threshold;
  bool is_batch_normalize = false;
  std::vector<RejectionOption> rejection;  // empty: RS off
};

// Parses and checks `config` as verl does, throwing ConfigError naming
// key_prefix + "." + key.
ParsedConfig parse_config(const RolloutCorrectionConfig& config, const std::string& key_prefix);

struct RejectionResult {
  at::Tensor response_mask;
  std::map<std::string, double> metrics;  // unprefixed, as verl's compute_rollout_rejection_mask
};

// verl's compute_rollout_rejection_mask for already-parsed options.
RejectionResult compute_rejection_mask(const at::Tensor& log_ratio, const at::Tensor& response_mask,
                                       const std::vector<RejectionOption>& options);

// torch's .std() (unbiased) of a 1-D tensor, 0 for fewer than two elements (verl's guard).
double unbiased_std_or_zero(const at::Tensor& values);

}  // namespace rlcore::rollout_correction_internal
