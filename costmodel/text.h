// Names in text that leaves hapmoe. Names users give (models, clusters,
// device types, hosts) travel into messages, reports, archives and the
// generated launcher; a control character in one (a line break, an escape
// sequence) could end a comment of a shell script or forge a line of
// output. The input readers refuse such names (check_name_text); writers
// that must show arbitrary text escape it (escape_control_characters).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hapmoe {

// `text` without the white space (std::isspace) at its ends.
std::string_view trim(std::string_view text);

// True when `text` has a byte below 0x20 or the byte 0x7f (DEL).
bool has_control_character(std::string_view text);

// `text` on one line: \n, \r and \t written as such, other control
// characters as \xNN; everything else (backslashes, UTF-8) kept.
std::string escape_control_characters(std::string_view text);

// "" when `value` has no control character, else a message naming
// `field` and the value (escaped, cut to 64 characters with its length
// said):
//   FIELD "X\ntouch y" contains a control character (\n); ...
std::string check_name_text(std::string_view field, std::string_view value);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
// code points above U+10FFFF).
bool is_valid_utf8(std::string_view text);

// The longest name a reader accepts, in bytes (the JSON readers' string
// limit, io/inputs/json_strict.h).
inline constexpr std::size_t kMaxNameBytes = 4096;

// "" when `value` is a name hapmoe keeps: not empty, at most kMaxNameBytes,
// valid UTF-8, no control character; else a one-line message naming
// `field` and the value (cut, non-ASCII bytes as \xNN). The readers of
// binary files (the HDF5 profile) and their writers both check with it.
std::string check_name(std::string_view field, std::string_view value);

}  // namespace hapmoe
