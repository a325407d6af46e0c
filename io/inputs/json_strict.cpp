#include "io/inputs/json_strict.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "costmodel/errors.h"

namespace hapmoe {

namespace {

constexpr int kMaxDepth = 64;

std::string join_where(const std::string& origin, const std::string& pointer) {
  if (pointer.empty()) return origin;
  return origin + ":" + pointer;
}

// Keys and values echoed in messages are cut to this many characters, so
// a hostile 10 MB key still gives a one-line message (docs/testing.md).
constexpr std::size_t kMaxEchoed = 64;

// `text` cut to kMaxEchoed characters, saying how long it was.
std::string cut(const std::string& text) {
  if (text.size() <= kMaxEchoed) return text;
  // Not inside a UTF-8 sequence: back off over continuation bytes.
  std::size_t n = kMaxEchoed;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n) + "...(" + std::to_string(text.size()) + " bytes)";
}

// Bytes of a binary file quoted by the JSON parser ("last read: ...")
// as \xNN, so a message is plain ASCII whatever the file held.
std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string escape_pointer_token(const std::string& full_key) {
  const std::string key = cut(full_key);
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string to_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw InputError(path, "no such file");
  }
  if (std::filesystem::is_directory(status)) {
    throw InputError(path, "is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot be opened for reading");
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw InputError(path, "is larger than " + std::to_string(max_bytes) +
                                 " bytes, too large for an input file");
    }
  }
  if (in.bad()) throw InputError(path, "read error");
  return text;
}

Json parse_json(const std::string& text, const std::string& origin) {
  // One frame per open object or array: the keys seen so far (objects, to
  // reject duplicates at any depth) and the current key or index (for the
  // JSON pointer in messages).
  struct Frame {
    bool array = false;
    long long index = -1;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  auto pointer_to = [&](const std::string& key) {
    std::string pointer;
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
      pointer += "/" + (frames[i].array ? std::to_string(frames[i].index)
                                        : escape_pointer_token(frames[i].key));
    }
    return pointer + "/" + escape_pointer_token(key);
  };
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxDepth) {
      throw InputError(origin, "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
      case Json::parse_event_t::value:
        if (!frames.empty() && frames.back().array) ++frames.back().index;
        if (event != Json::parse_event_t::value) {
          frames.emplace_back();
          frames.back().array = event == Json::parse_event_t::array_start;
        }
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case Json::parse_event_t::key: {
        const auto key = parsed.get<std::string>();
        if (!frames.empty()) {
          frames.back().key = key;
          if (!frames.back().keys.insert(key).second) {
            throw InputError(origin + ":" + pointer_to(key),
                             "duplicate key \"" + cut(key) + "\" (each key may appear once)");
          }
        }
        break;
      }
    }
    return true;
  };
  try {
    return Json::parse(text, callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    // Turn the byte offset into line:column for people.
    std::size_t line = 1;
    std::size_t col = 1;
    const std::size_t end = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    // Keep nlohmann's explanation, drop its "[json.exception...]" prefix.
    const auto pos = what.find("parse error");
    if (pos != std::string::npos) what = what.substr(pos);
    throw InputError(origin + ":" + std::to_string(line) + ":" + std::to_string(col),
                     "invalid JSON (" + printable(what) + ")");
  } catch (const Json::out_of_range& e) {
    // A number too large for a double ("1e400") is out_of_range.406.
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw InputError(origin, "invalid JSON (" + what + ")");
  }
}

std::string describe(const Json& value) {
  std::string s = value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::int64_t checked_int(const Json& value, std::int64_t lo, std::int64_t hi,
                         const std::string& where) {
  const std::string range =
      " (expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "])";
  if (value.is_boolean() || !value.is_number()) {
    throw InputError(where, "must be an integer, got " + describe(value) + range);
  }
  std::int64_t v = 0;
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw InputError(where, "value " + describe(value) + " is out of range" + range);
    }
    v = static_cast<std::int64_t>(u);
  } else if (value.is_number_integer()) {
    v = value.get<std::int64_t>();
  } else {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) {
      throw InputError(where, "must be an integer, got " + describe(value) + range);
    }
    v = static_cast<std::int64_t>(d);
  }
  if (v < lo || v > hi) {
    throw InputError(where, "value " + describe(value) + " is out of range" + range);
  }
  return v;
}

double checked_number(const Json& value, double lo, double hi, const std::string& where) {
  std::ostringstream range;
  range << " (expected a number in [" << lo << ", " << hi << "])";
  if (value.is_boolean() || !value.is_number()) {
    throw InputError(where, "must be a number, got " + describe(value) + range.str());
  }
  const double v = value.get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    throw InputError(where, "value " + describe(value) + " is out of range" + range.str());
  }
  return v;
}

ObjectReader::ObjectReader(const Json& object, std::string origin, std::string pointer)
    : object_(object), origin_(std::move(origin)), pointer_(std::move(pointer)) {
  if (!object_.is_object()) {
    throw InputError(join_where(origin_, pointer_.empty() ? "/" : pointer_),
                     "must be a JSON object, got " + describe(object_));
  }
}

