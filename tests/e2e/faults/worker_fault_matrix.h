// The fault matrix of worker_faults_*_test.cc: a worker dies or hangs in each
// phase of a GRPO step (RLCORE_FAULT, see rlcore/fault_point.h), and rlcore must
// name that worker first, exit with status 1 soon after, and leave no process
// of the run behind. One file per worker count, so ctest runs them side by side.
#pragma once

namespace faults {

// Which cells of the phase x action matrix a run covers.
enum class Cells {
  kEvery,           // every phase with every action (and `kill` twice)
  kKillAndOneMore,  // every phase killed once, and each phase one of the other actions in turn
};

// Runs the `cells` of the matrix with `workers` workers (Catch checks).
void check_every_phase(int workers, Cells cells);

}  // namespace faults
