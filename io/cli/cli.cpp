#include "io/cli/cli.h"

#include <cxxopts.hpp>
#include <exception>
#include <new>
#include <string>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/version.h"
#include "io/cli/commands.h"
#include "io/cli/options.h"
#include "io/report/report.h"

namespace hapmoe {

namespace {

constexpr const char* kUsage =
    "usage: hapmoe <command> [options]\n"
    "\n"
    "commands:\n"
    "  plan       search the fastest plan that fits in memory (HS-DP, docs/search.md)\n"
    "  evaluate   predict the iteration latency, memory and throughput of a given plan\n"
    "  compare    run hapmoe and every baseline, one table normalised to MI (docs/baselines.md)\n"
    "  catalog    list the built-in devices, model presets and cluster presets\n"
    "  sweep      run many searches (a list and/or a product of cases) into one archive\n"
    "  show       print the summary of an HDF5 archive (--out) without re-running anything\n"
    "  profile    measured tables: import nccl-tests logs and layer timings, time MPI\n"
    "             collectives (comm), fit the calibration (fit), check predictions (check)\n"
    "\n"
    "`hapmoe <command> --help` shows the options of a command; `hapmoe --version` the version.\n"
    "Exit codes: 0 ok, 2 bad input, 3 the plan does not fit in memory, 4 sweep stopped by a\n"
    "signal (resume it with --resume), 5 a --time-limit or --max-memory stopped the search (the\n"
    "plans are the best found, not proven optimal), 1 internal error.\n";

int cmd_catalog(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe catalog", "Lists the built-in devices, model presets and clusters.");
  if (!parse(o, argc, argv, out)) return kExitOk;
  print_catalog(out);
  return kExitOk;
}

int cmd_show(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe show",
                     "Prints the summary of an archive written with --out (best plan, top K, "
                     "search statistics; for a sweep, one line per case) without re-running "
                     "anything. docs/archive.md describes the file.");
  o.add_options()("case", "a sweep archive: print this case (its name or group) in full",
                  cxxopts::value<std::string>())("file", "the archive",
                                                 cxxopts::value<std::string>());
  o.parse_positional({"file"});
  o.positional_help("FILE.h5");
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  print_archive_summary(out, required(r, "file"),
                        r.count("case") ? r["case"].as<std::string>() : "");
  return kExitOk;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  SerialComm serial;
  return run_cli(argc, argv, out, err, serial);
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm) {
  if (argc < 2) {
    err << kUsage;
    return kExitInput;
  }
  const std::string command = argv[1];
  try {
    // Each command parses argv from its own name on.
    if (command == "plan") return cmd_plan(argc - 1, argv + 1, out, err, comm);
    if (command == "evaluate") return cmd_evaluate(argc - 1, argv + 1, out, err, comm);
    if (command == "catalog") return cmd_catalog(argc - 1, argv + 1, out);
    if (command == "compare") return cmd_compare(argc - 1, argv + 1, out, err, comm);
    if (command == "show") return cmd_show(argc - 1, argv + 1, out);
    if (command == "sweep") return cmd_sweep(argc - 1, argv + 1, out, err, comm);
    if (command == "profile") return run_profile_command(argc - 1, argv + 1, out, err, comm);
    if (command == "--help" || command == "-h" || command == "help") {
      out << kUsage;
      return kExitOk;
    }
    if (command == "--version") {
      out << "hapmoe " << kVersion << " (" << kGitRevision << ")\n";
      return kExitOk;
    }
    err << "hapmoe: unknown command '" << command << "'\n" << kUsage;
    return kExitInput;
  } catch (const InputError& e) {
    err << "hapmoe " << command << ": error: " << e.what() << "\n";
    return kExitInput;
  } catch (const cxxopts::exceptions::exception& e) {
    err << "hapmoe " << command << ": error: " << e.what() << " (see `hapmoe " << command
        << " --help`)\n";
    return kExitInput;
  } catch (const std::bad_alloc&) {
    err << "hapmoe " << command << ": error: out of memory\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << "hapmoe " << command << ": internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace hapmoe
