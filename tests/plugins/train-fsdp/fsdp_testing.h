// Helpers for the train-fsdp tests: a tiny checkpoint in a temp dir, and N
// fsdp_rank_runner processes (posix_spawn, never fork) rendezvousing through
// a TCPStore this process hosts, waited for with a deadline.
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "../../common/scratch_dir.h"
#include "../../common/error_of.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/checkpoint_init.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"
#include "rlcore/safetensors/safetensors.h"
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

// Runs `world` ranks of the runner with `args` (plus rank/world/port/out) and
// returns each rank's result JSON. Fails the test on a non-zero exit or after
// `deadline`, killing whatever it started.
inline std::vector<nlohmann::json> run_ranks(int64_t world, const fs::path& out, std::vector<std::string> args,
                                             std::chrono::seconds deadline = std::chrono::seconds(120),
                                             const std::string& runner = runner_path()) {
  static std::atomic<int> run_counter{0};
  fs::create_directories(out);
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  const std::string prefix = std::to_string(::getpid()) + "_" + std::to_string(run_counter++);
  std::vector<pid_t> pids;
  for (int64_t rank = 0; rank < world; ++rank) {
    std::vector<std::string> argv = {runner,
                                     "--rank",
                                     std::to_string(rank),
                                     "--world",
                                     std::to_string(world),
                                     "--port",
                                     std::to_string(store.port()),
                                     "--prefix",
                                     prefix,
                                     "--out",
                                     out.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    pids.push_back(spawn(argv));
  }
  std::vector<int> status(pids.size(), -1);
  const auto until = std::chrono::steady_clock::now() + deadline;
  size_t done = 0;
  while (done < pids.size() && std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int s = 0;
      if (::waitpid(pids[i], &s, WNOHANG) == pids[i]) {
        status[i] = s;
        ++done;
      }
    }
    if (done < pids.size()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done < pids.size()) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
    FAIL(runner << " did not finish within the deadline (world " << world << ")");
  }
  std::vector<nlohmann::json> results;
  for (size_t i = 0; i < pids.size(); ++i) {
    INFO("rank " << i << " of " << world);
    REQUIRE(WIFEXITED(status[i]));
    REQUIRE(WEXITSTATUS(status[i]) == 0);
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
