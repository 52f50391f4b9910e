// The trainer's losses: micro-batch losses with global counts add up to the
// whole batch's loss, whatever the split; the KL and entropy terms are added
// as verl adds them.
#include "workers/losses.h"
#include "../../common/run_config_testing.h"

#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/registry.h"
#include "rlcore/rl_functional.h"

using namespace rlcore;
using namespace rlcore::workers;
using rlcore_test::error_of;

namespace {

struct Rows {
  Batch batch;
  ModelOutput output;
};

Rows random_rows(int64_t rows, int64_t width, uint64_t seed) {
  at::manual_seed(seed);
  Rows r;
  r.batch = Batch(rows);
  at::Tensor mask = (at::rand({rows, width}) > 0.3).to(at::kFloat);
  mask.select(1, 0).fill_(1);  // every row has a response token
  r.batch.set(columns::kResponseMask, mask);
  r.batch.set(columns::kOldLogProbs, -at::rand({rows, width}));
  r.batch.set(columns::kAdvantages, at::randn({rows, width}));
  r.batch.set(columns::kRefLogProb, -at::rand({rows, width}));
  r.output.log_prob = (-at::rand({rows, width})).requires_grad_(true);
  r.output.entropy = at::rand({rows, width}).requires_grad_(true);
  return r;
}

GlobalBatchInfo whole(const Batch& batch) {
  GlobalBatchInfo info;
  const at::Tensor mask = batch.tensor(columns::kResponseMask);
  info.num_tokens = mask.sum().item<double>();
  info.num_sequences = (mask.sum(1) > 0).sum().item<double>();
  return info;
}

workers::ActorLossSettings settings(const Registry& registry, const std::string& agg) {
  workers::ActorLossSettings s;
  s.policy_loss = registry.create<PolicyLoss>("vanilla");
  s.policy_loss_name = "vanilla";
  s.policy.aggregation.mode = agg;
  s.entropy_coeff = 0.01;
  s.use_kl_loss = true;
  s.kl_loss_coef = 0.1;
  return s;
}

// The loss of rows [start, end) as a micro-batch of the whole batch.
at::Tensor part_loss(const LossFunction& loss, const Rows& rows, int64_t start, int64_t end,
                     const GlobalBatchInfo& global) {
  ModelOutput part;
  part.log_prob = rows.output.log_prob.slice(0, start, end);
  part.entropy = rows.output.entropy.slice(0, start, end);
  return loss(rows.batch.slice(start, end), part, global).loss;
}

}  // namespace

TEST_CASE("actor loss of micro-batches sums to the whole batch's loss") {
  Registry registry;
  algorithms::register_builtin_algorithms(registry);
  for (const std::string agg : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}) {
    const Rows rows = random_rows(8, 5, 3);
    const LossFunction loss = workers::actor_loss(settings(registry, agg));
    const GlobalBatchInfo global = whole(rows.batch);
    const at::Tensor full = part_loss(loss, rows, 0, 8, global);
    const at::Tensor split = part_loss(loss, rows, 0, 3, global) + part_loss(loss, rows, 3, 8, global);
    CHECK(split.item<double>() == Approx(full.item<double>()).epsilon(1e-6));
  }
}

TEST_CASE("actor loss = policy loss - entropy bonus + kl loss, with its metrics") {
  Registry registry;
  algorithms::register_builtin_algorithms(registry);
  const Rows rows = random_rows(4, 6, 7);
  const workers::ActorLossSettings s = settings(registry, "token-mean");
  const GlobalBatchInfo global = whole(rows.batch);
  const LossOutput out = workers::actor_loss(s)(rows.batch, rows.output, global);

  const at::Tensor mask = rows.batch.tensor(columns::kResponseMask);
  PolicyLossInput input{rows.batch.tensor(columns::kOldLogProbs),
                        rows.output.log_prob,
                        rows.batch.tensor(columns::kAdvantages),
                        mask,
                        {}};
  PolicyLossConfig config;
  config.aggregation.mode = "token-mean";
  const double pg = s.policy_loss->compute(input, config).loss.item<double>();
  const double entropy = masked_mean(rows.output.entropy, mask).item<double>();
  const double kl =
      masked_mean(kl_penalty(rows.output.log_prob, rows.batch.tensor(columns::kRefLogProb), "low_var_kl"), mask)
          .item<double>();
  CHECK(out.loss.item<double>() == Approx(pg - 0.01 * entropy + 0.1 * kl).epsilon(1e-5));
  CHECK(out.metrics.at("actor/pg_loss").item<double>() == Approx(pg).epsilon(1e-5));
  CHECK(out.metrics.at("actor/kl_loss").item<double>() == Approx(kl).epsilon(1e-5));
  CHECK(out.metrics.count("actor/pg_clipfrac") == 1);

  out.loss.backward();
  CHECK(rows.output.log_prob.grad().defined());
  CHECK(rows.output.entropy.grad().abs().sum().item<double>() > 0);
}

