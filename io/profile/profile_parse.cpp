// Measurement-file readers (docs/profile.md). Every number goes through
// from_chars with a range check, so no input can make them throw anything
// but InputError or read out of bounds (they are fuzz targets).
#include "io/profile/profile_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "costmodel/cluster.h"
#include "costmodel/errors.h"
#include "costmodel/text.h"

namespace hapmoe {

namespace {

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

namespace {

// The binaries of nccl-tests and rccl-tests; the first five measure the
// cost model's primitives, the others collectives it does not use.
constexpr const char* kNcclTests[] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                                      "alltoall_perf",   "sendrecv_perf",   "broadcast_perf",
                                      "reduce_perf",     "gather_perf",     "scatter_perf",
                                      "alltoallv_perf",  "hypercube_perf"};
constexpr std::size_t kUsedNcclTests = 5;

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The test `line` names as a word ("./all_reduce_perf -b 8", "# Collective
// test starting: all_gather_perf", ".../all_reduce_perf_mpi"); "" if none,
// or if it names two different ones.
std::string named_test(std::string_view line) {
  std::string found;
  for (const char* t : kNcclTests) {
    const std::string_view name(t);
    for (std::size_t pos = line.find(name); pos != std::string_view::npos;
         pos = line.find(name, pos + 1)) {
      const std::size_t end = pos + name.size();
      const bool starts = pos == 0 || !word_char(line[pos - 1]);
      const bool ends =
          end == line.size() || !word_char(line[end]) || line.substr(end).starts_with("_mpi");
      if (starts && ends) {
        if (!found.empty() && found != name) return "";
        found = name;
        break;
      }
    }
  }
  return found;
}

// A non-negative decimal integer made of digits only (no sign, no spaces).
std::optional<long long> digits(std::string_view s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return to_int(s);
}

// One "# Rank N [Group G] [Pid P] on HOST device D [BUS] NAME" line.
struct RankLine {
  long long rank = 0;
  long long group = 0;
  std::string host;
  std::string device;
};

std::optional<RankLine> read_rank_line(std::string_view s,
                                       const std::vector<std::string_view>& words) {
  const auto r = to_int(words[1]);
  if (!r) return std::nullopt;
  RankLine out;
  out.rank = *r;
  for (std::size_t k = 2; k + 1 < words.size(); ++k) {
    if (words[k] == "Group") out.group = to_int(words[k + 1]).value_or(0);
    if (words[k] == "on" && out.host.empty()) out.host = std::string(words[k + 1]);
    if (words[k] == "device") break;
  }
  const std::size_t dev = s.find(" device ");
  if (dev != std::string_view::npos) {
    const std::size_t bus = s.find(']', dev);
    if (bus != std::string_view::npos) out.device = std::string(trim(s.substr(bus + 1)));
  }
  return out;
}

}  // namespace

Unprefixed strip_launcher(std::string_view line) {
  Unprefixed out{line, -1};
  for (int round = 0; round < 3; ++round) {
    std::string_view t = out.text;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    if (!t.empty() && t.front() == '[') {
      const std::size_t close = t.find(']');
      if (close != std::string_view::npos) {
        const std::string_view inside = t.substr(1, close - 1);
        const std::string_view after = t.substr(close + 1);
        if (after.starts_with("<stdout>:") || after.starts_with("<stderr>:")) {
          const std::size_t comma = inside.rfind(',');
          const auto r =
              digits(comma == std::string_view::npos ? inside : inside.substr(comma + 1));
          out.rank = r ? *r : -1;
          out.text = after.substr(9);
          continue;
        }
        if (const auto r = digits(inside); r && (after.empty() || after.front() == ' ')) {
          out.rank = *r;
          out.text = after;
          continue;
        }
        // torchrun's "[rank7]:" and "[default7]:".
        const std::size_t tag = inside.starts_with("rank")      ? 4
                                : inside.starts_with("default") ? 7
                                                                : 0;
        if (const auto r = tag > 0 ? digits(inside.substr(tag)) : std::nullopt;
            r && after.starts_with(':')) {
          out.rank = *r;
          out.text = after.substr(1);
          continue;
        }
      }
    }
    std::size_t k = 0;
    while (k < t.size() && std::isdigit(static_cast<unsigned char>(t[k]))) ++k;
    if (k > 0 && k < t.size() && t[k] == ':' && (k + 1 == t.size() || t[k + 1] == ' ')) {
      if (const auto r = digits(t.substr(0, k))) {
        out.rank = *r;
        out.text = t.substr(k + 1);
        continue;
      }
    }
    break;
  }
  return out;
}

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

bool nccl_test_unused(const std::string& name) {
  const std::string n = lower(name);
  for (std::size_t k = kUsedNcclTests; k < std::size(kNcclTests); ++k) {
    if (n == kNcclTests[k]) return true;
  }
  return false;
}

std::string catalog_device_name(std::string_view printed) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : printed) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      tokens.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) tokens.push_back(std::move(cur));
  auto has = [&](const char* t) {
    return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
  };
  // The catalog has both A100 parts; only the memory size tells them apart.
  if (has("a100")) {
    if (has("80gb") || has("80g")) return "A100-80GB";
    if (has("40gb") || has("40g")) return "A100-40GB";
    return "";
  }
  std::string found;
  for (std::string t : tokens) {
    if (t.starts_with("ascend") && t.size() > 6) t = t.substr(6);  // "Ascend910B2"
    const DeviceSpec* d = find_device(t);
    if (d == nullptr) continue;
    if (!found.empty() && found != d->name) return "";
    found = d->name;
  }
  return found;
}

