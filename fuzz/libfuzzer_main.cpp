// The libFuzzer entry point of one target, named at compile time by
// HAPMOE_FUZZ_TARGET (fuzz/CMakeLists.txt builds one binary per target).
// Only InputError is caught (inside run_one); anything else escapes and
// libFuzzer reports it with the input that caused it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz/targets.h"

#ifndef HAPMOE_FUZZ_TARGET
#error "HAPMOE_FUZZ_TARGET must name the target"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hapmoe::fuzz::Target* target = hapmoe::fuzz::find_target(HAPMOE_FUZZ_TARGET);
  if (target == nullptr) std::abort();
  (void)hapmoe::fuzz::run_one(*target, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
