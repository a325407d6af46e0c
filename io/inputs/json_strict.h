// Strict JSON reading: every value is checked for type and range before it
// is converted, unknown and duplicate keys are errors, and every message
// names the file, the JSON pointer and the value (REFERENCE.md §6.2 lists
// the silent conversions of nlohmann/json this guards against).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hapmoe {

using Json = nlohmann::json;

// The largest JSON text parse_json reads: far above any real input (model,
// cluster, plan and sweep files are kilobytes), and read in well under a
// second (bench/bench_json.cpp).
inline constexpr std::size_t kMaxJsonBytes = 16u << 20;

// Parses JSON text in time linear in its size; comments are allowed,
// duplicate keys at any depth, nesting deeper than 64, numbers beyond a
// double (named by their JSON pointer) and texts over kMaxJsonBytes are
// errors. `origin` names the source in messages.
Json parse_json(const std::string& text, const std::string& origin);

// A value echoed in a message: bytes outside printable ASCII as \xNN, at
// most 64 characters, a longer value cut with its length said
// ("abc...(70119 bytes)").
std::string echo_value(const std::string& text, std::size_t max_chars = 64);

// A short rendering of a JSON value for messages (strings quoted, long
// values cut).
std::string describe(const Json& value);

// Reads one JSON object field by field. Each getter checks presence, type
// and range; finish() rejects any key that no getter asked for.
class ObjectReader {
 public:
  // `pointer` is the JSON pointer of `object` inside its document ("" for
  // the root). Throws InputError if `object` is not an object.
  ObjectReader(const Json& object, std::string origin, std::string pointer);

  bool has(const std::string& key) const;

  int get_int(const std::string& key, std::int64_t lo, std::int64_t hi);
  std::optional<int> opt_int(const std::string& key, std::int64_t lo, std::int64_t hi);
  double get_number(const std::string& key, double lo, double hi);
  std::optional<double> opt_number(const std::string& key, double lo, double hi);
  bool get_bool(const std::string& key);
  std::optional<bool> opt_bool(const std::string& key);
  std::string get_string(const std::string& key);
  std::optional<std::string> opt_string(const std::string& key);
  // A string that must be one of `allowed` (compared case-insensitively);
  // returns the matching entry of `allowed`.
  std::string get_choice(const std::string& key, std::initializer_list<const char*> allowed);
  std::optional<std::string> opt_choice(const std::string& key,
                                        std::initializer_list<const char*> allowed);
  // Raw access for nested objects/arrays; marks the key as used.
  const Json& get_raw(const std::string& key);
  const Json* opt_raw(const std::string& key);
  // Marks keys as known without reading them (documented but ignored).
  void ignore(std::initializer_list<const char*> keys);
  void ignore_all();

  // Throws InputError for the first key no getter used.
  void finish() const;

  // The pointer of a child key, for nested readers and messages.
  std::string pointer(const std::string& key) const;
  const std::string& origin() const { return origin_; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const Json& at(const std::string& key) const;
  const Json& object_;
  std::string origin_;
  std::string pointer_;
  std::set<std::string> used_;
  bool ignore_rest_ = false;
};

// Checks a JSON value is an integer in [lo, hi] and returns it; `where` is
// "origin:pointer" for messages.
std::int64_t checked_int(const Json& value, std::int64_t lo, std::int64_t hi,
                         const std::string& where);
double checked_number(const Json& value, double lo, double hi, const std::string& where);

// Parses a decimal integer or number from command-line text, fully
// (no trailing characters), within [lo, hi]. `what` names the option.
std::int64_t parse_int_text(const std::string& text, std::int64_t lo, std::int64_t hi,
                            const std::string& what);
double parse_number_text(const std::string& text, double lo, double hi, const std::string& what);

std::string to_lower(std::string s);

}  // namespace hapmoe
