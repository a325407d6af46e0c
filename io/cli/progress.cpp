#include "io/cli/progress.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "io/cli/cli.h"
#include "io/report/report.h"

namespace hapmoe {

Heartbeat::Heartbeat(double every_s, std::function<void(double)> beat) {
  if (!(every_s > 0)) return;
  thread_ = std::thread([this, every_s, beat = std::move(beat)] {
    const auto start = std::chrono::steady_clock::now();
    const auto period = std::chrono::duration<double>(every_s);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
      beat(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
}

Heartbeat::~Heartbeat() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

std::string duration_text(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) / 60 % 60);
  }
  return buf;
}

namespace {

// The search of one variant (or the only search): where it stands, and
// with `best`, its best plan so far.
std::string search_text(const SearchProgress& p, bool best_too) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const auto configs = static_cast<long long>(p.configs.load(kRelaxed));
  char buf[256];
  switch (p.phase.load(kRelaxed)) {
    case SearchProgress::kStarting:
      return "enumerating the configurations";
    case SearchProgress::kBounds:
      std::snprintf(buf, sizeof buf, "bounds and work estimates of %lld configurations", configs);
      return buf;
    case SearchProgress::kDone:
      return "search done, reporting";
    default:
      break;
  }
  std::snprintf(buf, sizeof buf,
                "searching: round %lld, %lld of %lld configurations settled (%lld searched), "
                "%lld of this node's %lld units of the round begun here",
                static_cast<long long>(p.rounds.load(kRelaxed)),
                static_cast<long long>(p.settled.load(kRelaxed)), configs,
                static_cast<long long>(p.searched.load(kRelaxed)),
                static_cast<long long>(p.round_claimed.load(kRelaxed)),
                static_cast<long long>(p.round_units.load(kRelaxed)));
  std::string text = buf;
  if (const double total = p.work_total.load(kRelaxed); total > 0) {
    std::snprintf(buf, sizeof buf, "; %.1f %% of the estimated work committed",
                  100.0 * p.work_done.load(kRelaxed) / total);
    text += buf;
  }
  if (!best_too) return text;
  const double best = p.best.load(kRelaxed);
  text += std::isfinite(best) ? "; best " + format_seconds(best) + " so far" : "; no plan yet";
  return text;
}

}  // namespace

std::string progress_text(const SearchProgress& p) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const std::int64_t steps = p.job_steps.load(kRelaxed);
  if (steps == 0) return search_text(p, true);
  // The job-wide knobs: the job's best, then the variant's search.
  char buf[160];
  std::snprintf(buf, sizeof buf, "job-wide knobs: %lld variants begun, %lld of %lld steps done",
                static_cast<long long>(p.variants.load(kRelaxed)),
                static_cast<long long>(p.job_steps_done.load(kRelaxed)),
                static_cast<long long>(steps));
  const double best = p.job_best.load(kRelaxed);
  return buf +
         (std::isfinite(best) ? "; best " + format_seconds(best) + " so far" : "; no plan yet") +
         "; this variant: " + search_text(p, false);
}

Watchdog search_watchdog(const SearchLimits& limits, const Comm& comm, const std::string& command,
                         std::ostream& alarm) {
  Watchdog w;
  if (limits.deadline == std::chrono::steady_clock::time_point::max()) return w;
  w.give_up = limits.deadline + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(kWatchdogGraceS));
  w.exit_code = kExitNoAnswer;
  w.say = [&alarm, command, me = comm.rank(), deadline = limits.deadline](int first, int silent,
                                                                          double waited) {
    const double late =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - deadline).count();
    std::string text = "hapmoe " + command + ": error: ";
    if (me != 0) text += "rank " + std::to_string(me) + ": ";
    text += first < 0 ? std::string("a rank") : "rank " + std::to_string(first);
    if (silent > 1) text += " (and " + std::to_string(silent - 1) + " more)";
    text += " did not answer: waited " + duration_text(waited) + " for it, " + duration_text(late) +
            " after --time-limit ran out (a stopped or stuck process?); " +
            "ending the job (exit code " + std::to_string(kExitNoAnswer) + ")";
    alarm << text + "\n" << std::flush;  // one write: MPI_Abort follows at once
  };
  return w;
}

std::string silence_text(const CollectiveWait& w) {
  if (w.seconds < kSilentAfterS || w.first_silent < 0) return {};
  std::string text = "; rank " + std::to_string(w.first_silent);
  if (w.silent > 1) text += " (and " + std::to_string(w.silent - 1) + " more)";
  return text + " has not answered for " + duration_text(w.seconds);
}

}  // namespace hapmoe
