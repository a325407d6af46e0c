#include "io/cli/cli.h"

#include <algorithm>
#include <cxxopts.hpp>
#include <exception>
#include <new>
#include <string>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/version.h"
#include "io/cli/commands.h"
#include "io/cli/options.h"
#include "io/inputs/json_strict.h"
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
    "Exit codes: 0 ok, 2 bad input, 3 the plan does not fit in memory, 4 a sweep, or a plan\n"
    "with --out, stopped by SIGTERM/SIGUSR1 (what is done is committed to --out: run it again\n"
    "with --resume), 5 a --time-limit or --max-memory stopped the search (the\n"
    "plans are the best found, not proven optimal), 6 a rank stopped answering and the watchdog\n"
    "ended the job (--time-limit plus a grace), 1 internal error.\n";

// `s` with its middle replaced by "...(N characters)..." so that it has
// at most `max` characters (not less than the mark); the cuts are not
// inside a UTF-8 sequence. `head_share` of what is kept comes first.
std::string cut_middle(const std::string& s, std::size_t max, double head_share) {
  if (s.size() <= max) return s;
  const std::string mark = "...(" + std::to_string(s.size()) + " characters)...";
  const std::size_t keep = max > mark.size() ? max - mark.size() : 0;
  std::size_t head = static_cast<std::size_t>(static_cast<double>(keep) * head_share);
  std::size_t tail_start = s.size() - (keep - head);
  auto continuation = [&](std::size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  while (head > 0 && continuation(head)) --head;
  while (continuation(tail_start)) ++tail_start;
  return s.substr(0, head) + mark + s.substr(tail_start);
}

// The line an error is printed as: one line (control characters become
// spaces) of at most kMaxErrorLine characters. The readers already cut the
// values they echo (echo_value); this is the backstop for the rest, e.g. a
// very long file name. The longest word (a file name, a value: no spaces)
// gives way first, down to 80 characters, keeping its start and its end;
// then the middle of the line. (InputError::where() is no help here: an
// error agreed on by every rank, read_on_every_rank, comes without it.)
std::string error_line(std::string line) {
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (line.size() <= kMaxErrorLine) return line;
  std::size_t best = 0;  // the longest word: [best, best + best_size)
  std::size_t best_size = 0;
  for (std::size_t i = 0; i < line.size();) {
    const std::size_t end = std::min(line.find(' ', i), line.size());
    if (end - i > best_size) {
      best = i;
      best_size = end - i;
    }
    i = end + 1;
  }
  if (best_size > 80) {
    const std::size_t over = line.size() - kMaxErrorLine;
    const std::string word =
        cut_middle(line.substr(best, best_size), std::max<std::size_t>(80, best_size - over), 0.4);
    line = line.substr(0, best) + word + line.substr(best + best_size);
  }
  return cut_middle(line, kMaxErrorLine, 0.7);
}

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
  return run_cli(argc, argv, out, err, comm, err);
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm,
            std::ostream& alarm) {
  if (argc < 2) {
    err << kUsage;
    return kExitInput;
  }
  const std::string command = argv[1];
  const std::string shown = echo_value(command, 32);  // in messages
  try {
    // Each command parses argv from its own name on.
    if (command == "plan") return cmd_plan(argc - 1, argv + 1, out, err, alarm, comm);
    if (command == "evaluate") return cmd_evaluate(argc - 1, argv + 1, out, err, comm);
    if (command == "catalog") return cmd_catalog(argc - 1, argv + 1, out);
    if (command == "compare") return cmd_compare(argc - 1, argv + 1, out, err, comm);
    if (command == "show") return cmd_show(argc - 1, argv + 1, out);
    if (command == "sweep") return cmd_sweep(argc - 1, argv + 1, out, err, alarm, comm);
    if (command == "profile") return run_profile_command(argc - 1, argv + 1, out, err, comm);
    if (command == "--help" || command == "-h" || command == "help") {
      out << kUsage;
      return kExitOk;
    }
    if (command == "--version") {
      out << "hapmoe " << kVersion << " (" << kGitRevision << ")\n";
      return kExitOk;
    }
    err << "hapmoe: unknown command '" << shown << "'\n" << kUsage;
    return kExitInput;
  } catch (const InputError& e) {
    err << error_line("hapmoe " + shown + ": error: " + e.what()) << "\n";
    return kExitInput;
  } catch (const cxxopts::exceptions::exception& e) {
    err << error_line("hapmoe " + shown + ": error: " + e.what() + " (see `hapmoe " + shown +
                      " --help`)")
        << "\n";
    return kExitInput;
  } catch (const std::bad_alloc&) {
    err << "hapmoe " << shown << ": error: out of memory\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << error_line("hapmoe " + shown + ": internal error: " + e.what()) << "\n";
    return kExitInternal;
  }
}

}  // namespace hapmoe
