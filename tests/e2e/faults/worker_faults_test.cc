// A worker dies or hangs in each phase of a GRPO step, with two workers (the
// matrix: worker_fault_matrix.h).
#include "../e2e_testing.h"
#include "worker_fault_matrix.h"

TEST_CASE("a worker that dies or hangs in any phase is named first, with two workers", "[faults]") {
  faults::check_every_phase(2);
}
