// Shared by the io tests: the command line run in-process, and whole files
// read and written.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/cli/cli.h"

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

// A fresh, empty directory for this test: <tmp>/hapmoe_tests/<Suite.Test>/NAME.
// Named after the running test, so that tests CTest runs side by side never
// share (or remove) each other's files.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = t ? std::string(t->test_suite_name()) + "." + t->name() : "no_test";
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / "hapmoe_tests" / test / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace hapmoe::test
