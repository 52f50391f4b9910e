// What SIGTERM and SIGINT do to a run's controller and workers
// (rlcore/core/runtime/preemption.h), each case in a forked child whose exit
// status tells what its handlers did.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include "rlcore/core/runtime/preemption.h"
#include "rlcore/error.h"

using namespace rlcore::runtime;
using namespace std::chrono_literals;

namespace {

// Runs `body` in a child and returns its exit status (128 + n when killed by signal n).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body());
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("the controller's first signal asks the run to stop and nothing more", "[runtime][preemption]") {
  CHECK(in_child([] {
          const PreemptionWatch watch(OnPreempt::kCheckpoint, 10s);
          if (PreemptionWatch::requested() != 0) return 1;
          ::raise(SIGTERM);
          std::this_thread::sleep_for(100ms);  // the watchdog sees it and waits for the run
          return PreemptionWatch::requested() == SIGTERM && PreemptionWatch::requested_name() == "SIGTERM" ? 0 : 2;
        }) == 0);
  CHECK(in_child([] {
          const PreemptionWatch watch(OnPreempt::kCheckpoint, 10s);
          ::raise(SIGINT);
          return PreemptionWatch::requested_name() == "SIGINT" ? 0 : 2;
        }) == 0);
}

TEST_CASE("a second signal exits at once", "[runtime][preemption]") {
  CHECK(in_child([] {
          const PreemptionWatch watch(OnPreempt::kCheckpoint, 10s);
          ::raise(SIGTERM);
          ::raise(SIGTERM);
          return 0;
        }) == 128 + SIGTERM);
}

TEST_CASE("past the grace, or with on_preempt exit, the run exits with 75", "[runtime][preemption]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK(in_child([] {
          const PreemptionWatch watch(OnPreempt::kCheckpoint, 300ms);
          ::raise(SIGTERM);
          std::this_thread::sleep_for(20s);  // a step that outruns the grace
          return 0;
        }) == kExitPreempted);
  CHECK(std::chrono::steady_clock::now() - start < 15s);
  CHECK(in_child([] {
          const PreemptionWatch watch(OnPreempt::kExit, 60s);
          ::raise(SIGTERM);
          std::this_thread::sleep_for(20s);
          return 0;
        }) == kExitPreempted);
  CHECK(kExitPreempted == 75);  // EX_TEMPFAIL, what the docs tell schedulers to requeue on
}

TEST_CASE("a run that ends in time leaves the handlers as they were", "[runtime][preemption]") {
  CHECK(in_child([] {
          ::signal(SIGTERM, SIG_IGN);  // whatever was there before (Catch's own handler in this binary)
          { const PreemptionWatch watch(OnPreempt::kCheckpoint, 10s); }
          struct sigaction now {};
          ::sigaction(SIGTERM, nullptr, &now);
          return now.sa_handler == SIG_IGN ? 0 : 1;
        }) == 0);
}

TEST_CASE("a worker waits out the first signal and ends on the second", "[runtime][preemption]") {
  CHECK(in_child([] {
          ignore_first_termination_signal("worker rank 1");
          ::raise(SIGTERM);
          return 7;  // still running after the first
        }) == 7);
  CHECK(in_child([] {
          ignore_first_termination_signal("worker rank 1");
          ::raise(SIGINT);
          ::raise(SIGTERM);
          return 7;
        }) == 128 + SIGTERM);
  CHECK_THROWS_AS(on_preempt_from_name("pause"), rlcore::ConfigError);
  CHECK(on_preempt_from_name("exit") == OnPreempt::kExit);
}
