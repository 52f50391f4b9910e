// What the multi-process test runners (one rank per process) share: their
// `--key value` arguments, the loopback rendezvous, and a main() that reports
// errors with the runner's name and can serve one scenario after another.
#pragma once

#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// Runs `run` on `args`; an exception becomes "<runner>: <what>" on stderr and exit code 1.
inline int run_rank_scenario(const std::string& runner, const RunnerArgs& args,
                             const std::function<int(const RunnerArgs&)>& run) {
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << runner << ": " << e.what() << "\n";
    return 1;
  }
}

// The file descriptor a serving runner writes each scenario's exit code to, one line each.
constexpr int kRankRunnerStatusFd = 3;

// `<runner> --serve`: one scenario per line of stdin (a JSON array of the
// arguments a fresh process would get), its exit code written to
// kRankRunnerStatusFd, until stdin ends. Every scenario starts from the same
// random state (libtorch's default seed; a fresh process's generator is seeded
// at random), so a result does not depend on what the process ran before; what
// else a scenario sets for the process (the thread count) every scenario sets
// the same way.
inline int serve_rank_scenarios(const std::string& runner, const std::function<int(const RunnerArgs&)>& run) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> words = nlohmann::json::parse(line).get<std::vector<std::string>>();
    RunnerArgs args;
    for (std::size_t i = 0; i + 1 < words.size(); i += 2) args[words[i].substr(2)] = words[i + 1];
    {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_current_seed(c10::default_rng_seed_val);
    }
    const int code = run_rank_scenario(runner, args, run);
    std::cout.flush();
    std::cerr.flush();
    const std::string reply = std::to_string(code) + "\n";
    if (::write(kRankRunnerStatusFd, reply.data(), reply.size()) != static_cast<ssize_t>(reply.size())) {
      std::cerr << runner << ": cannot report a scenario's exit code: " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  return 0;
}

// The runner's main(): `--serve` serves scenarios (serve_rank_scenarios), anything else is one scenario.
inline int run_rank_main(const std::string& runner, int argc, char** argv,
                         const std::function<int(const RunnerArgs&)>& run) {
  if (argc == 2 && std::string(argv[1]) == "--serve") return serve_rank_scenarios(runner, run);
  return run_rank_scenario(runner, parse_runner_args(argc, argv), run);
}

}  // namespace rlcore::testing
