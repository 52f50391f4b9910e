// The built-in algorithms through the registry: created by name with options,
// unknown names and keys reported, origin "core", visible from a Session and
// `rlcore plugins`; and the Batch adapter for estimator inputs.
#include "../../common/algorithms_testing.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "rlcore/advantage_estimator.h"
#include "rlcore/batch.h"
#include "rlcore/config_node.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/core/cli/cli.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/core/session.h"
#include "rlcore/error.h"
#include "rlcore/policy_loss.h"
#include "rlcore/registry.h"

using namespace rlcore_test;

namespace {

rlcore::Registry builtin_registry() {
  rlcore::Registry registry;
  rlcore::algorithms::register_builtin_algorithms(registry);
  return registry;
}

}  // namespace

TEST_CASE("register_builtin_algorithms adds verl's names with origin core", "[algorithms]") {
  const rlcore::Registry registry = builtin_registry();
  CHECK(registry.names("advantage_estimator") ==
        std::vector<std::string>{"gae", "gdpo", "gpg", "grpo", "grpo_passk", "grpo_vectorized", "opo",
                                 "optimal_token_baseline", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                                 "remax", "rloo", "rloo_vectorized", "tir_optimal_token_baseline"});
  CHECK(registry.names("policy_loss") == std::vector<std::string>{"cispo", "clip_cov", "dppo_kl", "dppo_tv", "dro",
                                                                  "geo_mean", "gpg", "gspo", "kl_cov", "sapo",
                                                                  "vanilla"});
  for (const auto* entry : registry.all()) {
    INFO(entry->kind << " " << entry->name);
    CHECK(entry->origin.plugin == "core");
    CHECK(entry->origin.file.empty());
    CHECK_FALSE(entry->doc.empty());
  }
  const auto& gae = registry.get("advantage_estimator", "gae");
  REQUIRE(gae.keys.size() == 2);
  CHECK(gae.keys[0].name == "gamma");
  CHECK(gae.keys[1].name == "lam");

  rlcore::Registry twice = builtin_registry();
  CHECK_THAT(error_of<rlcore::PluginError>([&] { rlcore::algorithms::register_builtin_algorithms(twice); }),
             Catch::Contains("duplicate"));
}

TEST_CASE("estimators and losses are created by name with their options", "[algorithms]") {
  const rlcore::Registry registry = builtin_registry();
  rlcore::AdvantageInput input;
  input.token_level_rewards = tensor(Matrix{{0, 1}, {0, 0}});
  input.response_mask = tensor(Matrix{{1, 1}, {1, 1}});
  input.index = index_tensor({5, 5});
  // Dr. GRPO: scores 1 and 0 around their mean 0.5, not divided by the std.
  const auto dr = registry.create<rlcore::AdvantageEstimator>(
      "grpo", rlcore::ConfigNode::parse("norm_adv_by_std_in_grpo: false", "test.yaml"));
  check_close(dr->compute(input).advantages, Matrix{{0.5, 0.5}, {-0.5, -0.5}});

  const auto loss = registry.create<rlcore::PolicyLoss>("kl_cov", rlcore::ConfigNode::parse("kl_cov_ratio: 0.5", "t"));
  CHECK(loss != nullptr);

  CHECK_THAT(error_of<rlcore::ConfigError>([&] {
               registry.create<rlcore::AdvantageEstimator>("gae",
                                                           rlcore::ConfigNode::parse("lambda: 0.9", "test.yaml"));
             }),
             Catch::Contains("lambda") && Catch::Contains("lam"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] {
               registry.create<rlcore::AdvantageEstimator>("gae", rlcore::ConfigNode::parse("gamma: 1.5", "test.yaml"));
             }),
             Catch::Contains("gamma"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] {
               registry.create<rlcore::PolicyLoss>("clip_cov", rlcore::ConfigNode::parse("clip_cov_ratio: 0", "t"));
             }),
             Catch::Contains("clip_cov_ratio"));
}

