// The rank pool the multi-process engine tests share (fsdp_testing.h): a
// runner serves one scenario after another, a failed scenario answers its exit
// code without taking the runner down, every scenario starts from the same
// random state, and the pool stops cleanly.
#include "fsdp_testing.h"

#include <chrono>
#include <filesystem>

using namespace fsdp_test;

TEST_CASE("a pooled rank runner answers each scenario's exit code and serves the next", "[fsdp][pool]") {
  TempDir model;
  TempDir work;
  write_tiny_checkpoint(model.path());
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  const auto scenario = [&](const std::string& name, const std::string& run) {
    fs::create_directories(work.path() / run);
    return [&, name, run](int64_t) {
      return std::vector<std::string>{"--rank",     "0",
                                      "--world",    "1",
                                      "--port",     std::to_string(store.port()),
                                      "--prefix",   run,
                                      "--out",      (work.path() / run).string(),
                                      "--model",    model.str(),
                                      "--scenario", name,
                                      "--steps",    "1"};
    };
  };
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(60); };
  RankPool pool(runner_path(), 1);
  CHECK(pool.run(scenario("no_such_scenario", "unknown"), deadline()) == std::vector<int>{1});
  CHECK(pool.run(scenario("train", "first"), deadline()) == std::vector<int>{0});
  CHECK(pool.run(scenario("train", "second"), deadline()) == std::vector<int>{0});
  // A scenario does not see the one before it: the second run trains to the first run's parameters.
  CHECK(max_abs_diff(load_tensors(work.path() / "first" / "params.safetensors"),
                     load_tensors(work.path() / "second" / "params.safetensors")) == 0.0);
  // Unseeded draws (a fresh process's generator is seeded at random): every scenario of a pool starts
  // from the same random state, whatever the pool ran before it.
  RankPool other(runner_path(), 1);
  CHECK(other.run(scenario("draw", "first_draw"), deadline()) == std::vector<int>{0});
  CHECK(pool.run(scenario("draw", "draw_after_training"), deadline()) == std::vector<int>{0});
  CHECK(max_abs_diff(load_tensors(work.path() / "first_draw" / "draw.safetensors"),
                     load_tensors(work.path() / "draw_after_training" / "draw.safetensors")) == 0.0);
  CHECK(other.stop(std::chrono::seconds(30)).empty());
  CHECK(pool.stop(std::chrono::seconds(30)).empty());
}
