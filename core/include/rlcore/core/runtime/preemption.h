// Preemption: what SIGTERM and SIGINT do to a run. Schedulers signal before
// they take the machines (Slurm's --signal, Kubernetes' termination grace,
// spot instances), and `srun` signals every task, workers included.
//
// The controller (PreemptionWatch): the first signal asks the run to stop at
// its next step boundary, checkpointed (trainer.on_preempt: checkpoint) or at
// once (exit); a watchdog exits with kExitPreempted if the checkpoint is not
// done within the grace. A second signal exits at once (128 + the signal).
// A worker (ignore_first_termination_signal): the first signal is noted and
// the worker goes on until the controller says stop or goes away; a second
// one exits at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "rlcore/export.h"

namespace rlcore::runtime {

// EX_TEMPFAIL: neither success (a Kubernetes Job would count the run as
// complete) nor rlcore's failure status; requeue on it (docs/launch.md#preemption).
inline constexpr int kExitPreempted = 75;

enum class OnPreempt { kCheckpoint, kExit };
RLCORE_API OnPreempt on_preempt_from_name(const std::string& name);  // "checkpoint" | "exit"

class RLCORE_API PreemptionWatch {
 public:
  // Installs the SIGTERM and SIGINT handlers of this process (one watch at a time).
  PreemptionWatch(OnPreempt on_preempt, std::chrono::milliseconds grace);
  ~PreemptionWatch();  // restores the handlers before it
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // The signal that asked the run to stop, or 0.
  static int requested();
  // "SIGTERM", "SIGINT", or "" when none came.
  static std::string requested_name();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// For a worker: the first SIGTERM or SIGINT writes a line naming `who` and is
// otherwise ignored; a second exits at once with 128 + the signal.
RLCORE_API void ignore_first_termination_signal(const std::string& who);

}  // namespace rlcore::runtime
