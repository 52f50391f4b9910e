// What the multi-process test runners (one rank per process) share: their
// `--key value` arguments and a main() that reports errors with the runner's name.
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <string>

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
