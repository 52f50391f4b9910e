// The built-in advantage estimators against plain-loop references and
// hand-worked cases: masks with length-1 and full-length responses, groups of
// equal rewards, single-response groups, multi-turn mask holes.
#include "../../common/algorithms_testing.h"

#include <memory>

#include "rlcore/advantage_estimator.h"
#include "rlcore/config_node.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/error.h"
#include "rlcore/registry.h"

using namespace rlcore_test;

namespace {

std::shared_ptr<rlcore::AdvantageEstimator> make_estimator(const std::string& name, const std::string& yaml = "") {
  static const rlcore::Registry registry = [] {
    rlcore::Registry r;
    rlcore::algorithms::register_builtin_algorithms(r);
    return r;
  }();
  const rlcore::ConfigNode options = yaml.empty() ? rlcore::ConfigNode() : rlcore::ConfigNode::parse(yaml, "test");
  return registry.create<rlcore::AdvantageEstimator>(name, options);
}

// Six responses to three prompts (ids 7, 3, 11), rows of one prompt not
// adjacent; row 1 is a length-1 response, row 2 fills the whole length.
struct GroupedBatch {
  std::vector<int64_t> index = {7, 3, 7, 3, 7, 11};
  Matrix mask = {{1, 1, 0, 0}, {1, 0, 0, 0}, {1, 1, 1, 1}, {1, 1, 1, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}};
  Matrix rewards = {{0, 0.5, 0, 0}, {2, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1.5, 0}, {0, -1, 0, 0}, {0, 0, 3, 0}};

  rlcore::AdvantageInput input(at::ScalarType dtype = at::kDouble) const {
    rlcore::AdvantageInput in;
    in.token_level_rewards = tensor(rewards, dtype);
    in.response_mask = tensor(mask, at::kLong);
    in.index = index_tensor(index);
    return in;
  }
};

}  // namespace

TEST_CASE("grpo: (score - group mean) / (group std + 1e-6), single groups are 0-mean 1-std", "[algorithms]") {
  const GroupedBatch batch;
  const Row scores = row_sums(batch.rewards);
  const auto groups = groups_of(batch.index);
  Row expected(scores.size()), expected_dr(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto& members = groups.at(batch.index[i]);
    const double mean = members.size() == 1 ? 0.0 : mean_of(scores, members);
    const double stddev = members.size() == 1 ? 1.0 : std_of(scores, members);
    expected[i] = (scores[i] - mean) / (stddev + 1e-6);
    expected_dr[i] = scores[i] - mean;
  }
  const auto out = make_estimator("grpo")->compute(batch.input());
  check_close(out.advantages, broadcast(expected, batch.mask), 1e-12);
  check_close(out.returns, broadcast(expected, batch.mask), 1e-12);
  // The single-response group keeps its score, scaled by 1 / (1 + 1e-6).
  CHECK(matrix(out.advantages)[5][0] == Approx(3.0 / (1 + 1e-6)).epsilon(1e-12));

  const auto dr = make_estimator("grpo", "norm_adv_by_std_in_grpo: false")->compute(batch.input());
  check_close(dr.advantages, broadcast(expected_dr, batch.mask), 1e-12);

  // float32 in, float32 out, same numbers.
  const auto f32 = make_estimator("grpo")->compute(batch.input(at::kFloat));
  CHECK(f32.advantages.scalar_type() == at::kFloat);
  check_close(f32.advantages, broadcast(expected, batch.mask), 1e-5);
}

TEST_CASE("grpo: a group whose rewards are all equal gets zero advantages, not NaN", "[algorithms]") {
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{0, 1}, {0, 1}, {1, 0}, {1, 0}}, at::kFloat);
  input.response_mask = tensor(Matrix{{1, 1}, {1, 1}, {1, 0}, {1, 0}});
  input.index = index_tensor({0, 0, 1, 1});
  const auto out = make_estimator("grpo")->compute(input);
  CHECK(all_finite(out.advantages));
  check_close(out.advantages, Matrix{{0, 0}, {0, 0}, {0, 0}, {0, 0}});
}

TEST_CASE("rloo: n / (n - 1) * (score - group mean); a single response keeps its score", "[algorithms]") {
  const GroupedBatch batch;
  const Row scores = row_sums(batch.rewards);
  const auto groups = groups_of(batch.index);
  Row expected(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto& members = groups.at(batch.index[i]);
    double others = 0;
    for (size_t r : members) others += r == i ? 0 : scores[r];
    expected[i] = members.size() == 1 ? scores[i] : scores[i] - others / static_cast<double>(members.size() - 1);
  }
  const auto out = make_estimator("rloo")->compute(batch.input());
  check_close(out.advantages, broadcast(expected, batch.mask), 1e-12);
  check_close(out.returns, broadcast(expected, batch.mask), 1e-12);
}

