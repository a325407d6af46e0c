// The command-line flags of the pinned Megatron-LM (kMegatronVersion,
// io/megatron/megatron_launcher.h): the data file
// io/megatron/megatron_flags_core_v0.15.0.txt, one flag per line, compiled
// in at build time (io/megatron/CMakeLists.txt) and regenerated from a
// Megatron-LM clone by io/megatron/megatron_flags.py. The launcher checks
// every flag it writes against it (docs/megatron.md, "Flags of the pinned
// Megatron-LM").
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace hapmoe {

// The Megatron-LM tag the list was taken from (the data file's name).
std::string_view megatron_flags_version();

// Every flag, sorted and unique, with its dashes ("--micro-batch-size").
std::span<const std::string_view> megatron_flags();

// Whether `name` ("--flag", exactly: Megatron's parser takes no
// abbreviations) is a flag of the pinned Megatron-LM.
bool is_megatron_flag(std::string_view name);

// The listed flag nearest to `name` (at most two edits away, e.g.
// "--micro-batch-size" for "--micro-batch-sizes"), or "" when none is that
// near: a hint for messages.
std::string nearest_megatron_flag(std::string_view name);

}  // namespace hapmoe
