// The hapmoe command line. run_cli is the whole program minus process
// set-up, so tests can call it in-process.
//
// Exit codes: 0 success; 2 bad input or usage; 3 the plan does not fit in
// memory (outputs are still written); 4 a sweep or a `plan --out` stopped
// by SIGTERM/SIGUSR1 with a valid archive (run it again with --resume); 5 --time-limit or
// --max-memory stopped the search (the plans printed and written are the
// best found, not proven optimal); 1 internal error.
#pragma once

#include <cstddef>
#include <ostream>

#include "engine/comm.h"

namespace hapmoe {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitNoFit = 3;
inline constexpr int kExitStopped = 4;
inline constexpr int kExitLimit = 5;
inline constexpr int kExitNoAnswer = 6;

// An error is printed as one line of at most this many characters: the
// values it echoes are cut with their length said (docs/testing.md).
inline constexpr std::size_t kMaxErrorLine = 300;

// Under MPI every rank runs it with the same arguments; only rank 0's
// streams should print (main passes null streams elsewhere) and only rank 0
// writes files. Errors that only some ranks hit are agreed on before any
// search, so every rank returns the same exit code.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm);
// The same, with `alarm`: where any rank, not only rank 0, may say one
// thing: that the watchdog ends the job because a rank stopped answering
// (a rank other than 0 says it when rank 0 is the one; docs/parallel.md).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm,
            std::ostream& alarm);

// One process (SerialComm).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace hapmoe
