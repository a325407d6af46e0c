// Fuzz targets: one entry per parser, each a function of raw bytes that
// calls the parser (and whatever the command line does right after it) and
// lets only the project's documented input error through: InputError is
// the expected way to reject bytes, caught by the caller. Anything else
// that escapes -- std::out_of_range, a leaked nlohmann::json exception, a
// ContractError, a crash -- is a bug to fix at its source (docs/testing.md).
//
// The same table drives both entry points:
//   * fuzz/libfuzzer_main.cpp: one libFuzzer binary per target (clang,
//     the `fuzz` preset);
//   * fuzz/replay_main.cpp: a plain program (any compiler, the normal test
//     suite) that replays the seed corpus and every crash reproducer.
// Adding a target: one row in kTargets (targets.cpp), one name in
// HAPMOE_FUZZ_TARGETS (fuzz/CMakeLists.txt), seeds in fuzz/corpus/NAME/ or
// fixture folders in fuzz/seed_dirs.txt.
#pragma once

#include <span>
#include <string_view>

namespace hapmoe::fuzz {

struct Target {
  const char* name;                  // e.g. "model_json"; the corpus folder name
  void (*run)(std::string_view in);  // throws InputError to reject the input
};

std::span<const Target> targets();

// nullptr if there is no such target.
const Target* find_target(std::string_view name);

// Runs `target` on `bytes`: true if accepted, false if rejected with an
// InputError. Every other exception propagates.
bool run_one(const Target& target, std::string_view bytes);

}  // namespace hapmoe::fuzz
