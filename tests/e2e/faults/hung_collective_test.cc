// A collective that one rank never reaches (docs/launch.md#hung-collectives):
// its peers time out after runtime.collective_timeout_s, and the run ends soon
// after, naming the group, the operation, the ranks that reached it and the
// rank that did not (with what it is doing). No process outlives the run.
#include <sys/prctl.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "../e2e_testing.h"
#include "faults_testing.h"

using namespace std::chrono_literals;

TEST_CASE("a collective hung on one rank ends the run within the timeout, naming who did not arrive",
          "[faults][collective]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  constexpr double kTimeoutS = 4.0;
  const std::string ws = e2e::make_workspace("hung_collective", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  {
    // Rank 1 stalls as the update starts (its I/O thread still answers);
    // rank 0 goes on into the update's first collective and waits there.
    faults::RlcoreProcess run(
        {"--config", config, "trainer.total_training_steps=1",
         "runtime.collective_timeout_s=" + std::to_string(kTimeoutS), "trainer.default_local_dir=" + ws + "/run"},
        {"RLCORE_FAULT=actor.update_actor:stall@1"});
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == 1);
    const auto stalled_at = run.seen_at("rlcore fault injection: stall at actor.update_actor on rank 1");
    REQUIRE(stalled_at);
    CHECK(std::chrono::duration<double>(*run.exited_at() - *stalled_at).count() < kTimeoutS + 5.0);

    const std::string error = run.error_line();
    REQUIRE_FALSE(error.empty());
    std::smatch found;
    REQUIRE(std::regex_search(
        error, found,
        std::regex(R"(collective #(\d+) \((\w+)\) over group '(\w+)' of pool 'global' was reached by worker rank 0 )"
                   R"(\(host [^,]+, pid \d+\); not by worker rank 1 \(host [^,]+, pid \d+\): (.*))")));
    CHECK(std::stoll(found[1]) >= 1);
    const std::string not_reached = found[4];
    CHECK_THAT(not_reached, Catch::Contains("and it is in 'actor.update_actor' since"));
    // The timed-out rank's own error comes first: the call, the rank, the collective.
    CHECK_THAT(error, Catch::Contains("method 'actor.update_actor' failed on pool 'global' rank 0"));
    CHECK_THAT(error, Catch::Contains(found[2].str() + " over group '" + found[3].str() + "' failed on its rank 0"));
  }
  CHECK(faults::children_left_after(10s).empty());
  std::filesystem::remove_all(ws);
}
