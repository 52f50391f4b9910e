// Fault injection: named places where a test makes this process die or hang,
// to check that every phase of a run reports a lost worker correctly.
//
//   RLCORE_FAULT=<point>:<action>[@<who>][#<hit>]
//
// The process that reaches <point> for the <hit>-th time (default 1) does
// <action>: `kill` (SIGKILL), `segv` (SIGSEGV), `exit3` (exits with code 3),
// `hang` (stops itself with SIGSTOP, so only its silence gives it away),
// `stall` (the thread that reached the point sleeps for good while the process
// stays responsive: a rank stuck before a collective its peers wait in),
// `pipe` (writes to a pipe whose reader is gone, as a collective does when its
// peer has died: SIGPIPE kills a process that does not ignore it, and one that
// does throws IoError), `term` (sends itself SIGTERM and goes on, as a
// preempted process is signalled) or `term_group` (SIGTERM to its whole process
// group, as `srun` signals every task; run the command under `setsid -w`). <who>
// is a worker rank (its RANK) or `controller`; without it, any process. The k-th
// replacement of a lost worker (RLCORE_INCARNATION=k, the local launcher's) is
// `<rank>.<k>`, so a fault aimed at a rank strikes the worker the run started
// with, not its replacements. Before
// acting the process writes one line to stderr naming the point, rank and pid.
// Unset, a fault point costs one branch.
#pragma once

#include <string_view>

#include "rlcore/export.h"

namespace rlcore {

// Throws ConfigError when RLCORE_FAULT is set but malformed.
RLCORE_API void fault_point(std::string_view point);

}  // namespace rlcore
