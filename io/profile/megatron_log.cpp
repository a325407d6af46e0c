#include "io/profile/megatron_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/profile/profile_parse.h"

namespace hapmoe {

namespace {

std::optional<double> number(std::string_view text) {
  const std::string s(trim(text));
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

// The "key: value" fields of a '|'-separated line, trimmed (a field
// without a colon is skipped; the last colon splits).
std::vector<std::pair<std::string_view, std::string_view>> fields(std::string_view rest) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  while (!rest.empty()) {
    const std::size_t bar = std::min(rest.find('|'), rest.size());
    const std::string_view field = trim(rest.substr(0, bar));
    rest.remove_prefix(std::min(bar + 1, rest.size()));
    const std::size_t colon = field.rfind(':');
    if (colon != std::string_view::npos) {
      out.emplace_back(trim(field.substr(0, colon)), trim(field.substr(colon + 1)));
    }
  }
  return out;
}

// "name .......: value" -> (name, value), the dots of ljust removed.
bool timer_line(std::string_view line, std::string& name, std::string_view& value) {
  const std::size_t colon = line.rfind(": ");
  if (colon == std::string_view::npos) return false;
  std::string_view left = trim(line.substr(0, colon));
  while (!left.empty() && left.back() == '.') left.remove_suffix(1);
  left = trim(left);
  if (left.empty() || left.find(' ') != std::string_view::npos) return false;
  name = std::string(left);
  value = trim(line.substr(colon + 2));
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double MegatronLog::seconds_per_iteration() const {
  std::vector<double> ms;
  for (std::size_t i = intervals.size() > 1 ? 1 : 0; i < intervals.size(); ++i) {
    ms.push_back(intervals[i].ms_per_iteration);
  }
  return median(std::move(ms)) / 1000.0;
}

double MegatronLog::peak_allocated_bytes() const {
  double mb = 0;
  for (const MegatronLogMemory& m : memory) mb = std::max(mb, m.max_allocated_mb);
  return mb * 1024.0 * 1024.0;
}

std::vector<std::pair<std::string, double>> MegatronLog::timer_medians() const {
  std::vector<std::pair<std::string, std::vector<double>>> seen;
  for (std::size_t i = intervals.size() > 1 ? 1 : 0; i < intervals.size(); ++i) {
    for (const MegatronLogInterval::Timer& t : intervals[i].timers) {
      auto it =
          std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == t.name; });
      if (it == seen.end()) it = seen.insert(seen.end(), {t.name, {}});
      it->second.push_back(t.max_ms / 1000.0);
    }
  }
  std::vector<std::pair<std::string, double>> out;
  out.reserve(seen.size());
  for (auto& [name, v] : seen) out.emplace_back(name, median(std::move(v)));
  return out;
}

MegatronLog parse_megatron_log(std::string_view text, const std::string& origin) {
  MegatronLog log;
  bool in_timers = false;
  int n = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view raw = text.substr(at, eol - at);
    at = eol + 1;
    ++n;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string_view line = trim(strip_launcher(raw).text);
    const std::string where = origin + ":" + std::to_string(n);

    // A timer block: its lines until one that is not a timer.
    if (in_timers) {
      std::string name;
      std::string_view value;
      if (timer_line(line, name, value)) {
        MegatronLogInterval::Timer t;
        t.name = name;
        if (value.starts_with('(') && value.ends_with(')')) {
          const std::string_view pair = value.substr(1, value.size() - 2);
          const std::size_t comma = pair.find(',');
          const auto lo =
              comma == std::string_view::npos ? std::nullopt : number(pair.substr(0, comma));
          const auto hi =
              comma == std::string_view::npos ? std::nullopt : number(pair.substr(comma + 1));
          if (!lo || !hi) {
            throw InputError(where, "timer " + name + ": \"" + std::string(value) +
                                        "\" is not \"(min, max)\" in ms");
          }
          t.min_ms = *lo;
          t.max_ms = *hi;
        } else if (const auto v = number(value)) {
          t.min_ms = t.max_ms = *v;
        } else {
          throw InputError(
              where, "timer " + name + ": \"" + std::string(value) + "\" is not a time in ms");
        }
        if (!log.intervals.empty()) log.intervals.back().timers.push_back(t);
        continue;
      }
      in_timers = false;
    }
    if (line.find("time across ranks (ms):") != std::string_view::npos) {
      in_timers = true;
      continue;
    }

    // The iteration line.
    std::size_t it = line.find("iteration ");
    while (it != std::string_view::npos && it > 0 && line[it - 1] != ' ' && line[it - 1] != ']') {
      it = line.find("iteration ", it + 1);
    }
    const std::size_t elapsed = line.find("elapsed time per iteration (ms):");
    if (it != std::string_view::npos && elapsed != std::string_view::npos) {
      MegatronLogInterval iv;
      iv.line = n;
      const std::string_view head = line.substr(it + 10, line.find('|', it) - it - 10);
      const std::size_t slash = head.find('/');
      const auto done = number(head.substr(0, slash));
      const auto total =
          slash == std::string_view::npos ? std::nullopt : number(head.substr(slash + 1));
      if (!done || !total || *done < 0 || *total < 0) {
        throw InputError(where,
                         "iteration \"" + std::string(trim(head)) + "\" is not \"N/ TRAIN_ITERS\"");
      }
      iv.iteration = static_cast<int>(*done);
      iv.train_iters = static_cast<int>(*total);
      bool have_time = false;
      for (const auto& [key_view, value] : fields(line.substr(line.find('|', it) + 1))) {
        const std::string key(key_view);
        const auto v = number(value);
        if (key == "elapsed time per iteration (ms)") {
          if (!v || !(*v > 0) || !std::isfinite(*v)) {
            throw InputError(where, "elapsed time per iteration (ms): \"" + std::string(value) +
                                        "\" is not a positive number");
          }
          iv.ms_per_iteration = *v;
          have_time = true;
        } else if (key == "throughput per GPU (TFLOP/s/GPU)") {
          if (v && std::isfinite(*v)) iv.tflops_per_gpu = *v;
        } else if (key == "global batch size") {
          if (v && *v >= 1) iv.global_batch = static_cast<int>(*v);
        } else if (v && std::isfinite(*v)) {
          iv.values[key] = *v;
        }
      }
      if (have_time) log.intervals.push_back(std::move(iv));
      continue;
    }

    // report_memory.
    const std::size_t mem = line.find("memory (MB) | allocated:");
    if (line.starts_with("[Rank ") && mem != std::string_view::npos) {
      MegatronLogMemory m;
      m.line = n;
      const auto rank = number(line.substr(6, line.find(']') - 6));
      if (rank) m.rank = static_cast<int>(*rank);
      for (const auto& [key, value] : fields(line.substr(mem + 12))) {
        const auto v = number(value);
        if (!v || *v < 0) {
          throw InputError(where, "memory (MB) " + std::string(key) + ": \"" + std::string(value) +
                                      "\" is not a size in MB");
        }
        if (key == "allocated") m.allocated_mb = *v;
        if (key == "max allocated") m.max_allocated_mb = *v;
        if (key == "reserved") m.reserved_mb = *v;
        if (key == "max reserved") m.max_reserved_mb = *v;
      }
      log.memory.push_back(m);
      continue;
    }

    // Megatron's theoretical estimate.
    const std::size_t theo = line.find("Theoretical memory footprints:");
    const std::size_t total = line.find("total=");
    if (theo != std::string_view::npos && total != std::string_view::npos) {
      const std::string_view value = line.substr(total + 6);
      if (const auto v = number(value.substr(0, value.find("MB")))) log.theoretical_total_mb = *v;
    }
  }
  log.lines = n;
  if (log.intervals.empty()) {
    throw InputError(origin,
                     "no \"iteration N/ M | ... | elapsed time per iteration (ms): T\" line: not "
                     "a Megatron-LM training log, or the run stopped before its first "
                     "--log-interval");
  }
  return log;
}

std::optional<double> megatron_timer_term(const std::string& name, const PlanReport& rep) {
  const IterationBreakdown& b = rep.breakdown;
  const double grad_sync = b.dp_sync_s - b.dp_gather_s;
  const int m = rep.num_microbatches;
  auto busiest = [&](bool forward) {
    double most = 0;
    for (const StageReport& st : rep.stages) {
      const StageCost& c = st.cost;
      most = std::max(most, forward ? c.fwd_s - c.p2p_fwd_s : c.bwd_s - c.p2p_bwd_s);
    }
    return m * most;
  };
  if (name == "forward-backward") return b.edge_s + b.middle_s + grad_sync;
  if (name == "all-grads-sync") return grad_sync;
  if (name == "optimizer") return b.optimizer_s + b.dp_gather_s;
  if (name == "params-all-gather") return b.dp_gather_s;
  if (name == "forward-compute") return busiest(true);
  if (name == "backward-compute") return busiest(false);
  return std::nullopt;
}

}  // namespace hapmoe
