#include "costmodel/text.h"

#include <cctype>
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

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

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

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range of its second byte
    // (Unicode 15, table 3-7: no overlong forms, no surrogates, at most
    // U+10FFFF).
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (text.size() - i < n) return false;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < lo || second > hi) return false;
    for (std::size_t k = 2; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string check_name(std::string_view field, std::string_view value) {
  if (value.empty()) return std::string(field) + " is empty";
  if (value.size() > kMaxNameBytes) {
    return std::string(field) + " of " + std::to_string(value.size()) +
           " bytes is too long (at most " + std::to_string(kMaxNameBytes) + ")";
  }
  if (!is_valid_utf8(value)) {
    constexpr std::size_t kShown = 32;
    std::string shown;
    for (const char c : value.substr(0, kShown)) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u < 0x7f) {
        shown += c;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(u));
        shown += buf;
      }
    }
    if (value.size() > kShown) shown += "...(" + std::to_string(value.size()) + " bytes)";
    return std::string(field) + " \"" + shown + "\" is not valid UTF-8";
  }
  return check_name_text(field, value);
}

}  // namespace hapmoe
