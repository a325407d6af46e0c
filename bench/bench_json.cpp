// Strict JSON reading speed (issue 21, item 11): parse_json
// (io/inputs/json_strict.h) on texts of several shapes, from 200,000 empty
// objects to 10 MB of many small objects, deep nesting within the depth
// limit, long arrays of numbers and long strings. Each run is a forked
// child killed after --limit seconds (the quadratic reader took minutes);
// the figure is the median of --repeat runs. For reference, the same text
// through nlohmann::json::parse without a callback (a DOM built with no
// checks: what a linear reader cannot beat by much).
//
//   bench_json [--repeat R] [--limit S] [--no-plain] [--only TEXT]
//   (--only: the shapes whose name contains TEXT)
//
// Prints one line per shape and a PASS/MISS line for the target (every
// 10 MB shape read in <= 1 s). Nothing is asserted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/run_limited.h"
#include "io/inputs/json_strict.h"

namespace {

constexpr std::size_t kTenMb = 10u << 20;

// `unit` repeated inside `[...]` (comma-separated) up to about `bytes`.
std::string array_of(const std::string& unit, std::size_t bytes) {
  std::string s = "[";
  s.reserve(bytes + unit.size() + 2);
  while (s.size() + unit.size() + 2 <= bytes) {
    if (s.size() > 1) s += ',';
    s += unit;
  }
  s += ']';
  return s;
}

// One object nested `depth` levels ({"k": [{"k": [... 1 ...]}]}), each
// level an object or an array, so the depth counts both.
std::string nested_unit(int depth) {
  std::string open;
  std::string close;
  for (int i = 0; i < depth; ++i) {
    if (i % 2 == 0) {
      open += "{\"k\":";
      close += '}';
    } else {
      open += '[';
      close += ']';
    }
  }
  std::reverse(close.begin(), close.end());
  return open + "1" + close;
}

struct Shape {
  std::string name;
  std::string text;
  bool ten_mb = false;  // counts for the 1 s target
};

std::vector<Shape> make_shapes() {
  std::vector<Shape> shapes;
  {
    std::string s = "[";
    for (int i = 0; i < 200000; ++i) s += i ? ",{}" : "{}";
    s += ']';
    shapes.push_back({"200k {}", std::move(s), false});
  }
  {
    // A model file of 1.2 MB: a few fields and a list of 400,000 empty
    // objects (the reader refuses the key, after parsing).
    std::string s =
        R"({"name": "m", "num_layers": 12, "hidden": 1024, "num_heads": 16, "layers": )";
    s += array_of("{}", 1200000 - s.size());
    s += '}';
    shapes.push_back({"1.2 MB model of {}", std::move(s), false});
  }
  shapes.push_back({"10 MB of {}", array_of("{}", kTenMb), true});
  shapes.push_back(
      {"10 MB small objects", array_of(R"({"a": 1, "b": "x", "c": [2.5]})", kTenMb), true});
  shapes.push_back({"10 MB depth 60", array_of(nested_unit(60), kTenMb), true});
  shapes.push_back({"10 MB numbers", array_of("12345.678", kTenMb), true});
  shapes.push_back({"10 MB one string", "[\"" + std::string(kTenMb - 4, 'x') + "\"]", true});
  shapes.push_back(
      {"10 MB 1 kB strings", array_of("\"" + std::string(1000, 'x') + "\"", kTenMb), true});
  {
    // An object with many keys (the end of each object value was the
    // quadratic step too).
    std::string s = "{";
    for (int i = 0; s.size() < kTenMb - 64; ++i) {
      if (i) s += ',';
      s += "\"k" + std::to_string(i) + "\": {}";
    }
    s += '}';
    shapes.push_back({"10 MB object keys", std::move(s), true});
  }
  return shapes;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median of `repeat` runs of f, each in a child killed after limit_s;
// nullopt if any run did not finish (or threw).
std::optional<double> median_run(const std::function<void()>& f, int repeat, double limit_s) {
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto s = hapmoe::bench::run_limited([&] { return seconds_of(f); }, limit_s);
    if (!s) return std::nullopt;
    t.push_back(*s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string show(const std::optional<double>& s, double limit_s) {
  char buf[64];
  if (!s) {
    std::snprintf(buf, sizeof buf, "> %.0f s", limit_s);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", *s);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  double limit_s = 60;
  bool plain = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--limit" && i + 1 < argc) {
      limit_s = std::atof(argv[++i]);
    } else if (a == "--no-plain") {
      plain = false;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: bench_json [--repeat R] [--limit S] [--no-plain] [--only TEXT]\n");
      return 2;
    }
  }
  std::printf(
      "# parse_json (strict) vs nlohmann::json::parse (no checks); median of %d runs, "
      "each killed after %.0f s\n",
      repeat, limit_s);
  std::printf("%-22s %10s %12s %12s\n", "shape", "bytes", "strict", "plain");
  bool pass = true;
  for (const Shape& shape : make_shapes()) {
    if (shape.name.find(only) == std::string::npos) continue;
    const auto strict = median_run(
        [&] {
          try {
            (void)hapmoe::parse_json(shape.text, "bench.json");
          } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n", shape.name.c_str(), e.what());
            throw;
          }
        },
        repeat, limit_s);
    std::optional<double> base;
    if (plain) {
      base = median_run(
          [&] {
            const nlohmann::json j = nlohmann::json::parse(shape.text);
            if (j.is_discarded()) std::abort();
          },
          repeat, limit_s);
    }
    if (shape.ten_mb && (!strict || *strict > 1.0)) pass = false;
    std::printf("%-22s %10zu %12s %12s\n", shape.name.c_str(), shape.text.size(),
                show(strict, limit_s).c_str(), plain ? show(base, limit_s).c_str() : "-");
    std::fflush(stdout);
  }
  std::printf("%s: every 10 MB shape read strictly in <= 1 s\n", pass ? "PASS" : "MISS");
  return 0;
}
