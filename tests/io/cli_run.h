// Shared by the io tests: the command line run in-process, and whole files
// read and written.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "io/cli.h"

namespace hapmoe::test {

struct CliRun {
  int code = 0;
  std::string out;
  std::string err;
};

// `hapmoe ARGS...` through run_cli (one process, SerialComm).
inline CliRun run(std::vector<std::string> args) {
  args.insert(args.begin(), "hapmoe");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  CliRun r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace hapmoe::test
