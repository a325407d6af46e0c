// bench_fidelity [CASES] [--root DIR] [--tsv PUBLISHED_RUNS_TSV]
//                [--fit-kernel-overhead | --kernel-overhead-us US] [--breakdown]
// The calibration benchmark (bench/fidelity/README.md): scores every case
// of CASES (default bench/fidelity/cases.json, paths relative to --root,
// default the current directory), prints predicted against measured per
// row, the groups' order and one summary line. With --tsv, first checks
// that the cases and the published table list the same rows with the same
// measured seconds (exit 2 naming the row otherwise). With
// --fit-kernel-overhead, first prints the fit of the kernel overhead
// (docs/costmodel.md, "Kernel overhead") over 0..60 us, then the report
// at the fitted value. --kernel-overhead-us scores every row at that kernel
// overhead instead of the catalog's, to see how much of a row it carries.
// --breakdown first prints where each row's predicted time goes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/fidelity/fidelity.h"
#include "costmodel/errors.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"

namespace {

// id -> seconds_per_iteration of the published table.
std::map<std::string, double> published(const std::string& path) {
  std::istringstream in(hapmoe::read_regular_file(path));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::istringstream h(line);
    for (std::string f; std::getline(h, f, '\t');) header.push_back(f);
  }
  std::size_t id_col = header.size();
  std::size_t s_col = header.size();
  for (std::size_t k = 0; k < header.size(); ++k) {
    if (header[k] == "id") id_col = k;
    if (header[k] == "seconds_per_iteration") s_col = k;
  }
  if (id_col == header.size() || s_col == header.size()) {
    throw hapmoe::InputError(path, "no id or seconds_per_iteration column");
  }
  std::map<std::string, double> rows;
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::istringstream l(line);
    for (std::string x; std::getline(l, x, '\t');) f.push_back(x);
    if (f.size() <= std::max(id_col, s_col)) {
      throw hapmoe::InputError(path + ":" + std::to_string(n), "too few columns");
    }
    rows[f[id_col]] = hapmoe::parse_number_text(f[s_col], 0, 1e9, path + ":" + std::to_string(n));
  }
  return rows;
}

void check_against(const std::vector<hapmoe::fidelity::Case>& cases, const std::string& tsv) {
  std::map<std::string, double> rows = published(tsv);
  for (const auto& c : cases) {
    const auto it = rows.find(c.id);
    if (it == rows.end()) throw hapmoe::InputError(tsv, "has no row '" + c.id + "'");
    if (it->second != c.measured_s) {
      throw hapmoe::InputError("case " + c.id, "measured_s " + std::to_string(c.measured_s) +
                                                   " differs from the table's " +
                                                   std::to_string(it->second));
    }
    rows.erase(it);
  }
  if (!rows.empty()) {
    throw hapmoe::InputError(tsv, "row '" + rows.begin()->first + "' has no case");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string cases_path = "bench/fidelity/cases.json";
  std::string root = ".";
  std::string tsv;
  bool fit = false;
  std::optional<double> fixed_overhead;
  bool breakdown = false;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    if ((a == "--root" || a == "--tsv") && k + 1 < argc) {
      (a == "--root" ? root : tsv) = argv[++k];
    } else if (a == "--fit-kernel-overhead") {
      fit = true;
    } else if (a == "--breakdown") {
      breakdown = true;
    } else if (a == "--kernel-overhead-us" && k + 1 < argc) {
      char* end = nullptr;
      const double us = std::strtod(argv[++k], &end);
      if (end == argv[k] || *end != '\0' || !(us >= 0 && us <= 1000)) {
        std::cerr << "bench_fidelity: --kernel-overhead-us '" << argv[k]
                  << "' is not a number of microseconds in [0, 1000]\n";
        return 2;
      }
      fixed_overhead = us * 1e-6;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: bench_fidelity [CASES] [--root DIR] [--tsv PUBLISHED_RUNS_TSV] "
                   "[--fit-kernel-overhead | --kernel-overhead-us US] [--breakdown]\n";
      return 0;
    } else if (!a.empty() && a[0] != '-') {
      cases_path = a;
    } else {
      std::cerr << "bench_fidelity: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  try {
    const auto cases = hapmoe::fidelity::load_cases(cases_path);
    if (!tsv.empty()) check_against(cases, tsv);
    std::optional<double> overhead = fixed_overhead;
    if (fit) {
      std::vector<double> grid;
      for (int us = 0; us <= 60; ++us) grid.push_back(us * 1e-6);
      const auto f = hapmoe::fidelity::fit_kernel_overhead(cases, root, grid);
      std::cout << "kernel overhead fit (rows inside the median; sum of squared log errors):\n";
      for (std::size_t i = 0; i < f.grid.size(); ++i) {
        std::printf("  %4.0f us  %.4f%s\n", f.grid[i] * 1e6, f.sse[i],
                    f.grid[i] == f.best ? "  <- least" : "");
      }
      std::printf("kernel_overhead_fit_us=%.0f\n", f.best * 1e6);
      std::cout << "leave-one-out (fitted without the row, and the row's error at that fit):\n";
      std::vector<double> abs_errors;
      for (const auto& h : f.held_out) {
        std::printf("  %-22s %4.0f us  %+6.1f%%\n", h.id.c_str(), h.fitted * 1e6, 100 * h.error);
        abs_errors.push_back(std::abs(h.error));
      }
      std::sort(abs_errors.begin(), abs_errors.end());
      if (!abs_errors.empty()) {
        const std::size_t n = abs_errors.size();
        const double med =
            n % 2 ? abs_errors[n / 2] : (abs_errors[n / 2 - 1] + abs_errors[n / 2]) / 2;
        std::printf("leave-one-out: median_abs_error=%.3f worst_abs_error=%.3f\n\n", med,
                    abs_errors.back());
      }
      overhead = f.best;
    }
    const auto outcomes = hapmoe::fidelity::evaluate_cases(cases, root, overhead);
    if (breakdown) hapmoe::fidelity::print_breakdown(std::cout, outcomes);
    hapmoe::fidelity::print_report(std::cout, outcomes, hapmoe::fidelity::summarise(outcomes));
  } catch (const hapmoe::InputError& e) {
    std::cerr << "bench_fidelity: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_fidelity: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
