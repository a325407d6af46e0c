// Progress lines while a long search or sweep runs: a thread that wakes at
// a fixed period, and the text of a search's progress.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

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
// here; best 4.198186 s so far".
std::string progress_text(const SearchProgress& p);

}  // namespace hapmoe
