// c10d rendezvous through the controller's store and the CommContext plugins
// see: named groups, ranks, and the blocking collectives (two ranks as threads).
#include "runtime_testing.h"

#include <future>

#include <nlohmann/json.hpp>

#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"

using namespace std::chrono_literals;
using namespace rlcore;
using rlcore_test::error_of;

TEST_CASE("ranks rendezvous through the store and run collectives on named groups", "[runtime][c10d]") {
  runtime::RendezvousStore store("127.0.0.1", 0, 30s);
  auto run_rank = [&](int64_t rank) {
    runtime::ProcessGroupOptions options;
    options.store_host = "127.0.0.1";
    options.store_port = store.port();
    options.prefix = "test/pool";
    options.rank = rank;
    options.world_size = 2;
    options.mesh = {{"dp", 1}, {"tp", 2}};
    options.timeout = 30s;
    std::unique_ptr<CommContext> comm = runtime::make_comm_context(options);

    nlohmann::json seen;
    seen["groups"] = comm->group_names();
    seen["tp_rank"] = comm->group("tp").rank();
    seen["dp_size"] = comm->group("dp").size();
    at::Tensor value = at::full({2}, static_cast<double>(rank + 1), at::kDouble);
    comm->world().all_reduce(value);
    seen["sum"] = value[1].item<double>();
    at::Tensor root = rank == 1 ? at::full({1}, 42.0) : at::zeros({1});
    comm->group("tp").broadcast(root, 1);
    seen["broadcast"] = root.item<double>();
    const auto gathered = comm->world().all_gather(at::full({1}, static_cast<double>(rank * 10)));
    seen["gathered"] = {gathered[0].item<double>(), gathered[1].item<double>()};
    // Into one flat tensor (here a view into a larger one, as a swap's bucket is).
    at::Tensor flat = at::full({7}, -1.0, at::kDouble);
    at::Tensor into = flat.narrow(0, 1, 4);
    comm->world().all_gather_into(at::full({2}, static_cast<double>(rank + 1), at::kDouble), into);
    seen["gathered_into"] = std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + 7);
    comm->group("dp").all_reduce(value);  // a group of one: a no-op
    seen["dp_sum"] = value[0].item<double>();
    // Gloo's reduce-scatter: each rank keeps its half of the sum.
    at::Tensor half = at::empty({2}, at::kDouble);
    comm->world().reduce_scatter(at::arange(4, at::kDouble) * static_cast<double>(rank + 1), half);
    seen["scattered"] = {half[0].item<double>(), half[1].item<double>()};
    // Uneven all-to-all: rank r sends r + 1 rows to rank 0 and 2 - r to rank 1
    // (values 100 r + row), bf16 too (Gloo carries its bits as float16).
    const at::Tensor rows = (at::arange(3, at::kFloat) + 100.0 * static_cast<double>(rank)).unsqueeze(1).repeat({1, 2});
    const std::vector<int64_t> send = {rank + 1, 2 - rank};
    const std::vector<int64_t> recv = rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 1};
    const at::Tensor exchanged = comm->world().all_to_all(rows, send, recv);
    const at::Tensor column = exchanged.select(1, 1).contiguous();
    seen["all_to_all"] = std::vector<float>(column.data_ptr<float>(), column.data_ptr<float>() + column.numel());
    const at::Tensor bf16 = comm->world().all_to_all(rows.to(at::kBFloat16), send, recv);
    seen["all_to_all_bf16"] = at::equal(bf16.to(at::kFloat), exchanged);
    const at::Tensor nothing = comm->world().all_to_all(at::empty({0, 2}), {0, 0}, {0, 0});
    seen["all_to_all_empty"] = nothing.size(0);
    const CommGroup alias = comm->group("tp").renamed("rollout_tp");
    at::Tensor through_alias = at::ones({1});
    alias.all_reduce(through_alias);
    seen["alias"] = {alias.name(), alias.rank(), through_alias.item<double>(), alias.device_backend()};
    comm->world().barrier();
    return seen;
  };
  auto first = std::async(std::launch::async, run_rank, 0);
  auto second = std::async(std::launch::async, run_rank, 1);
  REQUIRE(first.wait_for(60s) == std::future_status::ready);
  REQUIRE(second.wait_for(60s) == std::future_status::ready);
  const nlohmann::json a = first.get();
  const nlohmann::json b = second.get();
  CHECK(a["groups"] == nlohmann::json::array({"world", "dp", "tp"}));
  CHECK(b["tp_rank"] == 1);
  CHECK(a["dp_size"] == 1);
  CHECK(a["sum"] == 3.0);
  CHECK(b["sum"] == 3.0);
  CHECK(a["broadcast"] == 42.0);
  CHECK(a["gathered"] == nlohmann::json::array({0.0, 10.0}));
  CHECK(a["gathered_into"] == nlohmann::json::array({-1.0, 1.0, 1.0, 2.0, 2.0, -1.0, -1.0}));
  CHECK(b["gathered_into"] == a["gathered_into"]);
  CHECK(b["dp_sum"] == 3.0);
  CHECK(a["scattered"] == nlohmann::json::array({0.0, 3.0}));  // arange(4) x (1 + 2), first half
  CHECK(b["scattered"] == nlohmann::json::array({6.0, 9.0}));
  CHECK(a["all_to_all"] == nlohmann::json::array({0.0, 100.0, 101.0}));  // rank 0's row 0, rank 1's rows 0-1
  CHECK(b["all_to_all"] == nlohmann::json::array({1.0, 2.0, 102.0}));
  CHECK(a["all_to_all_bf16"] == true);
  CHECK(b["all_to_all_bf16"] == true);
  CHECK(a["all_to_all_empty"] == 0);
  CHECK(b["alias"] == nlohmann::json::array({"rollout_tp", 1, 2.0, ""}));  // host tensors only: no device backend
}

