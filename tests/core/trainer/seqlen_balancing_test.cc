// trainer.balance_batch held to verl's own functions (reference/verl_balance_batch.py):
// Karmarkar-Karp partitions with and without equal sizes, the balanced row order and the
// global_seqlen/* metrics, on seeded long-tailed lengths over 2 to 8 ranks.
#include "trainer/seqlen_balancing.h"

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "rlcore/error.h"

using namespace rlcore::trainer;

namespace seqlen_balancing_test {

// A [rows, L] attention mask whose row i has tokens[i] ones (left part of the row).
at::Tensor mask_of(const std::vector<int64_t>& tokens) {
  const int64_t width = *std::max_element(tokens.begin(), tokens.end()) + 3;
  at::Tensor mask = at::zeros({static_cast<int64_t>(tokens.size()), width}, at::kLong);
  for (size_t i = 0; i < tokens.size(); ++i) mask[static_cast<int64_t>(i)].slice(0, 0, tokens[i]).fill_(1);
  return mask;
}

}  // namespace seqlen_balancing_test

TEST_CASE("balance_batch partitions, orders and reports as verl does", "[trainer][balance]") {
  const nlohmann::json reference = nlohmann::json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/trainer/reference/verl_balance_batch.py")));
  REQUIRE(reference["cases"].size() == 6);
  for (const nlohmann::json& c : reference["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int64_t>>();
    const int64_t dp = c["dp"].get<int64_t>();
    INFO(tokens.size() << " rows over " << dp << " ranks");
    std::vector<int64_t> workload;
    for (const int64_t t : tokens) workload.push_back(sequence_workload(t));
    CHECK(workload == c["workload"].get<std::vector<int64_t>>());
    CHECK(balanced_partitions(workload, dp, true) == c["partitions_equal"].get<std::vector<std::vector<int64_t>>>());
    CHECK(balanced_partitions(tokens, dp, false) == c["partitions_free"].get<std::vector<std::vector<int64_t>>>());

    const BalancedOrder balanced = balance_batch_order(seqlen_balancing_test::mask_of(tokens), dp);
    CHECK(balanced.order == c["order"].get<std::vector<int64_t>>());
    for (const auto& [name, value] : c["metrics"].items()) {
      INFO(name);
      CHECK(balanced.metrics.at(name) == Approx(value.get<double>()));
    }
    CHECK(balanced.metrics.size() == c["metrics"].size());
  }
}

TEST_CASE("balancing evens out a skewed batch and refuses what cannot be split", "[trainer][balance]") {
  // Rank 0 would get the four long rows, rank 1 the four short ones.
  const std::vector<int64_t> tokens = {100, 90, 80, 70, 10, 9, 8, 7};
  const BalancedOrder balanced = balance_batch_order(seqlen_balancing_test::mask_of(tokens), 2);
  CHECK(balanced.metrics.at("global_seqlen/minmax_diff") == 306);
  CHECK(balanced.metrics.at("global_seqlen/balanced_max") - balanced.metrics.at("global_seqlen/balanced_min") < 30);
  std::vector<int64_t> sorted = balanced.order;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});  // a permutation

  CHECK_THROWS_AS(balanced_partitions({1, 2, 3}, 2, true), rlcore::ValueError);
  CHECK_THROWS_AS(balanced_partitions({1}, 2, false), rlcore::ValueError);
}
