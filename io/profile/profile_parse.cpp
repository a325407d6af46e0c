// Measurement-file readers (docs/profile.md). Every number goes through
// from_chars with a range check, so no input can make them throw anything
// but InputError or read out of bounds (they are fuzz targets).
#include "io/profile/profile_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "costmodel/errors.h"

namespace hapmoe {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Short, printable excerpt of a value for messages.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  if (s.size() > 40) out += "...";
  return "'" + out + "'";
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return lines;
}

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> to_int(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string at_line(const std::string& origin, int line) {
  return origin + ":" + std::to_string(line);
}

// --- CSV ----------------------------------------------------------------------

// One CSV line split on commas outside double quotes; fields trimmed, the
// quotes removed ("" inside quotes is one quote).
std::vector<std::string_view> split_csv(std::string_view line, std::deque<std::string>& storage) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (ch == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  storage.insert(storage.end(), fields.begin(), fields.end());
  std::vector<std::string_view> out;
  for (std::size_t k = storage.size() - fields.size(); k < storage.size(); ++k) {
    out.push_back(trim(storage[k]));
  }
  return out;
}

// A CSV table: the header's columns and the data rows with their lines.
struct Csv {
  std::map<std::string, std::size_t> column;  // lower-case name -> index
  std::vector<std::string> names;
  struct Row {
    int line = 0;
    std::vector<std::string_view> fields;
  };
  std::vector<Row> rows;
  std::deque<std::string> storage;  // the fields' text (stable addresses)
};

Csv read_csv(std::string_view text, const std::string& origin,
             const std::vector<std::string>& required, const std::vector<std::string>& optional,
             const std::map<std::string, std::string>& aliases = {}) {
  Csv csv;
  const auto lines = split_lines(text);
  bool header = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = trim(lines[i]);
    const int no = static_cast<int>(i) + 1;
    if (line.empty() || line.front() == '#') continue;
    const auto fields = split_csv(line, csv.storage);
    if (!header) {
      for (std::size_t k = 0; k < fields.size(); ++k) {
        std::string name = lower(fields[k]);
        if (const auto a = aliases.find(name); a != aliases.end()) name = a->second;
        const bool known = std::find(required.begin(), required.end(), name) != required.end() ||
                           std::find(optional.begin(), optional.end(), name) != optional.end();
        if (!known) {
          std::string allowed;
          for (const auto& r : required) allowed += (allowed.empty() ? "" : ", ") + r;
          for (const auto& o : optional) allowed += ", " + o;
          throw InputError(at_line(origin, no),
                           "unknown column " + shown(fields[k]) + " (columns: " + allowed + ")");
        }
        if (!csv.column.emplace(name, k).second) {
          throw InputError(at_line(origin, no), "column " + shown(fields[k]) + " appears twice");
        }
        csv.names.push_back(name);
      }
      for (const auto& r : required) {
        if (csv.column.count(r) == 0) {
          throw InputError(at_line(origin, no), "missing column '" + r + "' in the header");
        }
      }
      header = true;
      continue;
    }
    if (fields.size() != csv.names.size()) {
      throw InputError(at_line(origin, no), "expected " + std::to_string(csv.names.size()) +
                                                " fields, found " + std::to_string(fields.size()));
    }
    csv.rows.push_back({no, fields});
  }
  if (!header)
    throw InputError(origin, "no header line (expected columns " + required[0] + ", ...)");
  if (csv.rows.empty()) throw InputError(origin, "no data rows after the header");
  return csv;
}

bool has(const Csv& csv, const Csv::Row& row, const std::string& col) {
  const auto it = csv.column.find(col);
  return it != csv.column.end() && !row.fields[it->second].empty();
}

std::string_view field(const Csv& csv, const Csv::Row& row, const std::string& col) {
  return row.fields[csv.column.at(col)];
}

std::string text_field(const std::string& origin, const Csv& csv, const Csv::Row& row,
                       const std::string& col) {
  const std::string_view v = field(csv, row, col);
  if (v.empty()) throw InputError(at_line(origin, row.line), col + " is empty");
  return std::string(v);
}

