// A replaceable pool (PoolSpec::replaceable, async_training.on_rollout_failure:
// restart) over real processes: a lost worker fails only the calls that wait on
// it, an all_to_all call ends with the others' replies, the local launcher
// starts a replacement that the run re-admits, and a replacement that never
// comes ends the run after the rejoin timeout, naming the lost worker.
#include "runtime_testing.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "rlcore/core/runtime/cluster.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/local_launcher.h"
#include "rlcore/core/runtime/secret.h"

using namespace std::chrono_literals;
using namespace rlcore;
using rlcore_test::eventually;

namespace replaceable_pool {

// Two diag workers, replaceable, with the process groups a run has (the pool gets none of its own).
runtime::ClusterOptions replaceable_cluster(std::chrono::milliseconds rejoin_timeout) {
  runtime::ClusterOptions options = rlcore_test::diag_cluster(2);
  options.process_groups = true;
  options.rejoin_timeout = rejoin_timeout;
  options.pools.front().replaceable = true;
  return options;
}

bool worker_process_gone(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, WNOHANG);
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

int64_t pid_of(runtime::WorkerGroup& group, int64_t rank) {
  const runtime::CallOutput info = group.call("diag.info").get();
  return info.replies.at(static_cast<size_t>(rank)).value.at("pid").get<int64_t>();
}

// A TCP port nothing listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace replaceable_pool

using namespace replaceable_pool;

TEST_CASE("a replaceable pool goes on without a lost worker and re-admits its replacement", "[runtime][liveness]") {
  std::vector<int64_t> pids;
  {
    runtime::Cluster cluster(replaceable_cluster(60s));
    runtime::WorkerGroup& group = cluster.group("global");
    // The pool has no process groups of its own: a replacement could not join them.
    CHECK(group.call("diag.info").get().replies.at(0).value.at("groups").empty());
    const int64_t first = pid_of(group, 1);
    pids.push_back(pid_of(group, 0));
    pids.push_back(first);

    // all_to_all: rank 1 dies mid-call; the call ends with rank 0's reply and names rank 1 lost.
    auto each = group.call_each("diag.sleep_each", {Batch(), Batch()}, {{"seconds", 1.5}});
    std::this_thread::sleep_for(300ms);
    REQUIRE(::kill(static_cast<pid_t>(first), SIGKILL) == 0);
    REQUIRE(each.wait_for(15s) == std::future_status::ready);
    const runtime::CallOutput output = each.get();
    REQUIRE(output.replies.size() == 1);
    CHECK(output.replies.at(0).rank == 0);
    CHECK(output.lost_ranks == std::vector<int64_t>{1});
    CHECK_FALSE(cluster.failure());

    // The local launcher started a replacement, which the run re-admits.
    group.await_replacements();
    CHECK(group.lost_ranks().empty());
    CHECK(group.incarnation(1) == 1);
    CHECK(group.incarnation(0) == 0);
    const int64_t second = pid_of(group, 1);
    CHECK(second != first);
    pids.push_back(second);

    // one_to_all: the call that waited on the lost worker fails, naming it; the run goes on.
    auto one = group.call("diag.sleep", Batch(), {{"seconds", 1.5}});
    std::this_thread::sleep_for(300ms);
    REQUIRE(::kill(static_cast<pid_t>(second), SIGKILL) == 0);
    REQUIRE(one.wait_for(15s) == std::future_status::ready);
    try {
      one.get();
      FAIL("the call survived its worker");
    } catch (const runtime::WorkerLostError& e) {
      CHECK(e.worker().rank == 1);
      CHECK(e.worker().pid == second);
      CHECK_THAT(std::string(e.what()), Catch::Contains("killed by signal 9"));
    }
    CHECK_FALSE(cluster.failure());
    group.await_replacements();
    CHECK(group.incarnation(1) == 2);
    pids.push_back(pid_of(group, 1));

    // Chosen ranks only.
    runtime::CallOptions only_first;
    only_first.ranks = {0};
    const runtime::CallOutput chosen =
        group.call_each("diag.sleep_each", {Batch(), Batch()}, {{"seconds", 0.0}}, only_first).get();
    REQUIRE(chosen.replies.size() == 1);
    CHECK(chosen.replies.at(0).rank == 0);
    only_first.ranks = {5};
    CHECK_THAT(rlcore_test::error_of<ValueError>([&] {
                 group.call_each("diag.sleep_each", {Batch(), Batch()}, nlohmann::json::object(), only_first).get();
               }),
               Catch::Contains("none of the chosen ranks"));
    cluster.shutdown();
  }
  for (int64_t pid : pids) CHECK(worker_process_gone(static_cast<pid_t>(pid)));
}

TEST_CASE("a lost worker whose replacement is not set up in time ends the run, naming it", "[runtime][liveness]") {
  runtime::ClusterOptions options = replaceable_cluster(2s);
  // The first replacement of rank 1 (fault injection's `1.1`) dies while it sets up.
  options.worker_env["RLCORE_FAULT"] = "worker.setup:exit3@1.1";
  runtime::Cluster cluster(options);
  runtime::WorkerGroup& group = cluster.group("global");
  const int64_t first = pid_of(group, 1);
  REQUIRE(::kill(static_cast<pid_t>(first), SIGKILL) == 0);
  REQUIRE(eventually([&] { return cluster.failure().has_value(); }, 20s));
  CHECK_THAT(*cluster.failure(), Catch::Contains("worker rank 1") && Catch::Contains("pid " + std::to_string(first)) &&
                                     Catch::Contains("no replacement was set up within the rejoin timeout (2 s"));
  CHECK_THAT(rlcore_test::error_of<runtime::WorkerLostError>([&] { group.await_replacements(); }),
             Catch::Contains("no replacement was set up"));
}

TEST_CASE("under an external launcher the run waits for the lost worker's replacement to connect",
          "[runtime][liveness]") {
  runtime::ClusterOptions options = replaceable_cluster(60s);
  options.launcher = "external";
  options.port = free_port();
  options.secret = runtime::generate_secret();
  std::unique_ptr<runtime::Cluster> cluster;
  std::thread controller([&] { cluster = std::make_unique<runtime::Cluster>(options); });
  // The cluster manager's side: it starts the workers (and, below, the replacement) itself.
  runtime::LocalLaunchOptions manager;
  manager.executable = rlcore_test::rlcore_executable();
  manager.args = {"worker", "--log-level", "off"};
  manager.controller = "tcp://127.0.0.1:" + std::to_string(options.port);
  manager.secret = options.secret;
  manager.nworkers = 2;
  manager.threads_per_worker = 1;
  runtime::LocalLauncher workers(manager);
  controller.join();
  REQUIRE(cluster);
  runtime::WorkerGroup& group = cluster->group("global");
  const int64_t first = pid_of(group, 1);

  workers.kill(1);
  REQUIRE(eventually([&] { return group.lost_ranks() == std::vector<int64_t>{1}; }, 15s));
  std::this_thread::sleep_for(500ms);
  CHECK(group.lost_ranks() == std::vector<int64_t>{1});  // nobody starts one for it
  CHECK_FALSE(cluster->failure());
  workers.restart(1);  // with the run's secret, as at the start
  group.await_replacements();
  CHECK(group.incarnation(1) == 1);
  CHECK(pid_of(group, 1) != first);
  CHECK(pid_of(group, 1) == workers.pids().at(1));
  cluster->shutdown();
  CHECK(workers.wait_all(10s));
}
