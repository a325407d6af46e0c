// The commands run_cli dispatches to, one file each (cmd_<name>.cpp; the
// small catalog and show live in cli.cpp). argv starts at the command's
// name. Each returns an exit code of io/cli/cli.h or throws InputError.
#pragma once

#include <ostream>

#include "engine/comm.h"

namespace hapmoe {

// `alarm`: where any rank says that the watchdog ends the job (plan, sweep).
int cmd_plan(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
             std::ostream& alarm, Comm& comm);
int cmd_evaluate(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                 Comm& comm);
int cmd_compare(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                Comm& comm);
int cmd_sweep(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
              std::ostream& alarm, Comm& comm);
// `hapmoe profile import|comm|fit|check|show ...` (cmd_profile.cpp); argv[0]
// is "profile".
int run_profile_command(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                        Comm& comm);

}  // namespace hapmoe