double num_field(const std::string& origin, const Csv& csv, const Csv::Row& row,
                 const std::string& col, double lo, bool lo_open) {
  const std::string_view v = field(csv, row, col);
  const auto d = to_double(v);
  if (!d) throw InputError(at_line(origin, row.line), col + " " + shown(v) + " is not a number");
  if (*d < lo || (lo_open && *d == lo)) {
    throw InputError(at_line(origin, row.line), col + " " + shown(v) + " must be " +
                                                    (lo_open ? "> " : ">= ") +
                                                    (lo == 0 ? "0" : std::to_string(lo)));
  }
  return *d;
}

int int_field(const std::string& origin, const Csv& csv, const Csv::Row& row,
              const std::string& col, long long lo, long long hi) {
  const std::string_view v = field(csv, row, col);
  const auto d = to_int(v);
  if (!d || *d < lo || *d > hi) {
    throw InputError(at_line(origin, row.line), col + " " + shown(v) + " must be an integer in [" +
                                                    std::to_string(lo) + ", " + std::to_string(hi) +
                                                    "]");
  }
  return static_cast<int>(*d);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

// --- nccl-tests ----------------------------------------------------------------

Primitive nccl_test_primitive(const std::string& name, const std::string& where) {
  const std::string n = lower(name);
  if (n == "all_reduce_perf" || n == "all-reduce" || n == "allreduce") return Primitive::kAllReduce;
  if (n == "all_gather_perf" || n == "all-gather" || n == "allgather") return Primitive::kAllGather;
  if (n == "reduce_scatter_perf" || n == "reduce-scatter" || n == "reducescatter") {
    return Primitive::kReduceScatter;
  }
  if (n == "alltoall_perf" || n == "all-to-all" || n == "alltoall") return Primitive::kAllToAll;
  if (n == "sendrecv_perf" || n == "p2p" || n == "sendrecv") return Primitive::kP2P;
  throw InputError(where, shown(name) +
                              " is not a known test (all_reduce_perf, all_gather_perf, "
                              "reduce_scatter_perf, alltoall_perf, sendrecv_perf)");
}

NcclLog parse_nccl_tests_log(std::string_view text, const std::string& origin, bool in_place) {
  NcclLog log;
  const auto lines = split_lines(text);
  // Column positions, from the header (`#  size  count  type ...`).
  int col_size = -1;
  int col_time = -1;
  int col_busbw = -1;
  std::size_t min_fields = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int no = static_cast<int>(i) + 1;
    std::string_view line = trim(lines[i]);
    if (line.empty()) continue;
    for (const char* t : {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                          "alltoall_perf", "sendrecv_perf"}) {
      if (log.test.empty() && line.find(t) != std::string_view::npos) log.test = t;
    }
    if (line.find("NCCL INFO") != std::string_view::npos ||
        line.find("NCCL WARN") != std::string_view::npos ||
        line.find("RCCL INFO") != std::string_view::npos) {
      continue;  // NCCL_DEBUG output interleaved with the table
    }
    if (line.front() == '#') {
      const auto words = split_ws(line.substr(1));
      if (words.size() >= 2 && words[0] == "Rank" &&
          line.find("device") != std::string_view::npos) {
        ++log.ranks;
      }
      if (words.size() >= 4 && words[0] == "size" && words[1] == "count") {
        // Data columns: the header's words, "#wrong"/"error" included.
        std::vector<int> times, busbws;
        for (std::size_t k = 0; k < words.size(); ++k) {
          if (words[k] == "time") times.push_back(static_cast<int>(k));
          if (words[k] == "busbw") busbws.push_back(static_cast<int>(k));
        }
        if (times.empty()) {
          throw InputError(at_line(origin, no), "table header without a 'time' column");
        }
        const std::size_t pick = in_place && times.size() > 1 ? 1 : 0;
        if (in_place && times.size() < 2) {
          throw InputError(at_line(origin, no), "no in-place 'time' column in this table");
        }
        col_size = 0;
        col_time = times[pick];
        col_busbw = pick < busbws.size() ? busbws[pick] : -1;
        min_fields = static_cast<std::size_t>(std::max(col_time, col_busbw)) + 1;
      }
      continue;
    }
    // Open MPI --tag-output prefixes ("[1,0]<stdout>:").
    if (line.front() == '[') {
      const auto close = line.find("]<stdout>:");
      if (close != std::string_view::npos) line = trim(line.substr(close + 10));
      if (line.empty() || line.front() == '#') continue;
    }
    const auto words = split_ws(line);
    if (col_size < 0) {
      throw InputError(at_line(origin, no),
                       "unexpected line " + shown(line) +
                           " before the table header (# size count type redop ...)");
    }
    if (words.size() < min_fields) {
      throw InputError(at_line(origin, no), "expected at least " + std::to_string(min_fields) +
                                                " columns, found " + std::to_string(words.size()) +
                                                ": " + shown(line));
    }
    const auto size = to_double(words[static_cast<std::size_t>(col_size)]);
    const auto time = to_double(words[static_cast<std::size_t>(col_time)]);
    if (!size || *size <= 0) {
      throw InputError(at_line(origin, no), "size " +
                                                shown(words[static_cast<std::size_t>(col_size)]) +
                                                " is not a positive number of bytes");
    }
    if (!time || *time <= 0) {
      throw InputError(at_line(origin, no), "time " +
                                                shown(words[static_cast<std::size_t>(col_time)]) +
                                                " is not a positive number of microseconds");
    }
    NcclRow row;
    row.bytes = *size;
    row.seconds = *time * 1e-6;
    if (col_busbw >= 0) {
      if (const auto bw = to_double(words[static_cast<std::size_t>(col_busbw)])) {
        row.busbw_gbs = *bw;
      }
    }
    row.line = no;
    log.rows.push_back(row);
  }
  if (log.rows.empty()) {
    throw InputError(origin, col_size < 0 ? "no nccl-tests result table (no '# size count type "
                                            "...' header line)"
                                          : "the result table has no rows");
  }
  return log;
}

