#include "io/cli/fault_hooks.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

namespace {

// The test hook of docs/parallel.md: HAPMOE_TEST_FAIL=input@R makes rank R
// fail reading its inputs, search@R its first search.
struct FaultHook {
  int input_rank = -1;
  int search_rank = -1;
  int write_rank = -1;
  int stop_rank = -1;
};

FaultHook fault_hook() {
  FaultHook h;
  const char* v = std::getenv("HAPMOE_TEST_FAIL");
  if (v == nullptr) return h;
  const std::string text = v;
  const auto at = text.find('@');
  const std::string what = text.substr(0, at);
  const int rank =
      at == std::string::npos
          ? 0
          : static_cast<int>(parse_int_text(text.substr(at + 1), 0, 1 << 20, "HAPMOE_TEST_FAIL"));
  if (what == "input") {
    h.input_rank = rank;
  } else if (what == "search") {
    h.search_rank = rank;
  } else if (what == "write") {
    h.write_rank = rank;
  } else if (what == "stop") {
    h.stop_rank = rank;
  } else {
    throw InputError("HAPMOE_TEST_FAIL",
                     "'" + text + "': expected input@RANK, search@RANK, write@RANK or stop@RANK");
  }
  return h;
}

// Test hook (tests/io/archive/sweep_kill.sh): HAPMOE_TEST_CRASH=commit@K kills the
// process with SIGKILL inside its K-th commit (1 = first), after the
// temporary file is complete and before the rename; signals@K
// (tests/io/archive/sweep_signals.sh) raises SIGTERM twice there instead.
int g_crash_at_commit = 0;
int g_commits = 0;
bool g_crash_by_signals = false;
void crash_hook(const std::string&) {
  if (++g_commits != g_crash_at_commit) return;
  if (!g_crash_by_signals) std::raise(SIGKILL);
  std::raise(SIGTERM);
  std::raise(SIGTERM);
}

}  // namespace

bool injected_write_failure(const Comm& comm) { return fault_hook().write_rank == comm.rank(); }

void stop_if_injected(const Comm& comm) {
  if (fault_hook().stop_rank == comm.rank()) std::raise(SIGSTOP);
}

std::int64_t injected_signal_unit(const Comm& comm) {
  const char* v = std::getenv("HAPMOE_TEST_SIGNAL");
  if (v == nullptr) return 0;
  const std::string t = v;
  const auto at = t.find('@');
  const std::int64_t unit =
      parse_int_text(t.substr(0, at), 1, std::int64_t{1} << 40, "HAPMOE_TEST_SIGNAL");
  const int rank =
      at == std::string::npos
          ? 0
          : static_cast<int>(parse_int_text(t.substr(at + 1), 0, 1 << 20, "HAPMOE_TEST_SIGNAL"));
  return rank == comm.rank() ? unit : 0;
}

void install_sweep_crash_hook() {
  g_commits = 0;
  g_crash_at_commit = 0;
  g_crash_by_signals = false;
  const char* v = std::getenv("HAPMOE_TEST_CRASH");
  if (v == nullptr) return;
  const std::string t = v;
  const auto at = t.find('@');
  const std::string what = t.substr(0, at);
  if (at == std::string::npos || (what != "commit" && what != "signals")) {
    throw InputError("HAPMOE_TEST_CRASH", "'" + t + "': expected commit@K or signals@K");
  }
  g_crash_by_signals = what == "signals";
  g_crash_at_commit =
      static_cast<int>(parse_int_text(t.substr(at + 1), 1, 1 << 20, "HAPMOE_TEST_CRASH"));
  g_archive_before_rename = crash_hook;
}

void inject_plan_faults(const Comm& comm, RunOptions& run) {
  const FaultHook hook = fault_hook();
  if (hook.input_rank == comm.rank()) {
    throw InputError("HAPMOE_TEST_FAIL", "injected input failure (test hook)");
  }
  if (hook.search_rank == comm.rank()) run.fail_round = 0;
}

}  // namespace hapmoe
