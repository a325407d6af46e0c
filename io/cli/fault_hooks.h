// Fault injection for the tests, in one place (docs/testing.md, "Fault
// hooks"). Each hook is read from the environment; unset, it does nothing.
//   HAPMOE_TEST_FAIL=input@R    rank R fails reading its inputs (plan)
//   HAPMOE_TEST_FAIL=search@R   rank R fails in its first search round (plan)
//   HAPMOE_TEST_FAIL=write@R    rank R's writes of output files after the
//                               search fail as on a full disk (plan,
//                               evaluate, compare; only rank 0 writes)
//   HAPMOE_TEST_FAIL=stop@R     rank R stops itself (SIGSTOP) just before
//                               its search, as a stuck node would (plan,
//                               sweep)
//   HAPMOE_TEST_CRASH=commit@K  a sweep is killed (SIGKILL) inside its K-th
//                               archive commit (1 = first), after the
//                               temporary file is complete, before the rename
//   HAPMOE_TEST_CRASH=signals@K a sweep raises SIGTERM twice at that point
//                               of its K-th commit (a second signal during
//                               a commit)
//   HAPMOE_TEST_SIGNAL=K[@R]    plan --out: rank R (default 0) sends
//                               itself SIGTERM when it is about to start
//                               its K-th unit of work (1 = first), a
//                               deterministic point for the checkpoint
//                               tests (tests/io/archive/plan_resume.sh)
// The engine's own hooks (RunOptions::fail_round, HAPMOE_RANKS_PER_NODE)
// are described in docs/testing.md too; the commands reach them only
// through these.
#pragma once

#include <cstdint>

#include "engine/comm.h"
#include "engine/driver.h"

namespace hapmoe {

// HAPMOE_TEST_FAIL on this rank: throws InputError for input@R, sets
// run.fail_round for search@R. InputError on a malformed value.
void inject_plan_faults(const Comm& comm, RunOptions& run);

// HAPMOE_TEST_FAIL=write@R on this rank: its output writes are to fail
// (write_on_root). InputError on a malformed value.
bool injected_write_failure(const Comm& comm);

// HAPMOE_TEST_SIGNAL on this rank: K, the unit before which it sends
// itself SIGTERM; 0 when unset or for another rank. InputError on a
// malformed value.
std::int64_t injected_signal_unit(const Comm& comm);

// HAPMOE_TEST_FAIL=stop@R on this rank: stops the process (SIGSTOP) until
// something continues or kills it.
void stop_if_injected(const Comm& comm);

// HAPMOE_TEST_CRASH: arms the archive's before-rename hook. InputError on
// a malformed value.
void install_sweep_crash_hook();

}  // namespace hapmoe
