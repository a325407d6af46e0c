// The profile file (`--profile prof.h5`, docs/profile.md): any subset of
// the measured tables and fitted coefficients in one HDF5 file, read and
// written through io/archive/h5.h.
#pragma once

#include <string>

#include "costmodel/measured.h"

namespace hapmoe {

// Reads `path`. Throws InputError naming the file, the dataset, the row
// and the value on a missing file, a file that is not a hapmoe profile, a
// wrong layout, or a value out of range (negative time, world < 1, ...).
MeasuredProfile read_profile(const std::string& path);

// Writes `profile` to `path` through a temporary next to it and a rename
// (no half-written file; InputError naming `option` on failure).
void write_profile_file(const std::string& path, const MeasuredProfile& profile,
                        const std::string& option = "--out");

// "all-reduce" -> kAllReduce, "intra-node" -> kIntraNode; InputError
// naming `where` otherwise.
Primitive parse_primitive(const std::string& text, const std::string& where);
LinkKind parse_link_kind(const std::string& text, const std::string& where);

}  // namespace hapmoe