std::vector<NcclLog> parse_nccl_tests_logs(std::string_view text, const std::string& origin,
                                           bool in_place) {
  std::vector<NcclLog> logs;
  const auto lines = split_lines(text);

  // What the log said about the next table: its test, its Rank lines.
  std::string next_test;
  std::vector<RankLine> next_ranks;

  // The open table.
  bool open = false;
  NcclLog table;
  std::size_t col_time = 0;
  std::optional<std::size_t> col_busbw;
  std::size_t min_fields = 0;
  long long table_rank = -1;  // the MPI rank that printed its header

  bool in_place_only = false;  // the column-group line above the header
  long long first_rank = -1;   // the MPI rank that printed the first table
  int first_rank_line = 0;     // and where
  int empty_header = 0;        // a table that had no rows
  int stray_row = 0;           // a row outside any table
  std::string_view stray_text;
  int last_closed = -1;  // the table the footer lines after it belong to

  auto close = [&] {
    if (!open) return;
    open = false;
    if (table.rows.empty()) {
      if (empty_header == 0) empty_header = table.header_line;
      last_closed = -1;
      return;
    }
    logs.push_back(std::move(table));
    last_closed = static_cast<int>(logs.size()) - 1;
  };

  auto open_table = [&](const std::vector<std::string_view>& words, int no, long long rank) {
    close();
    std::vector<std::size_t> times, busbws;
    for (std::size_t k = 0; k < words.size(); ++k) {
      if (words[k] == "time" || words[k] == "cputime") times.push_back(k);
      if (words[k] == "busbw") busbws.push_back(k);
    }
    if (times.empty()) {
      throw InputError(at_line(origin, no), "table header without a 'time' column");
    }
    const bool only_in_place = in_place_only && times.size() == 1;
    std::size_t pick = 0;
    if (in_place && !only_in_place) {
      if (times.size() < 2) {
        throw InputError(at_line(origin, no), "no in-place 'time' column in this table");
      }
      pick = 1;
    }
    if (rank >= 0) {
      if (first_rank >= 0 && rank != first_rank) {
        throw InputError(
            at_line(origin, no),
            "this table was printed by MPI rank " + std::to_string(rank) + ", the one at line " +
                std::to_string(first_rank_line) + " by rank " + std::to_string(first_rank) +
                ": every rank ran a test of its own (nccl-tests built without MPI=1 under an MPI "
                "launcher?); an MPI build prints one table, on rank 0");
      }
      first_rank = rank;
      first_rank_line = no;
    }
    table = NcclLog{};
    table.header_line = no;
    table.in_place = in_place || only_in_place;
    table.test = next_test;
    if (!next_ranks.empty()) {
      // The world is the group of the first Rank line (nccl-tests' split
      // mask prints one group per communicator).
      const long long group = next_ranks.front().group;
      std::set<long long> ids;
      std::set<std::string> hosts, devices;
      for (const RankLine& r : next_ranks) {
        if (r.group != group) continue;
        ids.insert(r.rank);
        if (!r.host.empty()) hosts.insert(r.host);
        if (!r.device.empty() && devices.insert(r.device).second) table.devices.push_back(r.device);
      }
      table.ranks = static_cast<int>(ids.size());
      table.nodes = static_cast<int>(hosts.size());
    }
    next_test.clear();
    next_ranks.clear();
    in_place_only = false;
    col_time = times[pick];
    col_busbw.reset();
    for (std::size_t b : busbws) {
      if (b > col_time && (pick + 1 >= times.size() || b < times[pick + 1])) {
        col_busbw = b;
        break;
      }
    }
    min_fields = std::max(col_time, col_busbw.value_or(0)) + 1;
    table_rank = rank;
    open = true;
    last_closed = -1;
  };

  auto read_row = [&](const std::vector<std::string_view>& words, std::string_view line, int no) {
    if (words.size() < min_fields) {
      throw InputError(at_line(origin, no), "expected at least " + std::to_string(min_fields) +
                                                " columns, found " + std::to_string(words.size()) +
                                                ": " + shown(line));
    }
    const auto size = to_double(words[0]);
    const auto time = to_double(words[col_time]);
    if (!size || *size <= 0) {
      throw InputError(at_line(origin, no),
                       "size " + shown(words[0]) + " is not a positive number of bytes");
    }
    if (!time || *time <= 0) {
      throw InputError(at_line(origin, no), "time " + shown(words[col_time]) +
                                                " is not a positive number of microseconds");
    }
    NcclRow row;
    row.bytes = *size;
    row.seconds = *time * 1e-6;
    if (col_busbw) {
      if (const auto bw = to_double(words[*col_busbw])) row.busbw_gbs = *bw;
    }
    row.line = no;
    table.rows.push_back(row);
  };

  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int no = static_cast<int>(i) + 1;
    const Unprefixed u = strip_launcher(lines[i]);
    const std::string_view line = trim(u.text);
    if (line.empty()) continue;
    // NCCL_DEBUG output, interleaved anywhere.
    if (contains(line, "NCCL INFO") || contains(line, "NCCL WARN") || contains(line, "RCCL INFO") ||
        contains(line, "RCCL WARN")) {
      continue;
    }
    if (line.front() == '#') {
      const auto words = split_ws(line.substr(1));
      if (words.empty()) continue;
      if (words.size() >= 2 && words[0] == "size" && words[1] == "count") {
        open_table(words, no, u.rank);
      } else if (words.size() >= 2 && words[0] == "Rank" && contains(line, "device")) {
        close();  // a new run, even without a banner
        in_place_only = false;
        if (auto r = read_rank_line(line, words)) next_ranks.push_back(std::move(*r));
      } else if (words[0] == "nThread" ||
                 (words[0] == "Using" && words.size() >= 2 && words[1] == "devices")) {
        close();  // a new run: its banner, then its Rank lines
        next_ranks.clear();
        in_place_only = false;
      } else if (contains(line, "Collective test concluded")) {
        close();
        if (last_closed >= 0 && logs[static_cast<std::size_t>(last_closed)].test.empty()) {
          logs[static_cast<std::size_t>(last_closed)].test = named_test(line);
        }
      } else if (contains(line, "Out of bounds values") || contains(line, "Avg bus bandwidth")) {
        close();
      } else if (contains(line, "out-of-place") || contains(line, "in-place")) {
        in_place_only = !contains(line, "out-of-place");
      } else {
        if (contains(line, "Collective test starting") || contains(line, "nccl-tests version")) {
          close();
        }
        if (std::string t = named_test(line); !t.empty()) next_test = std::move(t);
      }
      continue;
    }
    const auto words = split_ws(line);
    // A row: a number, then a number (or nothing: a cut row).
    const bool row = to_double(words[0]) && (words.size() == 1 || to_double(words[1]));
    if (row) {
      if (!open) {
        if (stray_row == 0) {
          stray_row = no;
          stray_text = line;
        }
        continue;
      }
      if (u.rank >= 0 && table_rank >= 0 && u.rank != table_rank) {
        throw InputError(at_line(origin, no),
                         "a row printed by MPI rank " + std::to_string(u.rank) +
                             " inside the table of rank " + std::to_string(table_rank) + " (line " +
                             std::to_string(table.header_line) +
                             "): every rank ran a test of its own (nccl-tests built without "
                             "MPI=1 under an MPI launcher?)");
      }
      read_row(words, line, no);
      continue;
    }
    if (line.starts_with("rccl-tests:") || words[0] == "nThread") {
      close();  // rccl-tests' version banner; nccl-tests 1.x's unmarked one
      if (words[0] == "nThread") next_ranks.clear();
    }
    if (std::string t = named_test(line); !t.empty()) next_test = std::move(t);
  }
  close();
  if (logs.empty()) {
    if (empty_header > 0) {
      throw InputError(at_line(origin, empty_header), "the result table has no rows");
    }
    if (stray_row > 0) {
      throw InputError(at_line(origin, stray_row),
                       "a result row " + shown(stray_text) +
                           " without a table header before it (expected '# size count type ...')");
    }
    throw InputError(origin, "no nccl-tests result table (no '# size count type ...' header line)");
  }
  return logs;
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
    // Token counts are integers a double holds exactly: a sum of them
    // stays finite (1e308 tokens once made rho 0 and the fit print nan).
    constexpr double kMaxTokens = 9007199254740992.0;  // 2^53
    if (tokens > kMaxTokens) {
      throw InputError(at_line(origin, row.line),
                       "tokens " + shown(field(csv, row, "tokens")) + " is more than 2^53 tokens");
    }
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
