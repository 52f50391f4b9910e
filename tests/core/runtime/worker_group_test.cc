// WorkerGroups over real `rlcore worker` processes: every dispatch mode with
// values checked, overlapping calls on two pools, c10d groups of a mesh, and
// worker-side exceptions coming back with rank, host, pid and method.
#include "runtime_testing.h"

#include <unistd.h>

#include "rlcore/core/runtime/cluster.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/error.h"

using namespace std::chrono_literals;
using namespace rlcore;
using rlcore_test::error_of;

namespace {

runtime::ClusterOptions test_options() {
  runtime::ClusterOptions options;
  options.worker_executable = rlcore_test::rlcore_executable();
  options.worker_args = {"--log-level", "warn"};
  options.heartbeat_interval = 200ms;
  options.heartbeat_timeout = 10s;  // a loaded CI machine must not lose a healthy worker
  options.connect_timeout = 60s;
  options.call_timeout = 60s;  // a stuck test fails instead of hanging the suite
  options.shutdown_grace = 2s;
  options.collective_timeout = 30s;
  return options;
}

// A pool hosting the built-in diag role under the name `role`.
runtime::PoolSpec pool(const std::string& name, const std::string& role, int64_t size, runtime::MeshShape mesh = {}) {
  runtime::PoolSpec spec;
  spec.name = name;
  spec.nodes = {size};
  spec.roles = {runtime::RoleSpec{role, "diag", nlohmann::json::object()}};
  spec.mesh = std::move(mesh);
  spec.threads_per_worker = 1;
  return spec;
}

// One cluster for the tests that leave it healthy: pool "main" (2 workers, dp=2,
// role "diag") and pool "mesh" (4 workers, dp=2 x tp=2, role "sharded").
// Workers start once per test binary.
runtime::Cluster& shared_cluster() {
  static std::unique_ptr<runtime::Cluster> cluster = [] {
    runtime::ClusterOptions options = test_options();
    options.pools = {pool("main", "diag", 2), pool("mesh", "sharded", 4, {{"dp", 2}, {"tp", 2}})};
    return std::make_unique<runtime::Cluster>(options);
  }();
  return *cluster;
}

Batch numbered(int64_t rows) {
  Batch batch(rows);
  batch.set("x", at::arange(rows, at::kDouble));
  std::vector<nlohmann::json> ids;
  for (int64_t i = 0; i < rows; ++i) ids.push_back("row" + std::to_string(i));
  batch.set_non_tensor("id", ids);
  return batch;
}

std::vector<int64_t> longs(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

}  // namespace

TEST_CASE("one_to_all sends the same Batch to every worker and returns one reply per rank", "[runtime][group]") {
  runtime::WorkerGroup& group = shared_cluster().group("main");
  REQUIRE(group.size() == 2);
  CHECK(group.methods().at("diag.scale").mode == runtime::DispatchMode::kDpCompute);
  const Batch input = numbered(3);
  const runtime::CallOutput output = group.call("diag.echo", input).get();
  REQUIRE(output.replies.size() == 2);
  for (int64_t rank = 0; rank < 2; ++rank) {
    CHECK(output.replies[rank].rank == rank);
    CHECK(output.replies[rank].value["rank"] == rank);
    CHECK(output.replies[rank].batch.equals(input));
  }
  CHECK_FALSE(output.batch.has_size());
}

TEST_CASE("dp_compute splits 7 rows over 2 workers and returns them in order, unpadded", "[runtime][group]") {
  runtime::WorkerGroup& group = shared_cluster().group("main");
  const runtime::CallOutput output = group.call("diag.scale", numbered(7), {{"factor", 2.5}}).get();
  REQUIRE(output.batch.size() == 7);
  CHECK(at::equal(output.batch.tensor("y"), at::arange(7, at::kDouble) * 2.5));
  // Rows 0-3 ran on rank 0 (4 rows after padding to 8), rows 4-6 on rank 1.
  CHECK(longs(output.batch.tensor("rank")) == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1});
  REQUIRE(output.replies.size() == 2);
  CHECK(output.replies[0].value["rows"] == 4);
  CHECK(output.replies[1].value["rows"] == 4);
}