// --- Layer timings ---------------------------------------------------------------

std::vector<LayerSample> parse_layer_csv(std::string_view text, const std::string& origin) {
  const Csv csv = read_csv(
      text, origin, {"device", "tp", "cp", "micro_batch", "forward_ms", "backward_ms"},
      {"layer", "ep", "tpe", "ffn_forward_ms", "ffn_backward_ms", "router_ms", "peak_memory_gib"},
      {{"ffn_ms", "ffn_forward_ms"}});
  std::vector<LayerSample> out;
  for (const Csv::Row& row : csv.rows) {
    LayerSample s;
    s.line = row.line;
    s.device = text_field(origin, csv, row, "device");
    s.tp = int_field(origin, csv, row, "tp", 1, 1 << 16);
    s.cp = int_field(origin, csv, row, "cp", 1, 1 << 16);
    s.micro_batch = int_field(origin, csv, row, "micro_batch", 1, 1 << 20);
    s.fwd_s = num_field(origin, csv, row, "forward_ms", 0, true) * 1e-3;
    s.bwd_s = num_field(origin, csv, row, "backward_ms", 0, true) * 1e-3;
    if (has(csv, row, "layer")) {
      const std::string kind = lower(field(csv, row, "layer"));
      if (kind != "dense" && kind != "moe") {
        throw InputError(at_line(origin, row.line),
                         "layer " + shown(field(csv, row, "layer")) + ": expected dense or moe");
      }
      s.moe = kind == "moe";
    }
    if (has(csv, row, "ep")) s.ep = int_field(origin, csv, row, "ep", 1, 1 << 16);
    if (has(csv, row, "tpe")) s.tpe = int_field(origin, csv, row, "tpe", 1, 1 << 16);
    if (has(csv, row, "ffn_forward_ms")) {
      s.ffn_fwd_s = num_field(origin, csv, row, "ffn_forward_ms", 0, true) * 1e-3;
      if (s.ffn_fwd_s >= s.fwd_s) {
        throw InputError(at_line(origin, row.line),
                         "ffn_forward_ms " + shown(field(csv, row, "ffn_forward_ms")) +
                             " must be below forward_ms (the FFN is part of the layer)");
      }
    }
    if (has(csv, row, "ffn_backward_ms")) {
      s.ffn_bwd_s = num_field(origin, csv, row, "ffn_backward_ms", 0, true) * 1e-3;
      if (s.ffn_bwd_s >= s.bwd_s) {
        throw InputError(at_line(origin, row.line), "ffn_backward_ms " +
                                                        shown(field(csv, row, "ffn_backward_ms")) +
                                                        " must be below backward_ms");
      }
    }
    if (has(csv, row, "router_ms")) {
      s.router_fwd_s = num_field(origin, csv, row, "router_ms", 0, false) * 1e-3;
    }
    if (has(csv, row, "peak_memory_gib")) {
      s.peak_bytes = num_field(origin, csv, row, "peak_memory_gib", 0, true) * kGiB;
    }
    out.push_back(s);
  }
  return out;
}

