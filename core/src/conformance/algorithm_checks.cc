// Contract checks for advantage estimators and policy losses: shapes, the
// response mask respected, inputs not modified, no autograd history where
// none belongs, and clear errors on bad input. Nothing is compared with a
// reference: each estimator and loss defines its own values.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "conformance/conformance.h"
#include "conformance/tiny_model.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/error.h"
#include "rlcore/policy_loss.h"

namespace rlcore::conformance {
namespace {

constexpr int64_t kRows = 6, kTokens = 5;
// Outputs at response positions must not move at all when padding changes;
// 1e-6 only absorbs reordered float sums.
constexpr double kMaskTolerance = 1e-6;

at::Tensor response_mask() {
  at::Tensor mask = at::ones({kRows, kTokens}, at::kFloat);
  mask[0].slice(0, 3).zero_();  // short responses, right-padded
  mask[4].slice(0, 1).zero_();
  return mask;
}

// Every optional input present: 2 groups of 3 rows, a sequence reward on each row's last token.
AdvantageInput estimator_input(uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  AdvantageInput input;
  input.response_mask = response_mask();
  const at::Tensor last = input.response_mask.cumsum(1) == input.response_mask.sum(1, true);
  input.token_level_rewards = at::randn({kRows}, generator).unsqueeze(1) * (last & input.response_mask.to(at::kBool));
  input.values = at::randn({kRows, kTokens}, generator);
  input.index = at::tensor({0, 0, 0, 1, 1, 1}, at::kLong);
  input.reward_baselines = at::randn({kRows}, generator);
  // The actor's token statistics: probabilities in (0.05, 0.95), sum_pi_squared between p^2 and 1.
  const at::Tensor probs = at::rand({kRows, kTokens}, generator) * 0.9 + 0.05;
  input.old_log_probs = probs.log();
  input.sum_pi_squared = probs.square() + at::rand({kRows, kTokens}, generator) * (1 - probs.square());
  input.rollout_is_weights = at::rand({kRows, kTokens}, generator) + 0.5;
  return input;
}

const char* const kInputNames[] = {"token_level_rewards", "response_mask", "values",         "index",
                                   "reward_baselines",    "old_log_probs", "sum_pi_squared", "rollout_is_weights"};

std::vector<at::Tensor*> tensors_of(AdvantageInput& input) {
  return {&input.token_level_rewards, &input.response_mask, &input.values,         &input.index,
          &input.reward_baselines,    &input.old_log_probs, &input.sum_pi_squared, &input.rollout_is_weights};
}

std::shared_ptr<AdvantageEstimator> make_estimator(CheckEnv& env) {
  auto made = std::static_pointer_cast<AdvantageEstimator>(env.candidate.factory(env.candidate_options, {}));
  if (!made) throw ValueError("the factory of advantage_estimator '" + env.candidate.name + "' returned null");
  return made;
}

std::string check_output_shape(const at::Tensor& t, const char* what) {
  if (!t.defined()) return std::string(what) + " is undefined";
  if (t.sizes() != at::IntArrayRef({kRows, kTokens})) return std::string(what) + " has shape " + c10::str(t.sizes());
  if (!at::isFloatingType(t.scalar_type())) return std::string(what) + " is not floating";
  if (!at::isfinite(t).all().item<bool>()) return std::string(what) + " has non-finite values";
  return "";
}

Outcome estimator_shapes(CheckEnv& env) {
  const AdvantageOutput out = make_estimator(env)->compute(estimator_input(1));
  for (const auto& problem :
       {check_output_shape(out.advantages, "advantages"), check_output_shape(out.returns, "returns")}) {
    if (!problem.empty())
      return Outcome::fail(problem + " (expected [" + std::to_string(kRows) + ", " + std::to_string(kTokens) +
                           "] finite floats)");
  }
  return Outcome::pass();
}

// Critic values and the actor's token statistics at padding positions change:
// response positions keep their outputs.
// (Rewards at padding are zero by the trainer's construction, and verl's outcome
// estimators sum every position, so they are left alone.)
Outcome estimator_mask_respected(CheckEnv& env) {
  auto estimator = make_estimator(env);
  AdvantageInput input = estimator_input(1);
  AdvantageInput noisy = estimator_input(1);
  const at::Tensor padding = input.response_mask == 0;
  noisy.values = noisy.values.masked_fill(padding, -7.0);
  noisy.old_log_probs = noisy.old_log_probs.masked_fill(padding, -30.0);
  noisy.sum_pi_squared = noisy.sum_pi_squared.masked_fill(padding, 0.5);
  noisy.rollout_is_weights = noisy.rollout_is_weights.masked_fill(padding, 9.0);
  const AdvantageOutput a = estimator->compute(input);
  const AdvantageOutput b = estimator->compute(noisy);
  const at::Tensor keep = input.response_mask.to(at::kBool);
  Worst worst;
  worst.add("advantages", max_abs_diff(a.advantages.masked_select(keep), b.advantages.masked_select(keep)));
  worst.add("returns", max_abs_diff(a.returns.masked_select(keep), b.returns.masked_select(keep)));
  return Outcome::measured(worst.error, kMaskTolerance,
                           worst.what + " at response positions after changing padding inputs");
}

Outcome estimator_no_input_mutation(CheckEnv& env) {
  AdvantageInput input = estimator_input(2);
  AdvantageInput copy = estimator_input(2);
  make_estimator(env)->compute(input);
  const auto before = tensors_of(copy);
  const auto after = tensors_of(input);
  for (size_t i = 0; i < before.size(); ++i) {
    if (!bit_equal(*after[i], *before[i]))
      return Outcome::fail(std::string("compute() modified input.") + kInputNames[i]);
  }
  return Outcome::pass();
}

Outcome estimator_no_autograd(CheckEnv& env) {
  AdvantageInput input = estimator_input(3);
  input.token_level_rewards.requires_grad_(true);
  input.values.requires_grad_(true);
  const AdvantageOutput out = make_estimator(env)->compute(input);
  if (out.advantages.requires_grad() || out.returns.requires_grad()) {
    return Outcome::fail("outputs carry autograd history from inputs that require grad");
  }
  return Outcome::pass();
}

Outcome estimator_bad_input(CheckEnv& env) {
  auto estimator = make_estimator(env);
  AdvantageInput input = estimator_input(4);
  input.response_mask = input.response_mask.slice(1, 0, kTokens - 1);
  try {
    estimator->compute(input);
  } catch (const Error&) {
    return Outcome::pass();
  } catch (const std::exception& e) {
    return Outcome::fail(std::string("a misshapen response_mask threw a non-rlcore exception: ") + e.what());
  }
  return Outcome::fail("a response_mask of another shape than token_level_rewards was accepted");
}

PolicyLossInput loss_input(uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  PolicyLossInput input;
  input.response_mask = response_mask();
  input.old_log_prob = -at::rand({kRows, kTokens}, generator) * 2;
  input.log_prob = (input.old_log_prob + at::randn({kRows, kTokens}, generator) * 0.3).requires_grad_(true);
  input.advantages = at::randn({kRows, kTokens}, generator);
  return input;
}

PolicyLossConfig loss_config() {
  PolicyLossConfig config;
  config.aggregation.batch_num_tokens = response_mask().sum().item<double>();
  config.aggregation.global_batch_size = static_cast<double>(kRows);
  return config;
}

std::shared_ptr<PolicyLoss> make_loss(CheckEnv& env) {
  auto made = std::static_pointer_cast<PolicyLoss>(env.candidate.factory(env.candidate_options, {}));
  if (!made) throw ValueError("the factory of policy_loss '" + env.candidate.name + "' returned null");
  return made;
}

// A finite scalar with a gradient on log_prob only at response positions; detached scalar metrics.
Outcome loss_shapes_and_gradient(CheckEnv& env) {
  PolicyLossInput input = loss_input(1);
  const PolicyLossOutput out = make_loss(env)->compute(input, loss_config());
  if (!out.loss.defined() || out.loss.dim() != 0) return Outcome::fail("loss is not a scalar");
  if (!std::isfinite(out.loss.item<double>())) return Outcome::fail("loss is not finite");
  if (!out.loss.requires_grad()) return Outcome::fail("loss has no gradient with respect to log_prob");
  for (const auto& [name, metric] : out.metrics) {
    if (metric.requires_grad()) return Outcome::fail("metric '" + name + "' is not detached");
    if (metric.numel() != 1) return Outcome::fail("metric '" + name + "' is not a scalar");
  }
  out.loss.backward();
  const at::Tensor grad = input.log_prob.grad();
  if (!grad.defined()) return Outcome::fail("backward() gave log_prob no gradient");
  return Outcome::measured(grad.masked_select(input.response_mask == 0).abs().max().item<double>(), 0,
                           "gradient at padding positions");
}

Outcome loss_mask_respected(CheckEnv& env) {
  auto loss = make_loss(env);
  PolicyLossInput input = loss_input(2);
  PolicyLossInput noisy = loss_input(2);
  const at::Tensor padding = input.response_mask == 0;
  noisy.advantages = noisy.advantages.masked_fill(padding, 9.0);
  noisy.log_prob = noisy.log_prob.detach().masked_fill(padding, -20.0).requires_grad_(true);
  const double a = loss->compute(input, loss_config()).loss.item<double>();
  const double b = loss->compute(noisy, loss_config()).loss.item<double>();
  return Outcome::measured(std::abs(a - b), kMaskTolerance, "loss after changing padding inputs");
}

Outcome loss_no_input_mutation(CheckEnv& env) {
  PolicyLossInput input = loss_input(3);
  const PolicyLossInput copy = loss_input(3);
  make_loss(env)->compute(input, loss_config());
  if (!bit_equal(input.log_prob, copy.log_prob)) return Outcome::fail("compute() modified input.log_prob");
  if (!bit_equal(input.old_log_prob, copy.old_log_prob)) return Outcome::fail("compute() modified input.old_log_prob");
  if (!bit_equal(input.advantages, copy.advantages)) return Outcome::fail("compute() modified input.advantages");
  if (!bit_equal(input.response_mask, copy.response_mask))
    return Outcome::fail("compute() modified input.response_mask");
  return Outcome::pass();
}

Outcome loss_bad_input(CheckEnv& env) {
  auto loss = make_loss(env);
  PolicyLossInput input = loss_input(4);
  input.advantages = input.advantages.slice(1, 0, kTokens - 1);
  try {
    loss->compute(input, loss_config());
  } catch (const Error&) {
    return Outcome::pass();
  } catch (const std::exception& e) {
    return Outcome::fail(std::string("misshapen advantages threw a non-rlcore exception: ") + e.what());
  }
  return Outcome::fail("advantages of another shape than log_prob were accepted");
}

}  // namespace

std::vector<Check> advantage_estimator_checks() {
  return {{"create",
           [](CheckEnv& env) {
             make_estimator(env);
             return Outcome::pass();
           }},
          {"shapes", estimator_shapes},
          {"mask_respected", estimator_mask_respected},
          {"no_input_mutation", estimator_no_input_mutation},
          {"no_autograd_leak", estimator_no_autograd},
          {"bad_input_error", estimator_bad_input}};
}

std::vector<Check> policy_loss_checks() {
  return {{"create",
           [](CheckEnv& env) {
             make_loss(env);
             return Outcome::pass();
           }},
          {"shapes_and_gradient", loss_shapes_and_gradient},
          {"mask_respected", loss_mask_respected},
          {"no_input_mutation", loss_no_input_mutation},
          {"bad_input_error", loss_bad_input}};
}

}  // namespace rlcore::conformance