TEST_CASE("all_to_all gives rank i input i; rank_zero runs on rank 0 only", "[runtime][group]") {
  runtime::WorkerGroup& group = shared_cluster().group("main");
  Batch first(2), second(3);
  first.set("x", at::tensor({1.0, 2.0}, at::kDouble));
  second.set("x", at::tensor({10.0, 20.0, 30.0}, at::kDouble));
  const runtime::CallOutput each = group.call_each("diag.sum_each", {first, second}).get();
  REQUIRE(each.replies.size() == 2);
  CHECK(each.replies[0].value["sum"] == 3.0);
  CHECK(each.replies[1].value["sum"] == 60.0);
  CHECK(each.replies[1].value["rank"] == 1);

  const runtime::CallOutput zero = group.call("diag.leader", numbered(3)).get();
  REQUIRE(zero.replies.size() == 1);
  CHECK(zero.replies[0].rank == 0);
  CHECK(at::equal(zero.batch.tensor("doubled"), at::arange(3, at::kDouble) * 2));

  CHECK_THAT(error_of<ValueError>([&] { group.call("diag.sum_each", first).get(); }), Catch::Contains("call_each"));
  CHECK_THAT(error_of<ValueError>([&] { group.call("diag.nope").get(); }),
             Catch::Contains("pool 'main' has no method 'diag.nope'"));
}

TEST_CASE("mesh_compute shards over dp ranks and keeps the results of collect ranks only", "[runtime][group]") {
  runtime::WorkerGroup& group = shared_cluster().group("mesh");
  REQUIRE(group.size() == 4);
  CHECK(group.workers()[1].meshes.at("default").dp_rank == 0);
  CHECK_FALSE(group.workers()[1].meshes.at("default").collect);
  const runtime::CallOutput output = group.call("sharded.scale_mesh", numbered(5), {{"factor", -1.0}}).get();
  REQUIRE(output.batch.size() == 5);
  CHECK(at::equal(output.batch.tensor("y"), at::arange(5, at::kDouble) * -1));
  // dp shard 0 (rows 0-2) came from rank 0, shard 1 from rank 2: tp rank 0 of each.
  CHECK(longs(output.batch.tensor("rank")) == std::vector<int64_t>{0, 0, 0, 2, 2});
  REQUIRE(output.replies.size() == 2);
  CHECK(output.replies[1].rank == 2);
}

TEST_CASE("calls on two pools overlap and are awaited together", "[runtime][group]") {
  runtime::Cluster& cluster = shared_cluster();
  std::vector<std::future<runtime::CallOutput>> futures;
  futures.push_back(cluster.group("main").call("diag.sleep", Batch(), {{"seconds", 0.3}}));
  futures.push_back(cluster.group("mesh").call("sharded.sleep", Batch(), {{"seconds", 0.3}}));
  futures.push_back(cluster.group("main").call("diag.scale", numbered(4), {{"factor", 3.0}}));
  const std::vector<runtime::CallOutput> outputs = runtime::wait_all(futures);
  CHECK(outputs[0].replies.size() == 2);
  CHECK(outputs[1].replies.size() == 4);
  CHECK(at::equal(outputs[2].batch.tensor("y"), at::arange(4, at::kDouble) * 3));
}

