// The collective ledger (rlcore/collective_ledger.h) and what the controller
// makes of the workers' ledgers when a collective fails (collective_inquiry.h).
#include "runtime_testing.h"

#include <future>
#include <optional>
#include <thread>

#include "rlcore/collective_ledger.h"
#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"
#include "runtime/collective_inquiry.h"

using namespace std::chrono_literals;
using namespace rlcore;

namespace {

// This process's ledger entry for the world group of rank `rank` (both ranks run here, as threads).
std::optional<CollectiveRecord> world_record(int64_t rank) {
  for (const auto& record : collective_ledger()) {
    if (record.group == "world" && record.rank == rank) return record;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("each group's collectives are numbered as they start, and marked when they fail", "[runtime][c10d]") {
  runtime::RendezvousStore store("127.0.0.1", 0, 30s);
  std::promise<void> rank1_done;
  auto run_rank = [&](int64_t rank) -> std::string {
    runtime::ProcessGroupOptions options;
    options.store_host = "127.0.0.1";
    options.store_port = store.port();
    options.prefix = "test/ledger";
    options.rank = rank;
    options.world_size = 2;
    options.timeout = 3000ms;
    std::unique_ptr<CommContext> comm = runtime::make_comm_context(options);
    at::Tensor value = at::ones({1});
    comm->world().all_reduce(value);
    comm->world().barrier();
    if (rank == 1) {
      rank1_done.get_future().wait();  // rank 0's broadcast waits for it in vain, until its timeout
      return "";
    }
    try {
      comm->world().broadcast(value, 1);
    } catch (const IoError& e) {
      const auto failed = world_record(0);
      rank1_done.set_value();
      REQUIRE(failed);
      CHECK(failed->started == 3);
      CHECK(failed->op == "broadcast");
      CHECK(failed->failed);
      CHECK_FALSE(failed->running);
      return e.what();
    }
    rank1_done.set_value();
    return "the broadcast did not fail";
  };
  auto first = std::async(std::launch::async, run_rank, 0);
  auto second = std::async(std::launch::async, run_rank, 1);
  // While rank 0 waits in its broadcast, the ledger says so (as a worker's I/O thread reads it);
  // rank 1 is past its barrier, waiting for nothing.
  std::optional<CollectiveRecord> waiting, other;
  const auto settled = [&] { return waiting && waiting->running && waiting->started == 3 && other && !other->running; };
  for (int i = 0; i < 1000 && !settled(); ++i) {
    std::this_thread::sleep_for(2ms);
    waiting = world_record(0);
    other = world_record(1);
  }
  REQUIRE(settled());
  CHECK(waiting->op == "broadcast");
  CHECK(waiting->ranks == std::vector<int64_t>{0, 1});
  CHECK(other->started == 2);  // all_reduce, barrier: it never reached #3
  CHECK(other->op == "barrier");
  REQUIRE(first.wait_for(60s) == std::future_status::ready);
  REQUIRE(second.wait_for(60s) == std::future_status::ready);
  CHECK_THAT(first.get(), Catch::Contains("broadcast over group 'world' failed on its rank 0 (pool rank 0)"));
  second.get();
  CHECK_FALSE(world_record(0));  // the groups are gone, and so are their entries
}

TEST_CASE("a failed collective is reported by who reached it and who did not, and why", "[runtime]") {
  using runtime::detail::CollectiveInquiry;
  const std::map<int64_t, runtime::PeerInfo> peers = {
      {2, {2, 5, 0, "node1", 100}}, {3, {3, 5, 1, "node1", 101}}, {4, {4, 5, 2, "node2", 102}}};
  const auto record = [](const std::string& key, int64_t rank, int64_t size, int64_t started, bool running,
                         const std::string& op = "all_reduce", bool failed = false) {
    return nlohmann::json{{"key", key},         {"group", key.substr(key.find('/') + 1, 5)},
                          {"rank", rank},       {"size", size},
                          {"started", started}, {"op", op},
                          {"running", running}, {"failed", failed}};
  };
  SECTION("a pool group: the reporter's pool ranks, the stuck rank, a silent one") {
    CollectiveInquiry inquiry;
    inquiry.failed = {{"key", "actor/world/0,1,2"}, {"group", "world"}, {"number", 7}, {"op", "all_reduce"}};
    inquiry.reported_by = 2;
    inquiry.reporter_first_rank = 2;
    inquiry.asked = {2, 3, 4};
    inquiry.answers[2] = {{"groups", {record("actor/world/0,1,2", 0, 3, 7, false)}}};
    inquiry.answers[3] = {{"method", "actor.update_actor"},
                          {"method_s", 4.25},
                          {"groups", {record("actor/world/0,1,2", 1, 3, 6, false)}}};
    const auto finding = runtime::detail::describe(inquiry, peers);
    CHECK(finding.text ==
          "collective #7 (all_reduce) over group 'world' of pool 'actor' was reached by worker rank 2 (host node1, "
          "pid 100); not by worker rank 3 (host node1, pid 101): its last collective on the group was #6 (all_reduce, "
          "done), and it is in 'actor.update_actor' since 4.2 s; worker rank 4 (host node2, pid 102): it did not "
          "answer");
    CHECK(finding.stuck == std::vector<int64_t>{3});
    CHECK_FALSE(inquiry.complete());
  }
  SECTION("a shared group: members found by their answers; one idle, never in the group") {
    CollectiveInquiry inquiry;
    inquiry.failed = {{"key", "shared/bridge"}, {"group", "bridge"}, {"number", 2}, {"op", "broadcast"}};
    inquiry.reported_by = 2;
    inquiry.asked = {2, 3};
    inquiry.answers[2] = {{"groups", {record("shared/bridge", 0, 3, 2, true, "broadcast")}}};
    inquiry.answers[3] = {{"groups", {record("shared/bridge", 2, 3, 1, false)}}};
    const auto finding = runtime::detail::describe(inquiry, peers);
    CHECK_THAT(finding.text, Catch::StartsWith("collective #2 (broadcast) over group 'bridge' (shared by pools) was "
                                               "reached by worker rank 2 (host node1, pid 100); not by group rank 1: "
                                               "it did not answer; worker rank 3"));
    CHECK_THAT(finding.text, Catch::EndsWith("(all_reduce, done), and it runs no method"));
    CHECK(finding.stuck.empty());  // idle, not stuck
    CHECK(inquiry.complete());
  }
  SECTION("the collective named is the first one some member never started, not a later timeout") {
    // The sender (group rank 0) timed out in #1, sending to a member stuck before
    // it; a receiver that got #1 timed out in #2 and reported first.
    CollectiveInquiry inquiry;
    inquiry.failed = {{"key", "shared/bridge"}, {"group", "bridge"}, {"number", 2}, {"op", "broadcast"}};
    inquiry.asked = {2, 3, 4};
    inquiry.answers[2] = {{"groups", {record("shared/bridge", 0, 3, 1, false, "broadcast", true)}}};
    inquiry.answers[3] = {{"groups", {record("shared/bridge", 1, 3, 2, false, "broadcast", true)}}};
    inquiry.answers[4] = {{"method", "rollout.receive_weights"},
                          {"method_s", 4.0},
                          {"groups", {record("shared/bridge", 2, 3, 0, false, "")}}};
    const auto finding = runtime::detail::describe(inquiry, peers);
    CHECK(finding.text ==
          "collective #1 (broadcast) over group 'bridge' (shared by pools) was reached by worker rank 2 (host "
          "node1, pid 100), worker rank 3 (host node1, pid 101); not by worker rank 4 (host node2, pid 102): it "
          "never started a collective on the group, and it is in 'rollout.receive_weights' since 4.0 s");
    CHECK(finding.stuck == std::vector<int64_t>{4});
  }
  SECTION("an answer without the fields it needs is an error, which the controller reports instead") {
    CollectiveInquiry inquiry;
    inquiry.failed = {{"key", "shared/bridge"}, {"group", "bridge"}, {"number", 2}, {"op", "broadcast"}};
    inquiry.answers[2] = {{"groups", {{{"key", "shared/bridge"}, {"rank", 0}}}}};
    CHECK_THROWS(runtime::detail::describe(inquiry, peers));
  }
}