TEST_CASE("opo: score minus the length-weighted group mean", "[algorithms]") {
  const GroupedBatch batch;
  const Row scores = row_sums(batch.rewards);
  const Row lengths = row_sums(batch.mask);
  const auto groups = groups_of(batch.index);
  Row expected(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto& members = groups.at(batch.index[i]);
    double weighted = 0, total = 0;
    for (size_t r : members) {
      weighted += lengths[r] * scores[r];
      total += lengths[r];
    }
    expected[i] = scores[i] - (members.size() == 1 ? 0.0 : weighted / total);
  }
  check_close(make_estimator("opo")->compute(batch.input()).advantages, broadcast(expected, batch.mask), 1e-12);
}

TEST_CASE("gpg: (score - group mean) * batch size / nonzero scores", "[algorithms]") {
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{1, 0}, {0, 0}, {0, 3}, {0, 0}});
  input.response_mask = tensor(Matrix{{1, 1}, {1, 0}, {1, 1}, {1, 1}});
  input.index = index_tensor({0, 0, 1, 2});
  // Two of four scores are nonzero: alpha = 2. Group 0 mean 0.5; groups 1, 2 are single (mean 0).
  const Matrix expected = {{2 * 0.5, 2 * 0.5}, {2 * -0.5, 0}, {2 * 3.0, 2 * 3.0}, {0, 0}};
  check_close(make_estimator("gpg")->compute(input).advantages, expected, 1e-12);
}

TEST_CASE("reinforce_plus_plus_baseline: group-centred score whitened over response tokens", "[algorithms]") {
  const GroupedBatch batch;
  const Row scores = row_sums(batch.rewards);
  const auto groups = groups_of(batch.index);
  Row centred(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto& members = groups.at(batch.index[i]);
    centred[i] = scores[i] - (members.size() == 1 ? 0.0 : mean_of(scores, members));
  }
  const Matrix expected = times_mask(whiten_ref(broadcast(centred, batch.mask), batch.mask), batch.mask);
  const auto out = make_estimator("reinforce_plus_plus_baseline")->compute(batch.input());
  check_close(out.advantages, expected, 1e-9);
  check_close(out.returns, expected, 1e-9);
}

TEST_CASE("gae on a hand-worked case, then against a scalar reference", "[algorithms]") {
  // One full-length response, gamma = lam = 1: advantages before whitening are
  // reward-to-go minus value; returns = reward-to-go.
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{0, 0, 1}, {0, 1, 0}});
  input.values = tensor(Matrix{{0.2, 0.5, 0.7}, {0.1, 0.3, 0.9}});
  input.response_mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}});
  const auto out = make_estimator("gae")->compute(input);
  // Row 1 stops at its last token: the padded position has no value to bootstrap from.
  const Matrix raw = {{1 - 0.2, 1 - 0.5, 1 - 0.7}, {1 - 0.1, 1 - 0.3, 0}};
  check_close(out.returns, Matrix{{1, 1, 1}, {1, 1, 0.9}}, 1e-12);
  check_close(out.advantages, whiten_ref(raw, matrix(input.response_mask)), 1e-9);

  // A mask hole (a tool observation inside the response) is skipped: with
  // values a, b, c, rewards (0, 0, 1) and gamma = lam = 1 the advantages are
  // (1 - a, 1 - c, 1 - c) and the returns (1, 1 - c + b, 1).
  rlcore::AdvantageInput hole;
  hole.token_level_rewards = tensor(Matrix{{0, 0, 1}, {1, 0, 0}});
  hole.values = tensor(Matrix{{0.3, 0.6, 0.4}, {0.2, 0.0, 0.0}});
  hole.response_mask = tensor(Matrix{{1, 0, 1}, {1, 0, 0}});
  const auto holed = make_estimator("gae")->compute(hole);
  check_close(holed.returns, Matrix{{1, 1 - 0.4 + 0.6, 1}, {1, 0, 0}}, 1e-12);
  check_close(holed.advantages, whiten_ref(Matrix{{0.7, 0.6, 0.6}, {0.8, 0, 0}}, matrix(hole.response_mask)), 1e-9);
}

