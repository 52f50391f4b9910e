// Helpers for the train-fsdp tests (and the megatron and hybrid-engine ones): a
// tiny checkpoint in a temp dir, and N rank runner processes (posix_spawn, never
// fork) rendezvousing through a TCPStore this process hosts, waited for with a
// deadline, started once and reused across scenarios (RankPool).
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "../../common/scratch_dir.h"
#include "../../common/error_of.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/checkpoint_init.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"
#include "rlcore/safetensors/safetensors.h"
#include "../../common/rank_runner.h"
#include "../../common/test_paths.h"

extern char** environ;

namespace fsdp_test {

namespace fs = std::filesystem;
using rlcore_test::error_of;

// A fresh directory under the system temp dir, removed with the object.
class TempDir : public rlcore_test::ScratchDir {
 public:
  TempDir() : ScratchDir("fsdp") {}
};

// 2 layers, hidden 32, tied embeddings: a few seconds for every scenario.
inline rlcore::model::ModelConfig tiny_config() {
  rlcore::model::ModelConfig c = rlcore::model::preset("llama", "tiny", 64);
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 64;
  c.initializer_range = 0.2;
  c.pad_token_id.reset();
  c.validate("tiny fsdp test config");
  return c;
}

// A random tiny HF checkpoint directory (config, weights, tokenizer files).
inline void write_tiny_checkpoint(const fs::path& dir, const rlcore::model::ModelConfig& config = tiny_config()) {
  rlcore::model::Transformer model(config, rlcore::model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(7);
  rlcore::write_hf_checkpoint(dir, config, model.named_parameters(), rlcore::builtin_tokenizer_files());
}

inline std::string runner_path() { return rlcore_test::built_executable("fsdp_rank_runner"); }

// Starts `argv` (argv[0] is the executable's path) with this environment.
inline pid_t spawn(std::vector<std::string> argv) {
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, raw[0], nullptr, nullptr, raw.data(), environ) == 0);
  return pid;
}

// How run_ranks gets its rank processes.
enum class RankProcesses {
  kPooled,  // `world` runners started once per (runner, world) and reused: `<runner> --serve`
  kFresh,   // new processes for every run, for scenarios that measure the process itself (resident memory)
};