TEST_CASE("CommContext names the missing group and checks group ranks", "[runtime][c10d]") {
  const CommGroup solo("dp", {3}, 0);
  CHECK(solo.size() == 1);
  at::Tensor value = at::ones({2});
  solo.all_reduce(value);  // single member without a backend: nothing to do
  CHECK(value.sum().item<float>() == 2.0f);
  CHECK_THAT(error_of<ValueError>([&] { solo.backend(); }), Catch::Contains("group 'dp' has no c10d backend"));
  CHECK_THAT(error_of<ValueError>([&] { solo.broadcast(value, 1); }), Catch::Contains("root 1 is outside [0, 1)"));
  at::Tensor chunk = at::empty({3});
  CHECK_THAT(error_of<ValueError>([&] {
               solo.reduce_scatter(at::ones({2, 3}), chunk);
             }),
             Catch::Contains("1-D input of 1 equal chunks"));
  at::Tensor into = at::empty({2});
  solo.all_gather_into(at::full({2}, 5.0), into);  // a group of one: a copy
  CHECK(into.sum().item<float>() == 10.0f);
  at::Tensor too_small = at::empty({1});
  CHECK_THAT(error_of<ValueError>([&] { solo.all_gather_into(at::ones({2}), too_small); }),
             Catch::Contains("all_gather_into needs a contiguous 1-D output of 1 x 2 elements of Float on cpu (got 1"));
  at::Tensor wrong_dtype = at::empty({2}, at::kDouble);
  CHECK_THAT(error_of<ValueError>([&] { solo.all_gather_into(at::ones({2}), wrong_dtype); }),
             Catch::Contains("(got 2 of Double on cpu)"));
  CHECK_THAT(error_of<ValueError>([] {
               CommGroup("tp", std::vector<int64_t>{0, 1}, 0);
             }),
             Catch::Contains("no backend"));
  CHECK_THAT(error_of<ValueError>([] { CommGroup("tp", std::vector<int64_t>{0}, 1); }),
             Catch::Contains("rank 1 is outside"));
  CHECK_THAT(error_of<ValueError>([&] {
               solo.all_to_all(at::ones({3, 2}), {2}, {3});
             }),
             Catch::Contains("all_to_all needs one send and one receive row count per rank (1)") &&
                 Catch::Contains("got 1 summing to 2"));
  CHECK(at::equal(solo.all_to_all(at::ones({3, 2}), {3}, {3}), at::ones({3, 2})));
  const CommContext comm(0, 1, 0, {{"dp", 1}}, {CommGroup("world", std::vector<int64_t>{0}, 0), solo});
  CHECK(comm.has_group("dp"));
  runtime::ProcessGroupOptions bad;
  bad.device_backend = "mpi";
  CHECK_THAT(error_of<ConfigError>([&] { runtime::make_comm_context(bad); }),
             Catch::Contains("unknown device backend 'mpi'"));
  CHECK(comm.world().name() == "world");
  CHECK_THAT(error_of<ValueError>([&] { comm.group("pp"); }),
             Catch::Contains("no process group named 'pp'; groups: world, dp"));
}
