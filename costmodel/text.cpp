#include "costmodel/text.h"

#include <cstdio>

namespace hapmoe {

namespace {

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

std::string escape_one(char c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x",
                    static_cast<unsigned>(static_cast<unsigned char>(c)));
      return buf;
    }
  }
}

}  // namespace

bool has_control_character(std::string_view text) {
  for (char c : text) {
    if (is_control(c)) return true;
  }
  return false;
}

std::string escape_control_characters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (is_control(c)) {
      out += escape_one(c);
    } else {
      out += c;
    }
  }
  return out;
}

std::string check_name_text(std::string_view field, std::string_view value) {
  std::size_t first = 0;
  while (first < value.size() && !is_control(value[first])) ++first;
  if (first == value.size()) return "";
  constexpr std::size_t kShown = 64;
  std::string shown = escape_control_characters(value.substr(0, kShown));
  if (value.size() > kShown) shown += "...(" + std::to_string(value.size()) + " bytes)";
  return std::string(field) + " \"" + shown + "\" contains a control character (" +
         escape_one(value[first]) + "); a name must be one line of printable text";
}

}  // namespace hapmoe
