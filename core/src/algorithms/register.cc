// register_builtin_algorithms and the helpers the built-in algorithm files share.
#include <ATen/ATen.h>

#include "algorithms/internal.h"
#include "rlcore/core/builtin_algorithms.h"

namespace rlcore {
namespace algorithms {

at::Tensor float_mask(const at::Tensor& mask, const at::Tensor& like) {
  return mask.to(like.device()).ne(0).to(like.scalar_type());
}

AdvantageOutput broadcast_outcome(const at::Tensor& row_scalar, const at::Tensor& mask) {
  at::Tensor advantages = row_scalar.unsqueeze(-1) * float_mask(mask, row_scalar);
  return {advantages, advantages.clone()};
}

}  // namespace algorithms

void register_builtin_algorithms(Registry& registry) {
  PluginRegistrar registrar(registry, PluginOrigin{"core", RLCORE_VERSION_STRING, ""});
  algorithms::register_return_estimators(registrar);
  algorithms::register_outcome_estimators(registrar);
  algorithms::register_ppo_losses(registrar);
  algorithms::register_cov_losses(registrar);
}

}  // namespace rlcore
