#include "io/inputs/json_strict.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
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

std::string echo_value(const std::string& text, std::size_t max_chars) {
  // Printable bytes as they are, others as \xNN, at most max_chars
  // characters of output (an escape is not split).
  std::string out;
  std::size_t used = 0;  // bytes of `text` rendered
  for (; used < text.size(); ++used) {
    const std::string one = printable(text.substr(used, 1));
    if (out.size() + one.size() > max_chars) break;
    out += one;
  }
  if (used == text.size()) return out;
  return out + "...(" + std::to_string(text.size()) + " bytes)";
}

namespace {

// Builds the document from nlohmann's SAX events and checks it as it goes:
// duplicate keys, the depth limit, and numbers too large for a double
// (named by their JSON pointer). Every step is O(1) amortised, so reading
// is linear in the text. nlohmann's own parser with a callback (what this
// replaced) is quadratic: at the end of every object it scans the parent
// container for discarded values, so 200,000 `{}` in an array took seconds
// and 10 MB of them minutes (bench/bench_json.cpp, bench/README.md).
class StrictSax {
 public:
  StrictSax(Json& root, const std::string& text, const std::string& origin)
      : root_(root), text_(text), origin_(origin) {}

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string& /*text*/) { return add(Json(v)); }
  bool string(std::string& v) { return add(Json(std::move(v))); }
  bool binary(Json::binary_t& /*v*/) { return add(Json(nullptr)); }  // not in JSON text

  bool start_object(std::size_t /*len*/) { return open(Json::value_t::object); }
  bool start_array(std::size_t /*len*/) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& key) {
    Frame& f = frames_.back();
    auto [it, inserted] = f.container->emplace(std::move(key), nullptr);
    if (!inserted) {
      throw InputError(origin_ + ":" + pointer_to(escape_pointer_token(it.key())),
                       "duplicate key \"" + cut(it.key()) + "\" (each key may appear once)");
    }
    f.key = &it.key();
    f.slot = &*it;
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& token, const Exception& e) {
    if constexpr (std::is_same_v<Exception, Json::out_of_range>) {
      // 406: a number beyond the range of a double ("1e400"). Named by
      // the pointer of the value it would have been.
      throw InputError(join_where(origin_, pointer_to(next_token())),
                       "invalid JSON (number " + echo_value(token) +
                           " is out of range: beyond the largest double, about 1.8e308)");
    }
    // Turn the byte offset into line:column for people.
    std::size_t line = 1;
    std::size_t col = 1;
    const std::size_t end = std::min(byte == 0 ? 0 : byte - 1, text_.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    // Keep nlohmann's explanation, drop its "[json.exception...] parse
    // error at line L, column C: " prefix (the line and column lead the
    // message), and cut the token it quotes ("last read: '...'"), which can
    // be a whole unterminated 10 MB string.
    if (const auto pos = what.find("parse error"); pos != std::string::npos) {
      what = what.substr(pos);
      const auto colon = what.find(": ");
      if (what.rfind("parse error at line ", 0) == 0 && colon != std::string::npos) {
        what = what.substr(colon + 2);
      }
    }
    const std::string quoted = "last read: '" + token + "'";
    if (const auto at = what.find(quoted); at != std::string::npos) {
      what = printable(what.substr(0, at)) + "last read: '" + echo_value(token, 40) + "'" +
             printable(what.substr(at + quoted.size()));
    } else {
      what = printable(what);
    }
    throw InputError(origin_ + ":" + std::to_string(line) + ":" + std::to_string(col),
                     "invalid JSON (" + what + ")");
  }

 private:
  // One open object or array: where the next value goes.
  struct Frame {
    Json* container = nullptr;
    const std::string* key = nullptr;  // objects: the current key
    Json* slot = nullptr;              // objects: the value of that key
  };

  // The depth rule of the callback parser this replaced: a value (scalar
  // or container) inside more than kMaxDepth open containers is refused.
  void check_depth() const {
    if (frames_.size() > static_cast<std::size_t>(kMaxDepth)) {
      throw InputError(origin_, "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
  }

  // Puts `v` where the next value goes and returns where it now is.
  Json* place(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.container->is_array()) {
      f.container->push_back(std::move(v));
      return &f.container->back();
    }
    *f.slot = std::move(v);
    return f.slot;
  }

  bool add(Json&& v) {
    check_depth();
    place(std::move(v));
    return true;
  }

  bool open(Json::value_t type) {
    check_depth();
    Json* c = place(Json(type));
    frames_.push_back({c, nullptr, nullptr});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  // The pointer token of the value about to be read in the innermost
  // container (its key, or the next index).
  std::string next_token() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    if (f.container->is_array()) return std::to_string(f.container->size());
    return f.key ? escape_pointer_token(*f.key) : "";
  }

  // The JSON pointer of the innermost container followed by `last` (a
  // token already escaped), or "" for the root.
  std::string pointer_to(const std::string& last) const {
    if (frames_.empty()) return "";
    std::string pointer;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      pointer += "/" + (f.container->is_array() ? std::to_string(f.container->size() - 1)
                                                : escape_pointer_token(*f.key));
    }
    return pointer + "/" + last;
  }

  Json& root_;
  const std::string& text_;
  const std::string& origin_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxJsonBytes) {
    throw InputError(origin, "JSON text of " + std::to_string(text.size()) +
                                 " bytes is larger than the limit of " +
                                 std::to_string(kMaxJsonBytes) +
                                 " bytes (16 MiB) for an input file");
  }
  Json root;
  StrictSax sax(root, text, origin);
  Json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/true);
  return root;
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
  if (!plain_decimal(text))
    throw InputError(what, "expected an integer, got \"" + echo_value(text) + "\"");
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw InputError(what, "expected an integer, got \"" + echo_value(text) + "\"");
  }
  if (v < lo || v > hi) {
    throw InputError(what, "value " + echo_value(text) + " is out of range (expected [" +
                               std::to_string(lo) + ", " + std::to_string(hi) + "])");
  }
  return v;
}

double parse_number_text(const std::string& text, double lo, double hi, const std::string& what) {
  if (!plain_decimal(text)) {
    throw InputError(what, "expected a finite number, got \"" + echo_value(text) + "\"");
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) {
    throw InputError(what, "expected a finite number, got \"" + echo_value(text) + "\"");
  }
  if (v < lo || v > hi) {
    std::ostringstream msg;
    msg << "value " << echo_value(text) << " is out of range (expected [" << lo << ", " << hi
        << "])";
    throw InputError(what, msg.str());
  }
  return v;
}

}  // namespace hapmoe
