// Helpers shared by the worker-runtime tests.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "../../common/error_of.h"
#include "../../common/test_paths.h"
#include "rlcore/core/runtime/cluster.h"

namespace rlcore_test {

// A local cluster of `workers` diag workers (one thread each, no process
// groups) with short heartbeats, for the liveness tests.
inline rlcore::runtime::ClusterOptions diag_cluster(int64_t workers) {
  using namespace std::chrono_literals;
  rlcore::runtime::ClusterOptions options;
  options.worker_executable = rlcore_executable();
  options.worker_args = {"--log-level", "off"};
  options.heartbeat_interval = 200ms;
  options.heartbeat_timeout = 3s;
  options.connect_timeout = 60s;
  options.call_timeout = 60s;
  options.shutdown_grace = 2s;
  options.process_groups = false;
  rlcore::runtime::PoolSpec pool;
  pool.nodes = {workers};
  pool.roles = {rlcore::runtime::RoleSpec{"diag", "diag", nlohmann::json::object()}};
  pool.threads_per_worker = 1;
  options.pools = {pool};
  return options;
}

// Polls `done` every 10 ms until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace rlcore_test
