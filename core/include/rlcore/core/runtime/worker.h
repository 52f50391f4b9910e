// One worker process (`rlcore worker`): connect to the controller, build the
// roles and process groups its pool asks for, then run calls until shutdown.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "rlcore/core/runtime/launch_env.h"
#include "rlcore/core/runtime/role.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

// Exit statuses of `rlcore worker`.
inline constexpr int kWorkerExitOk = 0;
inline constexpr int kWorkerExitRefused = 2;         // wrong secret, bad rank
inline constexpr int kWorkerExitControllerLost = 3;  // no welcome, controller silent, or parent gone
inline constexpr int kWorkerExitSetupFailed = 4;     // a role or process group could not be built
inline constexpr int kWorkerExitShutdownStuck = 5;   // a method outran the shutdown grace

struct WorkerOptions {
  std::string controller;  // endpoint; required
  std::string secret;
  LaunchEnv launch;
  std::string host;  // empty: gethostname()
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(2)};
  // The local launcher's pid (RLCORE_PARENT_PID): the worker asks for SIGKILL
  // when its parent dies, and exits at once if it already has. 0: not local.
  int64_t parent_pid = 0;
};

// Fills WorkerOptions from the environment: the launch variables (see
// parse_launch_env), RLCORE_SECRET and RLCORE_PARENT_PID.
RLCORE_API WorkerOptions worker_options_from_env(const EnvLookup& env);

// Runs the worker; returns its exit status. When the controller goes silent or a
// method outruns the shutdown grace, the process exits from the I/O thread
// (status kWorkerExitControllerLost / kWorkerExitShutdownStuck) without returning.
RLCORE_API int run_worker(const WorkerOptions& options, const RoleRegistry& roles);

}  // namespace rlcore::runtime