TEST_CASE("gae with gamma and lam matches a scalar reference", "[algorithms]") {
  at::manual_seed(3);
  const int64_t b = 5, t = 7;
  const at::Tensor rewards = at::randn({b, t}, at::kDouble);
  const at::Tensor values = at::randn({b, t}, at::kDouble);
  const Matrix mask = {{1, 1, 1, 1, 1, 1, 1},
                       {1, 0, 0, 0, 0, 0, 0},
                       {1, 1, 0, 1, 1, 0, 0},
                       {1, 1, 1, 0, 0, 0, 0},
                       {0, 1, 1, 1, 1, 1, 0}};
  const double gamma = 0.9, lam = 0.8;
  const Matrix r = matrix(rewards), v = matrix(values);
  Matrix advantages(b, Row(t)), returns(b, Row(t));
  for (int64_t i = 0; i < b; ++i) {
    double next_value = 0, last = 0;
    for (int64_t j = t - 1; j >= 0; --j) {
      if (mask[i][j] != 0) {
        last = r[i][j] + gamma * next_value - v[i][j] + gamma * lam * last;
        next_value = v[i][j];
      }
      advantages[i][j] = last;
      returns[i][j] = last + v[i][j];
    }
  }
  rlcore::AdvantageInput input{rewards, tensor(mask), values, {}, {}};
  const auto out = make_estimator("gae", "gamma: 0.9\nlam: 0.8")->compute(input);
  check_close(out.returns, returns, 1e-12);
  check_close(out.advantages, whiten_ref(advantages, mask), 1e-9);
}

TEST_CASE("reinforce_plus_plus: discounted returns, whitened, zero outside the mask", "[algorithms]") {
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{0, 0, 1}, {0, 1, 0}, {0, 0, 1}, {2, 0, 0}});
  // Full length; length 2; a mask hole (observation) carried through; length 1.
  input.response_mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}, {1, 0, 1}, {1, 0, 0}});
  const auto out = make_estimator("reinforce_plus_plus", "gamma: 0.5")->compute(input);
  const Matrix returns = {{0.25, 0.5, 1}, {0.5, 1, 0}, {0.5, 0, 1}, {2, 0, 0}};
  check_close(out.returns, returns, 1e-12);
  check_close(out.advantages, times_mask(whiten_ref(returns, matrix(input.response_mask)), matrix(input.response_mask)),
              1e-9);
}

TEST_CASE("remax: reward-to-go minus the greedy baseline on response tokens", "[algorithms]") {
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{0, 0, 1}, {0, 2, 5}});
  input.response_mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}});  // row 1's padded reward is ignored
  input.reward_baselines = tensor(Row{0.25, 1.5});
  const auto out = make_estimator("remax")->compute(input);
  check_close(out.returns, Matrix{{1, 1, 1}, {2, 2, 0}});
  check_close(out.advantages, Matrix{{0.75, 0.75, 0.75}, {0.5, 0.5, 0}});
}

TEST_CASE("estimators name the input they are missing", "[algorithms]") {
  const GroupedBatch batch;
  rlcore::AdvantageInput no_index = batch.input();
  no_index.index = at::Tensor();
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_estimator("grpo")->compute(no_index); }),
             Catch::Contains("'grpo'") && Catch::Contains("'index'"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_estimator("gae")->compute(batch.input()); }),
             Catch::Contains("'values'"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_estimator("remax")->compute(batch.input()); }),
             Catch::Contains("'reward_baselines'"));
  rlcore::AdvantageInput short_mask = batch.input();
  short_mask.response_mask = short_mask.response_mask.slice(1, 0, 2);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_estimator("rloo")->compute(short_mask); }),
             Catch::Contains("'response_mask'") && Catch::Contains("[6, 2]"));
  CHECK(make_estimator("gae")->needs().values);
  CHECK(make_estimator("grpo")->needs().index);
  CHECK(make_estimator("remax")->needs().reward_baselines);
  CHECK_FALSE(make_estimator("reinforce_plus_plus")->needs().index);
}

TEST_CASE("grpo_passk: only the best gets best minus second best; ties and single responses", "[algorithms]") {
  rlcore::AdvantageInput in;
  in.token_level_rewards = tensor(Matrix{{0, 1}, {0, 3}, {2, 0}, {1, 0}, {0, 1}}, at::kDouble);
  in.response_mask = tensor(Matrix{{1, 1}, {1, 1}, {1, 0}, {1, 1}, {1, 1}}, at::kLong);
  in.index = index_tensor({5, 5, 5, 6, 6});  // group 5: 1, 3, 2 -> row 1 gets 3 - 2; group 6 ties at 1
  const auto plain = make_estimator("grpo_passk", "norm_adv_by_std_in_grpo: false")->compute(in);
  check_close(plain.advantages, {{0, 0}, {1, 1}, {0, 0}, {0, 0}, {0, 0}});
  const auto scaled = make_estimator("grpo_passk")->compute(in);
  check_close(scaled.advantages, {{0, 0}, {1 / (1 + 1e-6), 1 / (1 + 1e-6)}, {0, 0}, {0, 0}, {0, 0}}, 1e-12);
  in.index = index_tensor({5, 5, 5, 6, 7});
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_estimator("grpo_passk")->compute(in); }),
             Catch::Contains("grpo_passk needs at least 2 responses per prompt") && Catch::Contains("group 6 has 1"));
}
