// SIGTERM and SIGUSR1 during a command that commits as it goes (`sweep`,
// `plan --out`; docs/archive.md): what Slurm sends at the time limit or
// with --signal. The first signal sets a flag that the command polls: it
// finishes the work in flight, commits, and exits with kExitStopped. A
// second signal exits at once (kExitStopped), unless a commit is being
// written: then right after it, so the archive on disk is always whole.
// A signal handler may only call async-signal-safe functions, so the line
// a second signal prints is kept ready (set_stop_line) and write(2)n.
#pragma once

#include <csignal>
#include <string>

namespace hapmoe {

// The first SIGTERM/SIGUSR1's number while StopSignals is installed, else 0.
extern volatile std::sig_atomic_t g_stop_signal;

// Installs the handlers for its lifetime (and clears the flags and the
// line), restores the previous ones at the end.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_term_ {};
  struct sigaction old_usr1_ {};
};

// The line a second signal prints on stderr before exiting (rank 0; none
// elsewhere). Written into a buffer not published, then published, so a
// handler on any thread reads a whole line.
void set_stop_line(const std::string& line);

// Prints the stop line and exits with kExitStopped; a rank with no line
// (not rank 0) waits 2 s first, so rank 0 prints before the launcher
// kills it. Async-signal-safe.
[[noreturn]] void exit_stopped_now();

// Brackets a commit: a second signal during it exits only when it ends.
// Every rank brackets the commit it takes part in (rank 0 writes, the
// others wait for its outcome), so none leaves while rank 0 writes (a
// launcher would then kill rank 0 in the middle of the write).
class CommitScope {
 public:
  CommitScope();
  ~CommitScope();  // leaves the commit, without exiting
  CommitScope(const CommitScope&) = delete;
  CommitScope& operator=(const CommitScope&) = delete;
  // Leaves the commit, and exits (exit_stopped_now) if a second signal
  // came during it.
  void done();

 private:
  bool open_ = true;
};

}  // namespace hapmoe
