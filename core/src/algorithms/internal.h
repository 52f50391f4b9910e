// Shared pieces of the built-in algorithm files (core/src/algorithms_*.cc):
// one register function per file and the small tensor helpers they share.
#pragma once

#include <ATen/core/Tensor.h>

#include "rlcore/advantage_estimator.h"
#include "rlcore/registry.h"

namespace rlcore::algorithms {

void register_return_estimators(PluginRegistrar& registrar);   // gae, reinforce_plus_plus, remax
void register_outcome_estimators(PluginRegistrar& registrar);  // grpo*, rloo*, opo, gpg, reinforce_plus_plus_baseline
void register_ppo_losses(PluginRegistrar& registrar);          // vanilla, gspo, cispo, gpg, geo_mean
void register_cov_losses(PluginRegistrar& registrar);          // clip_cov, kl_cov

// `mask` as 0/1 in `like`'s dtype and on its device.
at::Tensor float_mask(const at::Tensor& mask, const at::Tensor& like);

// Every verl outcome estimator returns the per-row scalar broadcast over the
// response: scalar[:, None] * mask, as both advantages and returns.
AdvantageOutput broadcast_outcome(const at::Tensor& row_scalar, const at::Tensor& mask);

}  // namespace rlcore::algorithms