TEST_CASE("the rollout-correction weights of a batch reach the policy loss") {
  Registry registry;
  algorithms::register_builtin_algorithms(registry);
  Rows rows = random_rows(4, 6, 11);
  workers::ActorLossSettings s = settings(registry, "token-mean");
  s.entropy_coeff = 0;
  s.use_kl_loss = false;
  const GlobalBatchInfo global = whole(rows.batch);
  const at::Tensor weights = at::rand({4, 6}) + 0.5;
  const double unweighted = workers::actor_loss(s)(rows.batch, rows.output, global).loss.item<double>();
  rows.batch.set(columns::kRolloutIsWeights, weights);
  const double weighted = workers::actor_loss(s)(rows.batch, rows.output, global).loss.item<double>();

  const at::Tensor mask = rows.batch.tensor(columns::kResponseMask);
  PolicyLossInput input{rows.batch.tensor(columns::kOldLogProbs), rows.output.log_prob,
                        rows.batch.tensor(columns::kAdvantages), mask, weights};
  PolicyLossConfig config;
  config.aggregation.mode = "token-mean";
  CHECK(weighted == Approx(s.policy_loss->compute(input, config).loss.item<double>()).epsilon(1e-5));
  CHECK(weighted != Approx(unweighted).epsilon(1e-3));
}

TEST_CASE("the metric of a micro-batch is its own mean, not its share of the batch") {
  Registry registry;
  algorithms::register_builtin_algorithms(registry);
  const Rows rows = random_rows(6, 4, 11);
  GlobalBatchInfo global = whole(rows.batch);
  global.num_tokens *= 10;  // as if other ranks held most of the batch
  global.dp_size = 2;
  const LossOutput out = workers::sft_loss()(rows.batch, rows.output, global);
  const at::Tensor mask = rows.batch.tensor(columns::kResponseMask);
  const double nll = masked_mean(-rows.output.log_prob, mask).item<double>();
  CHECK(out.metrics.at("sft/loss").item<double>() == Approx(nll).epsilon(1e-5));
  CHECK(out.loss.item<double>() == Approx(nll * mask.sum().item<double>() / global.num_tokens * 2).epsilon(1e-5));
}

TEST_CASE("critic loss is verl's clipped value loss") {
  Batch batch(2);
  batch.set(columns::kResponseMask, at::ones({2, 2}));
  batch.set(columns::kValues, at::tensor({0.0f, 0.0f, 1.0f, 1.0f}).view({2, 2}));
  batch.set(columns::kReturns, at::tensor({1.0f, 1.0f, 1.0f, 1.0f}).view({2, 2}));
  ModelOutput output;
  output.values = at::tensor({2.0f, 0.0f, 1.0f, 1.0f}).view({2, 2}).requires_grad_(true);
  GlobalBatchInfo global;
  global.num_tokens = 4;
  global.num_sequences = 2;
  const LossOutput out = workers::critic_loss(0.5, "token-mean")(batch, output, global);
  // Token 0: vpred 2 clipped to 0.5 -> max((2-1)^2, (0.5-1)^2) = 1; token 1: 1; others 0.
  CHECK(out.loss.item<double>() == Approx(0.5 * 2.0 / 4.0));
  CHECK(out.metrics.at("critic/vf_clipfrac").item<double>() == Approx(0.0));
}
