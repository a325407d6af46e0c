// The hapmoe command line. run_cli is the whole program minus process
// set-up, so tests can call it in-process.
//
// Exit codes: 0 success; 2 bad input or usage; 3 the plan does not fit in
// memory (outputs are still written); 1 internal error.
#pragma once

#include <ostream>

namespace hapmoe {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitNoFit = 3;

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace hapmoe