// --- Router statistics -------------------------------------------------------------

std::vector<RouterSample> parse_router_csv(std::string_view text, const std::string& origin) {
  const Csv csv = read_csv(text, origin, {"iteration", "layer", "expert", "tokens"}, {});
  std::map<std::pair<int, int>, std::map<int, double>> groups;
  std::map<std::pair<int, int>, int> first_line;
  for (const Csv::Row& row : csv.rows) {
    const int it = int_field(origin, csv, row, "iteration", 0, 1 << 30);
    const int layer = int_field(origin, csv, row, "layer", 0, 1 << 20);
    const int expert = int_field(origin, csv, row, "expert", 0, 1 << 20);
    const double tokens = num_field(origin, csv, row, "tokens", 0, false);
    auto& g = groups[{it, layer}];
    first_line.emplace(std::make_pair(it, layer), row.line);
    if (!g.emplace(expert, tokens).second) {
      throw InputError(at_line(origin, row.line),
                       "expert " + std::to_string(expert) + " appears twice for iteration " +
                           std::to_string(it) + ", layer " + std::to_string(layer));
    }
  }
  std::vector<RouterSample> out;
  for (const auto& [key, experts] : groups) {
    RouterSample s;
    s.iteration = key.first;
    s.layer = key.second;
    int expect = 0;
    for (const auto& [e, t] : experts) {
      if (e != expect) {
        throw InputError(at_line(origin, first_line[key]),
                         "iteration " + std::to_string(key.first) + ", layer " +
                             std::to_string(key.second) + ": expert " + std::to_string(expect) +
                             " is missing (experts must be 0..E-1)");
      }
      s.tokens.push_back(t);
      ++expect;
    }
    out.push_back(std::move(s));
  }
  const std::size_t experts = out.front().tokens.size();
  for (const RouterSample& s : out) {
    if (s.tokens.size() != experts) {
      throw InputError(origin, "iteration " + std::to_string(s.iteration) + ", layer " +
                                   std::to_string(s.layer) + " has " +
                                   std::to_string(s.tokens.size()) + " experts, others " +
                                   std::to_string(experts));
    }
  }
  return out;
}

// --- Measured runs -------------------------------------------------------------------

std::vector<MeasuredRun> parse_runs_csv(std::string_view text, const std::string& origin) {
  const Csv csv = read_csv(text, origin, {"name", "model", "cluster", "plan", "latency_ms"},
                           {"peak_memory_gib", "global_batch", "seq_len"});
  std::vector<MeasuredRun> out;
  for (const Csv::Row& row : csv.rows) {
    MeasuredRun r;
    r.line = row.line;
    r.name = text_field(origin, csv, row, "name");
    r.model = text_field(origin, csv, row, "model");
    r.cluster = text_field(origin, csv, row, "cluster");
    r.plan = text_field(origin, csv, row, "plan");
    r.latency_s = num_field(origin, csv, row, "latency_ms", 0, true) * 1e-3;
    if (has(csv, row, "peak_memory_gib")) {
      r.peak_bytes = num_field(origin, csv, row, "peak_memory_gib", 0, true) * kGiB;
    }
    if (has(csv, row, "global_batch")) {
      r.global_batch = int_field(origin, csv, row, "global_batch", 1, 1 << 30);
    }
    if (has(csv, row, "seq_len")) r.seq_len = int_field(origin, csv, row, "seq_len", 1, 1 << 22);
    out.push_back(r);
  }
  return out;
}

}  // namespace hapmoe
