// A worker dies or hangs in each phase of a GRPO step, with four workers (the
// matrix: worker_fault_matrix.h). Two workers run every cell; four run each phase
// killed and each phase with one of segv, exit3 and hang in turn (18 runs, not 45):
// what more workers add is more survivors whose errors race the victim's report,
// and `kill` is the fault that raced.
#include "../e2e_testing.h"
#include "worker_fault_matrix.h"

TEST_CASE("a worker that dies or hangs in any phase is named first, with four workers", "[faults]") {
  faults::check_every_phase(4, faults::Cells::kKillAndOneMore);
}
