// What the multi-process test runners (one rank per process) share: their
// `--key value` arguments, the loopback rendezvous, and a main() that reports
// errors with the runner's name.
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"

namespace rlcore::testing {

using RunnerArgs = std::map<std::string, std::string>;

inline RunnerArgs parse_runner_args(int argc, char** argv) {
  RunnerArgs args;
  for (int i = 1; i + 1 < argc; i += 2) args[std::string(argv[i]).substr(2)] = argv[i + 1];
  return args;
}

// The value of --key; `fallback` when absent, or a ConfigError naming the runner when there is none.
inline std::string runner_arg(const std::string& runner, const RunnerArgs& args, const std::string& key,
                              const std::string& fallback = "") {
  auto it = args.find(key);
  if (it != args.end()) return it->second;
  if (fallback.empty()) throw ConfigError(runner + ": --" + key + " is required");
  return fallback;
}

// Joins the test's TCPStore on loopback (--rank, --world, --port, --prefix) as
// a pool with `mesh`; groups of one test (`test`) never meet another test's.
inline std::unique_ptr<CommContext> loopback_comm(const std::string& runner, const RunnerArgs& args,
                                                  const std::string& test, runtime::MeshShape mesh = {}) {
  runtime::ProcessGroupOptions pg;
  pg.store_host = "127.0.0.1";
  pg.store_port = std::stoi(runner_arg(runner, args, "port"));
  pg.prefix = test + "/" + runner_arg(runner, args, "prefix", "run");
  pg.rank = std::stoll(runner_arg(runner, args, "rank"));
  pg.world_size = std::stoll(runner_arg(runner, args, "world"));
  pg.local_address = "127.0.0.1";
  pg.timeout = std::chrono::seconds(60);
  pg.mesh = std::move(mesh);
  return runtime::make_comm_context(pg);
}

// Runs `run` on the parsed arguments; an exception becomes "<runner>: <what>" on stderr and exit code 1.
inline int run_rank_main(const std::string& runner, int argc, char** argv,
                         const std::function<int(const RunnerArgs&)>& run) {
  try {
    return run(parse_runner_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << runner << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace rlcore::testing
