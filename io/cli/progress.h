// Progress lines while a long search or sweep runs: a thread that wakes at
// a fixed period, and the text of a search's progress.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "engine/comm.h"
#include "engine/driver.h"

namespace hapmoe {

// Calls `beat(seconds since start)` every `every_s` seconds from a thread
// of its own until destroyed (never if every_s <= 0). Only that thread
// should write to the progress stream meanwhile.
class Heartbeat {
 public:
  Heartbeat(double every_s, std::function<void(double)> beat);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// "12.3 s", "4m05s", "2h13m".
std::string duration_text(double seconds);

// Where `p` stands, e.g. "searching: round 3, 96 of 603873 configurations
// settled (64 searched), 12 of this node's 32 units of the round begun
// here; best 4.198186 s so far"; for the job-wide knobs, "job-wide knobs:
// 37 variants begun, 12 of 96 steps done; best 6.624 s so far; this
// variant: searching: ..." (its variant's search without its own best).
std::string progress_text(const SearchProgress& p);

// How long after --time-limit the watchdog waits for a rank that does not
// answer before it ends the job (docs/parallel.md).
inline constexpr double kWatchdogGraceS = 15;
// Rank 0 waiting this long in one collective makes a progress line say who
// has not answered.
inline constexpr double kSilentAfterS = 10;

// The watchdog of a search under `limits` (disarmed without a time
// limit): it writes one line to `alarm` ("hapmoe <command>: error: rank 2
// did not answer ...") and ends the job with kExitNoAnswer.
Watchdog search_watchdog(const SearchLimits& limits, const Comm& comm, const std::string& command,
                         std::ostream& alarm);

// "; rank 2 has not answered for 35.0 s" once rank 0 has waited
// kSilentAfterS in one collective; else "".
std::string silence_text(const CollectiveWait& w);

}  // namespace hapmoe