std::string ObjectReader::pointer(const std::string& key) const {
  return pointer_ + "/" + escape_pointer_token(key);
}

void ObjectReader::fail(const std::string& key, const std::string& what) const {
  throw InputError(join_where(origin_, pointer(key)), what);
}

bool ObjectReader::has(const std::string& key) const { return object_.contains(key); }

const Json& ObjectReader::at(const std::string& key) const {
  const auto it = object_.find(key);
  if (it == object_.end()) fail(key, "required field is missing");
  return *it;
}

int ObjectReader::get_int(const std::string& key, std::int64_t lo, std::int64_t hi) {
  used_.insert(key);
  return static_cast<int>(checked_int(at(key), lo, hi, join_where(origin_, pointer(key))));
}

std::optional<int> ObjectReader::opt_int(const std::string& key, std::int64_t lo, std::int64_t hi) {
  if (!has(key) || object_.at(key).is_null()) {
    used_.insert(key);
    return std::nullopt;
  }
  return get_int(key, lo, hi);
}

double ObjectReader::get_number(const std::string& key, double lo, double hi) {
  used_.insert(key);
  return checked_number(at(key), lo, hi, join_where(origin_, pointer(key)));
}

std::optional<double> ObjectReader::opt_number(const std::string& key, double lo, double hi) {
  if (!has(key) || object_.at(key).is_null()) {
    used_.insert(key);
    return std::nullopt;
  }
  return get_number(key, lo, hi);
}

bool ObjectReader::get_bool(const std::string& key) {
  used_.insert(key);
  const Json& v = at(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + describe(v));
  return v.get<bool>();
}

std::optional<bool> ObjectReader::opt_bool(const std::string& key) {
  if (!has(key) || object_.at(key).is_null()) {
    used_.insert(key);
    return std::nullopt;
  }
  return get_bool(key);
}

std::string ObjectReader::get_string(const std::string& key) {
  used_.insert(key);
  const Json& v = at(key);
  if (!v.is_string()) fail(key, "must be a string, got " + describe(v));
  auto s = v.get<std::string>();
  if (s.size() > 4096)
    fail(key, "string of " + std::to_string(s.size()) + " characters is too long (at most 4096)");
  return s;
}

std::optional<std::string> ObjectReader::opt_string(const std::string& key) {
  if (!has(key) || object_.at(key).is_null()) {
    used_.insert(key);
    return std::nullopt;
  }
  return get_string(key);
}

std::string ObjectReader::get_choice(const std::string& key,
                                     std::initializer_list<const char*> allowed) {
  const std::string s = get_string(key);
  for (const char* a : allowed) {
    if (to_lower(s) == to_lower(a)) return a;
  }
  std::string list;
  for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
  fail(key, "unknown value \"" + cut(s) + "\" (allowed: " + list + ")");
}

std::optional<std::string> ObjectReader::opt_choice(const std::string& key,
                                                    std::initializer_list<const char*> allowed) {
  if (!has(key) || object_.at(key).is_null()) {
    used_.insert(key);
    return std::nullopt;
  }
  return get_choice(key, allowed);
}

const Json& ObjectReader::get_raw(const std::string& key) {
  used_.insert(key);
  return at(key);
}

const Json* ObjectReader::opt_raw(const std::string& key) {
  used_.insert(key);
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void ObjectReader::ignore(std::initializer_list<const char*> keys) {
  for (const char* k : keys) used_.insert(k);
}

void ObjectReader::ignore_all() { ignore_rest_ = true; }

void ObjectReader::finish() const {
  if (ignore_rest_) return;
  for (const auto& item : object_.items()) {
    if (used_.count(item.key()) == 0) {
      fail(item.key(), "unknown field (not part of this format)");
    }
  }
}

namespace {

// Plain decimal only: no leading blanks or '+', no hex.
bool plain_decimal(const std::string& text) {
  if (text.empty()) return false;
  const char c = text.front();
  if (!(c == '-' || c == '.' || (c >= '0' && c <= '9'))) return false;
  return text.find_first_of("xXpP") == std::string::npos;
}

}  // namespace

std::int64_t parse_int_text(const std::string& text, std::int64_t lo, std::int64_t hi,
                            const std::string& what) {
  if (!plain_decimal(text)) throw InputError(what, "expected an integer, got \"" + text + "\"");
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw InputError(what, "expected an integer, got \"" + text + "\"");
  }
  if (v < lo || v > hi) {
    throw InputError(what, "value " + text + " is out of range (expected [" + std::to_string(lo) +
                               ", " + std::to_string(hi) + "])");
  }
  return v;
}

double parse_number_text(const std::string& text, double lo, double hi, const std::string& what) {
  if (!plain_decimal(text)) {
    throw InputError(what, "expected a finite number, got \"" + text + "\"");
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) {
    throw InputError(what, "expected a finite number, got \"" + text + "\"");
  }
  if (v < lo || v > hi) {
    std::ostringstream msg;
    msg << "value " << text << " is out of range (expected [" << lo << ", " << hi << "])";
    throw InputError(what, msg.str());
  }
  return v;
}

}  // namespace hapmoe
