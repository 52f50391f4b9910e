// Dispatch plans and result collection per mode, and mesh layout, without sockets.
#include "runtime_testing.h"

#include <nlohmann/json.hpp>

#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/core/runtime/mesh.h"
#include "rlcore/error.h"

using namespace rlcore;
using rlcore_test::error_of;

namespace {

Batch rows(int64_t n) {
  Batch batch(n);
  batch.set("x", at::arange(n, at::kLong));
  return batch;
}

std::vector<int64_t> values(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

}  // namespace

TEST_CASE("dp_compute pads to a multiple of the ranks, splits, and unpads the joined results", "[runtime][dispatch]") {
  const runtime::DispatchPlan plan = runtime::plan_dispatch(runtime::DispatchMode::kDpCompute, {rows(5)}, 3);
  CHECK(plan.targets == std::vector<int64_t>{0, 1, 2});
  CHECK(plan.collect == std::vector<int64_t>{0, 1, 2});
  CHECK(plan.pad == 1);
  REQUIRE(plan.inputs.size() == 3);
  CHECK(values(plan.inputs[0].tensor("x")) == std::vector<int64_t>{0, 1});
  CHECK(values(plan.inputs[2].tensor("x")) == std::vector<int64_t>{4, 0});  // padding cycles from row 0
  std::vector<Batch> results;
  for (const auto& input : plan.inputs) {
    Batch out(input.size());
    out.set("y", input.tensor("x") * 10);
    results.push_back(out);
  }
  const Batch joined = runtime::collect_results(plan, results);
  CHECK(values(joined.tensor("y")) == std::vector<int64_t>{0, 10, 20, 30, 40});
}

TEST_CASE("one_to_all, all_to_all and rank_zero route inputs as declared", "[runtime][dispatch]") {
  const runtime::DispatchPlan all = runtime::plan_dispatch(runtime::DispatchMode::kOneToAll, {rows(2)}, 3);
  CHECK(all.targets == std::vector<int64_t>{0, 1, 2});
  for (const auto& input : all.inputs) CHECK(values(input.tensor("x")) == std::vector<int64_t>{0, 1});

  const runtime::DispatchPlan each = runtime::plan_dispatch(runtime::DispatchMode::kAllToAll, {rows(1), rows(2)}, 2);
  CHECK(each.inputs[1].size() == 2);
  CHECK_THAT(error_of<ValueError>([] { runtime::plan_dispatch(runtime::DispatchMode::kAllToAll, {rows(1)}, 2); }),
             Catch::Contains("one input per rank"));

  const runtime::DispatchPlan zero = runtime::plan_dispatch(runtime::DispatchMode::kRankZero, {}, 4);
  CHECK(zero.targets == std::vector<int64_t>{0});
  CHECK(zero.collect == std::vector<int64_t>{0});
  CHECK_FALSE(zero.inputs[0].has_size());
}

TEST_CASE("mesh_compute sends each dp shard to all its ranks and keeps only collect ranks", "[runtime][dispatch]") {
  // pp=1 x dp=2 x tp=2: ranks 0,1 serve dp 0 and ranks 2,3 dp 1; tp rank 0 collects.
  const runtime::MeshShape mesh = {{"pp", 1}, {"dp", 2}, {"tp", 2}};
  std::vector<runtime::MeshRank> places;
  for (int64_t rank = 0; rank < 4; ++rank) places.push_back(runtime::default_mesh_rank(mesh, rank));
  CHECK(places[1].dp_rank == 0);
  CHECK_FALSE(places[1].collect);
  CHECK(places[2].dp_rank == 1);
  CHECK(places[2].collect);

  const runtime::DispatchPlan plan = runtime::plan_dispatch(runtime::DispatchMode::kMeshCompute, {rows(3)}, 4, places);
  CHECK(plan.targets == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(plan.collect == std::vector<int64_t>{0, 2});
  CHECK(plan.pad == 1);
  CHECK(values(plan.inputs[1].tensor("x")) == std::vector<int64_t>{0, 1});
  CHECK(values(plan.inputs[3].tensor("x")) == std::vector<int64_t>{2, 0});
  const Batch joined = runtime::collect_results(plan, {plan.inputs[0], plan.inputs[2]});
  CHECK(values(joined.tensor("x")) == std::vector<int64_t>{0, 1, 2});

  places[2].collect = false;
  CHECK_THAT(
      error_of<ValueError>([&] { runtime::plan_dispatch(runtime::DispatchMode::kMeshCompute, {rows(3)}, 4, places); }),
      Catch::Contains("every dp rank needs one collect rank"));
  places[2].collect = true;
  places[3].collect = true;
  CHECK_THAT(
      error_of<ValueError>([&] { runtime::plan_dispatch(runtime::DispatchMode::kMeshCompute, {rows(3)}, 4, places); }),
      Catch::Contains("dp rank 1 has two collect ranks: 2 and 3"));
}

TEST_CASE("results without rows join to an empty Batch; mixed results are an error", "[runtime][dispatch]") {
  const runtime::DispatchPlan plan = runtime::plan_dispatch(runtime::DispatchMode::kDpCompute, {rows(4)}, 2);
  CHECK_FALSE(runtime::collect_results(plan, {Batch(), Batch()}).has_size());
  CHECK_THAT(error_of<ValueError>([&] {
               runtime::collect_results(plan, {rows(2), Batch()});
             }),
             Catch::Contains("some ranks returned a Batch"));
  CHECK_THAT(error_of<ValueError>([] { runtime::plan_dispatch(runtime::DispatchMode::kDpCompute, {Batch()}, 2); }),
             Catch::Contains("needs an input Batch"));
}

TEST_CASE("dispatch modes round-trip through their names", "[runtime][dispatch]") {
  for (auto mode :
       {runtime::DispatchMode::kOneToAll, runtime::DispatchMode::kAllToAll, runtime::DispatchMode::kDpCompute,
        runtime::DispatchMode::kMeshCompute, runtime::DispatchMode::kRankZero}) {
    CHECK(runtime::dispatch_mode_from_string(to_string(mode)) == mode);
  }
  CHECK_THAT(error_of<ValueError>([] { runtime::dispatch_mode_from_string("megatron_compute"); }),
             Catch::Contains("unknown dispatch mode 'megatron_compute'"));
}

TEST_CASE("mesh sub-groups follow the row-major layout", "[runtime][mesh]") {
  const runtime::MeshShape mesh = {{"pp", 2}, {"dp", 2}, {"tp", 2}};
  runtime::validate_mesh(mesh, 8);
  CHECK(runtime::mesh_coordinates(mesh, 5) == std::vector<int64_t>{1, 0, 1});
  CHECK(runtime::mesh_group_ranks(mesh, "tp", 5) == std::vector<int64_t>{4, 5});
  CHECK(runtime::mesh_group_ranks(mesh, "dp", 5) == std::vector<int64_t>{5, 7});
  CHECK(runtime::mesh_group_ranks(mesh, "pp", 5) == std::vector<int64_t>{1, 5});
  // Outputs live on the last pp stage, at tp rank 0.
  CHECK(runtime::default_mesh_rank(mesh, 4).collect);
  CHECK_FALSE(runtime::default_mesh_rank(mesh, 0).collect);
  CHECK(runtime::default_mesh_rank(mesh, 6).dp_rank == 1);
  CHECK(runtime::mesh_from_json(runtime::mesh_to_json(mesh))[2].name == "tp");
  CHECK_THAT(error_of<ValueError>([&] { runtime::validate_mesh(mesh, 6); }),
             Catch::Contains("has 8 ranks but the pool has 6"));
  CHECK_THAT(error_of<ValueError>([&] { runtime::mesh_group_ranks(mesh, "ep", 0); }),
             Catch::Contains("no dimension 'ep'"));
  CHECK(runtime::mesh_or_default({}, 3)[0].size == 3);
}
