// A worker dies or hangs in each phase of a GRPO step, with two workers (the
// matrix: worker_fault_matrix.h); a worker whose write meets a dead reader.
#include "../e2e_testing.h"
#include "faults_testing.h"
#include "worker_fault_matrix.h"

#include <filesystem>

TEST_CASE("a worker that dies or hangs in any phase is named first, with two workers", "[faults]") {
  faults::check_every_phase(2, faults::Cells::kEvery);
}

// A collective writing to a peer that has just died meets a broken pipe. The
// worker must report that as its method's error, not die of SIGPIPE beside the
// peer: two deaths by signal would leave the controller unable to tell which
// came first (the matrix's `kill` rows raced so).
TEST_CASE("a worker's write to a dead reader fails its method instead of killing it", "[faults]") {
  const std::string ws = e2e::make_workspace("faults_pipe", 32);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  faults::RlcoreProcess run(
      {"--config", config, "runtime.n_workers_per_node=2", "trainer.total_training_steps=1", "trainer.test_freq=-1"},
      {"RLCORE_FAULT=actor.generate:pipe@1"});
  const bool finished = run.finish(std::chrono::seconds(120));
  INFO(run.output());
  REQUIRE(finished);
  CHECK(run.exit_status() == 1);
  REQUIRE_THAT(run.output(), Catch::Contains("fault injection: pipe at actor.generate on rank 1"));
  const std::string error = run.error_line();
  REQUIRE_FALSE(error.empty());
  CHECK_THAT(error, Catch::Contains("'actor.generate'") && Catch::Contains("rank 1") &&
                        Catch::Contains("write to a pipe whose reader is gone: Broken pipe"));
  CHECK_THAT(run.output(), !Catch::Contains("signal 13"));
  std::filesystem::remove_all(ws);
}