TEST_CASE("each pool has c10d groups for the pool and each mesh dimension", "[runtime][group][c10d]") {
  runtime::WorkerGroup& group = shared_cluster().group("mesh");
  const runtime::CallOutput info = group.call("sharded.info").get();
  const auto& rank3 = info.replies[3].value["groups"];
  CHECK(rank3["world"]["size"] == 4);
  CHECK(rank3["tp"]["ranks"] == nlohmann::json::array({2, 3}));
  CHECK(rank3["tp"]["rank"] == 1);
  CHECK(rank3["dp"]["ranks"] == nlohmann::json::array({1, 3}));
  CHECK(info.replies[3].value["threads"] == 1);

  for (const std::string name : {"world", "dp", "tp"}) {
    const runtime::CallOutput reduced = group.call("sharded.all_reduce", Batch(), {{"group", name}}).get();
    for (const auto& reply : reduced.replies) {
      double expected = 0;
      for (const auto& member : reply.value["group_ranks"]) expected += member.get<double>() + 1;
      INFO("group " << name << ", rank " << reply.rank);
      CHECK(reply.value["sum"].get<double>() == expected);
    }
  }
  // Pools rendezvous separately: "main" has its own world of 2.
  const runtime::CallOutput main = shared_cluster().group("main").call("diag.all_reduce").get();
  CHECK(main.replies[0].value["sum"] == 3.0);
}

TEST_CASE("a worker-side exception comes back naming rank, host, pid and method", "[runtime][group][errors]") {
  runtime::Cluster& cluster = shared_cluster();
  runtime::WorkerGroup& group = cluster.group("main");
  const runtime::WorkerInfo& rank1 = group.workers()[1];
  try {
    group.call("diag.fail", Batch(), {{"ranks", {1}}, {"message", "the reward model is on fire"}}).get();
    FAIL("diag.fail did not fail");
  } catch (const runtime::RemoteCallError& e) {
    CHECK(e.worker().rank == rank1.global_rank);
    CHECK(e.worker().pid == rank1.pid);
    CHECK(e.method() == "diag.fail");
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("rank 1") && Catch::Contains("pid " + std::to_string(rank1.pid)) &&
                            Catch::Contains("host " + rank1.host) && Catch::Contains("diag.fail") &&
                            Catch::Contains("rlcore::ValueError: the reward model is on fire"));
  }
  // An exception is the call's failure, not the run's.
  CHECK_FALSE(cluster.failure());
  CHECK(group.call("diag.echo").get().replies.size() == 2);
}

TEST_CASE("a reply value over the control header's limit fails the call instead of leaving it unanswered",
          "[runtime][group][errors]") {
  runtime::WorkerGroup& group = shared_cluster().group("main");
  CHECK_THAT(rlcore_test::error_of<runtime::RemoteCallError>([&] {
               group.call("diag.big_value", Batch(), {{"bytes", 100000}}).get();
             }),
             Catch::Contains("diag.big_value") && Catch::Contains("over the control header's limit of 65536"));
  CHECK(group.call("diag.big_value", Batch(), {{"bytes", 1000}}).get().replies.size() == 2);
}

TEST_CASE("a worker with the wrong secret is refused and exits; the run goes on", "[runtime][group][security]") {
  runtime::Cluster& cluster = shared_cluster();
  const int64_t refused_before = cluster.stats().refused_hellos;
  const std::string command = "RANK=0 WORLD_SIZE=6 RLCORE_SECRET=guess RLCORE_CONTROLLER=" + cluster.endpoint() + " " +
                              rlcore_test::rlcore_executable() + " worker --log-level off --connect-timeout 20";
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(cluster.stats().refused_hellos == refused_before + 1);
  CHECK_FALSE(cluster.failure());
  CHECK(cluster.group("main").call("diag.echo").get().replies.size() == 2);
}

TEST_CASE("a call past its deadline fails naming the ranks not heard from", "[runtime][group][errors]") {
  runtime::WorkerGroup& group = shared_cluster().group("mesh");
  runtime::CallOptions quick;
  quick.timeout = 200ms;
  const std::string message = error_of<runtime::TimeoutError>([&] {
    group.call("sharded.sleep", Batch(), {{"seconds", 1.0}}, quick).get();
  });
  CHECK_THAT(message, Catch::Contains("'sharded.sleep' on pool 'mesh' timed out waiting for rank 0 (host") &&
                          Catch::Contains("global rank 5)"));
  // The workers finish the sleep, then serve the next call; the run is intact.
  CHECK(group.call("sharded.echo").get().replies.size() == 4);
  CHECK_FALSE(shared_cluster().failure());
}