// `world` runners serving scenarios (rlcore::testing::serve_rank_scenarios):
// each rank's stdin takes a scenario's arguments, its fd 3 answers the exit
// code. Each runner process costs about 0.8 CPU-seconds to start (libtorch's
// 286 libraries and operator registration) and a scenario of the tiny model
// less than that, so the pool starts them once per test binary.
class RankPool {
 public:
  RankPool(const std::string& runner, int64_t world) : runner_(runner) {
    ::signal(SIGPIPE, SIG_IGN);  // a runner that died fails its write with EPIPE, not this test binary
    for (int64_t rank = 0; rank < world; ++rank) {
      int requests[2], replies[2];
      REQUIRE(::pipe2(requests, O_CLOEXEC) == 0);
      REQUIRE(::pipe2(replies, O_CLOEXEC) == 0);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, requests[0], STDIN_FILENO);
      posix_spawn_file_actions_adddup2(&actions, replies[1], rlcore::testing::kRankRunnerStatusFd);
      std::string path = runner, serve = "--serve";
      char* argv[] = {path.data(), serve.data(), nullptr};
      pid_t pid = 0;
      const int error = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
      posix_spawn_file_actions_destroy(&actions);
      ::close(requests[0]);
      ::close(replies[1]);
      ranks_.push_back({pid, requests[1], replies[0], {}});
      REQUIRE(error == 0);
    }
  }
  RankPool(const RankPool&) = delete;
  RankPool& operator=(const RankPool&) = delete;

  // Ends the runners: stdin closed, then SIGKILL for any still running after `grace`.
  // Returns how each that had not failed before ended, for the binary's last word.
  std::vector<std::string> stop(std::chrono::milliseconds grace) {
    std::vector<std::string> failures;
    for (Rank& rank : ranks_) {
      if (rank.requests >= 0) ::close(rank.requests);
      if (rank.replies >= 0) ::close(rank.replies);
      rank.requests = rank.replies = -1;
    }
    const auto until = std::chrono::steady_clock::now() + grace;
    for (Rank& rank : ranks_) {
      int status = 0;
      pid_t done = 0;
      while ((done = ::waitpid(rank.pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (done == 0) {
        ::kill(rank.pid, SIGKILL);
        ::waitpid(rank.pid, &status, 0);
      }
      if (done != rank.pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures.push_back(runner_ + " (pid " + std::to_string(rank.pid) + ") ended with wait status " +
                           std::to_string(status) + " when its pool stopped");
      }
    }
    ranks_.clear();
    return failures;
  }
  ~RankPool() { stop(std::chrono::milliseconds(0)); }

  // Sends each rank its scenario (`argv_of(rank)`) and waits for every exit
  // code until `deadline`: -1 for a rank that died or did not answer in time.
  std::vector<int> run(const std::function<std::vector<std::string>(int64_t)>& argv_of,
                       std::chrono::steady_clock::time_point deadline) {
    std::vector<int> codes(ranks_.size(), -1);
    for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
      const std::string line = nlohmann::json(argv_of(static_cast<int64_t>(rank))).dump() + "\n";
      if (::write(ranks_[rank].requests, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return codes;
    }
    for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
      Rank& r = ranks_[rank];
      while (r.pending.find('\n') == std::string::npos) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd readable{r.replies, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) return codes;
        char buffer[64];
        const ssize_t got = ::read(r.replies, buffer, sizeof(buffer));
        if (got <= 0) return codes;  // the runner died
        r.pending.append(buffer, static_cast<std::size_t>(got));
      }
      const std::size_t end = r.pending.find('\n');
      codes[rank] = std::stoi(r.pending.substr(0, end));
      r.pending.erase(0, end + 1);
    }
    return codes;
  }

 private:
  struct Rank {
    pid_t pid;
    int requests;         // the runner's stdin
    int replies;          // its kRankRunnerStatusFd
    std::string pending;  // read, not yet a whole line
  };
  std::string runner_;
  std::vector<Rank> ranks_;
};

// The pools of this test binary, stopped when it exits; a runner that then
// ends badly (a sanitizer's leak report, a crash at exit) fails the binary.
class RankPools {
 public:
  static RankPools& instance() {
    static RankPools pools;
    return pools;
  }
  RankPool& get(const std::string& runner, int64_t world) {
    std::unique_ptr<RankPool>& pool = pools_[{runner, world}];
    if (!pool) pool = std::make_unique<RankPool>(runner, world);
    return *pool;
  }
  // After a failed scenario: its runners may be dead or stuck mid-collective.
  void discard(const std::string& runner, int64_t world) { pools_.erase({runner, world}); }
  ~RankPools() {
    std::vector<std::string> failures;
    for (auto& [key, pool] : pools_) {
      for (std::string& failure : pool->stop(std::chrono::seconds(30))) failures.push_back(std::move(failure));
    }
    if (failures.empty()) return;
    for (const std::string& failure : failures) std::cerr << "error: " << failure << "\n";
    std::_Exit(1);
  }

 private:
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<RankPool>> pools_;
};

// Runs `world` ranks of the runner with `args` (plus rank/world/port/out) and
// returns each rank's result JSON. Fails the test on a non-zero exit or after
// `deadline`, killing whatever it started.
inline std::vector<nlohmann::json> run_ranks(int64_t world, const fs::path& out, std::vector<std::string> args,
                                             std::chrono::seconds deadline = std::chrono::seconds(120),
                                             const std::string& runner = runner_path(),
                                             RankProcesses processes = RankProcesses::kPooled) {
  static std::atomic<int> run_counter{0};
  fs::create_directories(out);
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  const std::string prefix = std::to_string(::getpid()) + "_" + std::to_string(run_counter++);
  const auto argv_of = [&](int64_t rank) {
    std::vector<std::string> argv = {"--rank",   std::to_string(rank),
                                     "--world",  std::to_string(world),
                                     "--port",   std::to_string(store.port()),
                                     "--prefix", prefix,
                                     "--out",    out.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  const auto until = std::chrono::steady_clock::now() + deadline;
  std::vector<int> codes;
  if (processes == RankProcesses::kPooled) {
    codes = RankPools::instance().get(runner, world).run(argv_of, until);
    for (int code : codes) {
      if (code != 0) {
        RankPools::instance().discard(runner, world);
        break;
      }
    }
  } else {
    std::vector<pid_t> pids;
    for (int64_t rank = 0; rank < world; ++rank) {
      std::vector<std::string> argv = argv_of(rank);
      argv.insert(argv.begin(), runner);
      pids.push_back(spawn(argv));
    }
    codes.assign(pids.size(), -1);
    std::vector<bool> ended(pids.size(), false);
    size_t done = 0;
    while (done < pids.size() && std::chrono::steady_clock::now() < until) {
      for (size_t i = 0; i < pids.size(); ++i) {
        int s = 0;
        if (!ended[i] && ::waitpid(pids[i], &s, WNOHANG) == pids[i]) {
          ended[i] = true;
          codes[i] = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
          ++done;
        }
      }
      if (done < pids.size()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (ended[i]) continue;
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
  }
  std::vector<nlohmann::json> results;
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(runner << " rank " << i << " of " << world << " (-1: died or still running after " << deadline.count()
                << " s)");
    REQUIRE(codes[i] == 0);
    std::ifstream in(out / ("rank_" + std::to_string(i) + ".json"));
    results.push_back(nlohmann::json::parse(in));
  }
  return results;
}

// Runs `argv` to completion and returns its exit code, -1 if it did not exit.
inline int run_process(const std::vector<std::string>& argv) {
  const pid_t pid = spawn(argv);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline rlcore::NamedTensors load_tensors(const fs::path& file) { return rlcore::SafetensorsFile(file).load_all(); }

// Largest |a - b| over same-named tensors (both lists in the same order).
inline double max_abs_diff(const rlcore::NamedTensors& a, const rlcore::NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    REQUIRE(a[i].second.sizes() == b[i].second.sizes());
    worst = std::max(worst, (a[i].second.to(at::kDouble) - b[i].second.to(at::kDouble)).abs().max().item<double>());
  }
  return worst;
}

// Every rank's forward outputs after the run, concatenated in row order.
// Every data-parallel replica's outputs in row order (a sequence-parallel
// group's from its first rank: `stride` ranks per replica).
inline at::Tensor gathered_outputs(const fs::path& out, int64_t world, const std::string& name = "out",
                                   int64_t stride = 1) {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < world; r += stride)
    parts.push_back(rlcore::SafetensorsFile(out / ("outputs_" + std::to_string(r) + ".safetensors")).load(name));
  return at::cat(parts, 0);
}

}  // namespace fsdp_test