TEST_CASE("dro without a positive dro_beta is refused when made, naming the key", "[algorithms]") {
  const rlcore::Registry registry = builtin_registry();
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { registry.create<rlcore::PolicyLoss>("dro"); }),
             Catch::Contains("actor_rollout_ref.actor.policy_loss.dro_beta > 0"));
  CHECK(registry.create<rlcore::PolicyLoss>("dro", rlcore::ConfigNode::parse("dro_beta: 0.1", "t")) != nullptr);
}

TEST_CASE("an unknown name lists the registered ones", "[algorithms]") {
  const rlcore::Registry registry = builtin_registry();
  CHECK_THAT(error_of<rlcore::PluginError>([&] { registry.create<rlcore::AdvantageEstimator>("ppo"); }),
             Catch::Contains("'ppo'") && Catch::Contains("gae") && Catch::Contains("grpo") &&
                 Catch::Contains("reinforce_plus_plus_baseline"));
  CHECK_THAT(error_of<rlcore::PluginError>([&] { registry.create<rlcore::PolicyLoss>("dppo"); }),
             Catch::Contains("vanilla") && Catch::Contains("clip_cov"));
}

TEST_CASE("algorithm options live under verl's config paths", "[algorithms]") {
  CHECK(rlcore::config::component_options_path("advantage_estimator", "grpo") == "algorithm");
  CHECK(rlcore::config::component_options_path("policy_loss", "clip_cov") == "actor_rollout_ref.actor.policy_loss");
}

TEST_CASE("a Session has the built-ins, and `rlcore plugins` lists them as built in", "[algorithms]") {
  rlcore::Session session({});
  const auto* grpo = session.registry().find("advantage_estimator", "grpo");
  REQUIRE(grpo != nullptr);
  CHECK(grpo->origin.plugin == "core");

  std::istringstream in;
  std::ostringstream out, err;
  REQUIRE(rlcore::cli::run_cli({"plugins"}, in, out, err) == 0);
  std::istringstream lines(out.str());
  bool listed = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("policy_loss") != std::string::npos && line.find("vanilla") != std::string::npos) {
      listed = line.find("core") != std::string::npos && line.find("(built in)") != std::string::npos;
    }
  }
  CHECK(listed);
}

TEST_CASE("advantage_input_from_batch numbers uid groups in order of appearance", "[algorithms]") {
  rlcore::Batch batch;
  batch.set("token_level_rewards", tensor(Matrix{{1, 0}, {0, 1}, {1, 1}}));
  batch.set("response_mask", tensor(Matrix{{1, 1}, {1, 0}, {1, 1}}, at::kLong));
  batch.set_non_tensor("uid", {nlohmann::json("b7"), nlohmann::json("a1"), nlohmann::json("b7")});
  const rlcore::AdvantageInput input = rlcore::advantage_input_from_batch(batch);
  CHECK(at::equal(input.index, index_tensor({0, 1, 0})));
  CHECK_FALSE(input.values.defined());
  CHECK(at::equal(input.token_level_rewards, batch.tensor("token_level_rewards")));

  rlcore::Batch numbered = batch.select({"token_level_rewards", "response_mask"});
  numbered.set("uid", index_tensor({4, 4, 9}));
  CHECK(at::equal(rlcore::advantage_input_from_batch(numbered).index, index_tensor({4, 4, 9})));

  rlcore::Batch bad = batch;
  bad.set_non_tensor("uid", {nlohmann::json("x"), nlohmann::json::array(), nlohmann::json("x")});
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::advantage_input_from_batch(bad); }),
             Catch::Contains("'uid' row 1"));
  rlcore::Batch no_mask;
  no_mask.set("token_level_rewards", tensor(Matrix{{1}}));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::advantage_input_from_batch(no_mask); }),
             Catch::Contains("'response_mask'"));
}
