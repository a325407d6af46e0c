// The profile file (`--profile prof.h5`, docs/profile.md): any subset of
// the measured tables and fitted coefficients in one HDF5 file, read and
// written through io/archive/h5.h.
#pragma once

#include <cstdint>
#include <string>

#include "costmodel/measured.h"

namespace hapmoe {

// The largest profile file read_profile opens (checked before reading),
// and the most rows of one table: far above a real profile (thousands of
// rows, a few megabytes), far below what would exhaust memory.
inline constexpr std::uint64_t kMaxProfileBytes = 64u << 20;
inline constexpr std::uint64_t kMaxProfileRows = 1u << 20;

// Reads `path`. Throws InputError naming the file, the dataset, the row,
// the field and the value on a missing file, a file above
// kMaxProfileBytes (checked before reading) or a table above
// kMaxProfileRows, a file that is not a hapmoe profile, a soft or external
// link where a table is expected (never followed), a wrong layout (a field
// missing, unknown, or text where a number belongs), an integer field
// holding a non-integral number, or a value validate_profile refuses.
MeasuredProfile read_profile(const std::string& path);

// Throws InputError naming `option`, `path`, the table, row and field and
// the value unless every value of `profile` is one read_profile accepts
// (validate_profile, costmodel/measured.h). write_profile_file checks with
// it before writing; a command checks before printing what it will write.
void check_profile_to_write(const std::string& path, const MeasuredProfile& profile,
                            const std::string& option = "--out");

// Writes `profile` to `path` through a temporary next to it and a rename
// (no half-written file; InputError naming `option` on failure, nothing
// written when check_profile_to_write fails).
void write_profile_file(const std::string& path, const MeasuredProfile& profile,
                        const std::string& option = "--out");

// "all-reduce" -> kAllReduce, "intra-node" -> kIntraNode; InputError
// naming `where` otherwise.
Primitive parse_primitive(const std::string& text, const std::string& where);
LinkKind parse_link_kind(const std::string& text, const std::string& where);

}  // namespace hapmoe
