// fuzz_replay TARGET DIR...: runs a fuzz target on every file of the
// folders (the seed corpus and the crash reproducers), without libFuzzer,
// so any compiler and the normal test suite exercise every target. Prints
// one line per file that escapes with anything but an InputError, and
// exits 1 if there was any; a crash ends the process (and the test).
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/targets.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::cerr << "usage: fuzz_replay TARGET DIR...\n";
    return 2;
  }
  const hapmoe::fuzz::Target* target = hapmoe::fuzz::find_target(argv[1]);
  if (target == nullptr) {
    std::cerr << "fuzz_replay: no target '" << argv[1] << "'\n";
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (!fs::is_directory(argv[i], ec)) continue;  // no reproducers yet
    for (const auto& e : fs::directory_iterator(argv[i])) {
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  int accepted = 0;
  int rejected = 0;
  int failed = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    try {
      (hapmoe::fuzz::run_one(*target, bytes.str()) ? accepted : rejected)++;
    } catch (const std::exception& e) {
      std::cerr << f.string() << ": escaped: " << e.what() << "\n";
      ++failed;
    }
  }
  std::cout << target->name << ": " << files.size() << " inputs, " << accepted << " accepted, "
            << rejected << " rejected, " << failed << " failed\n";
  if (files.empty()) {
    std::cerr << "fuzz_replay: no inputs found\n";
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
