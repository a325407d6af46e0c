// Running a sweep (docs/archive.md, "Sweeps"): every case in order,
// committed to the archive as it finishes.
//
// Policy:
// - Spreading: by default a case is one run_search over all ranks (the
//   engine already splits its configurations over ranks and threads,
//   identically for any R x T); dealing whole cases to ranks would leave
//   ranks idle behind the largest case, and the work of a large sweep is
//   inside its cases. --spread cases deals whole cases in rounds of R (each
//   searched alone, the results gathered to rank 0 as bytes) for sweeps of
//   many small cases, where a search's collectives cost more than its work.
//   The results are the same either way; only rank 0 writes.
// - Commit: the archive is rewritten to a temporary name (the finished
//   cases of the previous archive copied with H5Ocopy, the new ones
//   written), fsync'ed and renamed over the old one. So the archive on disk
//   is always a complete, valid file holding every committed case, and a
//   kill at any instant loses at most the cases not yet committed. The
//   rewrite copies the earlier cases each time (quadratic in the archive
//   size); --checkpoint-every bounds how often that happens for sweeps of
//   many large cases.
// - Resume: the cases in the archive (matched by their index and the whole
//   sweep's canonical definition) are skipped; the others run exactly as
//   they would have (a search's results depend only on its inputs), so the
//   final archive equals an uninterrupted run's except for timings and
//   provenance.
// - Signals: SIGTERM or SIGUSR1 set a flag; the case in flight finishes, is
//   committed, and the sweep exits with kExitStopped (4). A second signal
//   abandons the case in flight at once (after a commit in progress, if
//   any), leaving the last committed archive, and says so: rank 0 keeps
//   the line to print ready (stop_line), since a signal handler may only
//   write(2) it.
// - One run per archive: rank 0 holds the archive's lock (ArchiveLock)
//   from before the first search to the end, so a second sweep on the same
//   --out refuses at once instead of both rewriting it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "costmodel/errors.h"
#include "engine/bytes.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "io/archive/archive.h"
#include "io/archive/archive_lock.h"
#include "io/archive/sweep.h"
#include "io/cli/cli.h"
#include "io/cli/fault_hooks.h"
#include "io/cli/progress.h"
#include "io/cli/steps.h"
#include "io/cli/stop_signals.h"
#include "io/cli/sweep_run.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/profile/profile_h5.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

// One case's search: hapmoe's (over the job-wide knobs too when the case
// searches them), brute force, or a baseline's.
struct CaseSearch {
  SearchResult result;
  std::optional<JobVariant> variant;  // the job-wide knobs of the best plan
};
CaseSearch search_case(const SweepCase& c, const Workload& w, const ClusterSpec& cluster,
                       const std::shared_ptr<const MeasuredProfile>& profile, Comm& comm,
                       const RunOptions& run) {
  SearchOptions opt = c.options;
  opt.profile = profile;
  CaseSearch out;
  if (c.job.active()) {
    JobSearchResult job = run_job_search(w, cluster, opt, c.job, comm, run);
    out.result = std::move(job.result);
    out.variant = job.best;
  } else {
    out.result = run_one_search(c.baseline, c.bruteforce, w, cluster, opt, comm, run).result;
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What rank 0 keeps of a finished case until it is committed.
struct Finished {
  std::size_t index = 0;
  int ran_on = -1;  // the world rank that ran it alone (--spread cases); -1: all ranks
  SearchResult result;
  std::optional<JobVariant> variant;  // a case that searched the job-wide knobs: the best's
  Workload workload;                  // the case's, with `variant`'s knobs (rank 0, scored)
  ProfileTables tables;
  std::vector<PlanReport> reports;
  Provenance provenance;
};

// --- A finished case as bytes, for --spread cases ------------------------------
// Every rank runs the same binary on the same machine type, so plain data
// travels as its bytes; what holds vectors or strings is written field by
// field. The profile tables and reports are not sent: rank 0 rebuilds them
// from the inputs and the plans (the same pure functions, the same figures).

std::string encode(const Finished& f) {
  Bytes b;
  b.put(f.index);
  b.put(f.ran_on);
  b.put(encode_result(f.result));
  static_assert(std::is_trivially_copyable_v<JobVariant>);
  b.put(f.variant.has_value());
  if (f.variant) b.put(*f.variant);
  const Provenance& p = f.provenance;
  b.put(p.command_line);
  b.put(p.ranks);
  b.put(p.threads);
  b.put(p.start_time);
  b.put(p.end_time);
  b.put(p.wall_seconds);
  b.put(p.host);
  return b.take();
}

Finished decode(const std::string& data) {
  Finished f;
  Unbytes b(data);
  b.get(f.index);
  b.get(f.ran_on);
  f.result = decode_result(b.get<std::string>());
  bool has_variant = false;
  b.get(has_variant);
  if (has_variant) b.get(f.variant.emplace());
  Provenance& p = f.provenance;
  b.get(p.command_line);
  b.get(p.ranks);
  b.get(p.threads);
  b.get(p.start_time);
  b.get(p.end_time);
  b.get(p.wall_seconds);
  b.get(p.host);
  return f;
}

// The state of the archive on disk, as read on rank 0.
struct Existing {
  std::vector<std::size_t> done;  // case indices
  std::int64_t runs = 0;          // invocations that wrote it
};

Existing read_existing(const std::string& path, const SweepDefinition& def) {
  Existing e;
  const std::string where = "--out " + path;
  try {
    const h5::File f = h5::File::open_read(path);
    const h5::Attributes root = f.attrs();
    if (!root.has("format") || root.get_string("format") != kArchiveFormat ||
        root.get_string("kind") != "sweep") {
      throw InputError(where,
                       "is not a hapmoe sweep archive; --resume needs the archive of the "
                       "same sweep");
    }
    const h5::Group s = f.open_group("sweep");
    if (s.attrs().get_string("cases") != def.canonical()) {
      throw InputError(where, "holds another sweep (its cases differ from " + def.origin +
                                  "); --resume needs the same sweep file, or use another --out");
    }
    e.runs = s.attrs().get_int("runs");
    const h5::Group cases = f.open_group("cases");
    for (const std::string& n : cases.children()) {
      const h5::Group c = cases.open_group(n);
      // A case a limit stopped is run again (its group is then replaced).
      if (c.attrs().get_string("status") == "stopped") continue;
      e.done.push_back(static_cast<std::size_t>(c.attrs().get_int("index")));
    }
  } catch (const h5::H5Error& x) {
    throw InputError(where, std::string("cannot read the existing archive: ") + x.what());
  }
  return e;
}

// A collective: rank 0's `text` on every rank.
std::string from_root(Comm& comm, const std::string& text) {
  return comm.allgather(comm.rank() == 0 ? text : std::string()).front();
}

class Progress {
 public:
  Progress(std::ostream& err, bool tty, std::size_t total, std::size_t done_before)
      : err_(err),
        tty_(tty),
        total_(total),
        done_(done_before),
        start_(std::chrono::steady_clock::now()) {}

  void case_done(const SweepCase& c, std::int64_t configs, const std::string& best) {
    ++done_;
    ++run_now_;
    configs_ += configs;
    const double elapsed = seconds_since(start_);
    const double rate = elapsed > 0 ? static_cast<double>(configs_) / elapsed : 0.0;
    const double remaining =
        static_cast<double>(total_ - done_) * elapsed / static_cast<double>(run_now_);
    char line[256];
    if (tty_) {
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(kWidth * static_cast<double>(done_) /
                                          static_cast<double>(std::max<std::size_t>(total_, 1)));
      std::string bar(static_cast<std::size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::snprintf(line, sizeof line,
                    "\r[%s] %zu/%zu cases  %.0f configs/s  elapsed %s  remaining ~%s   ",
                    bar.c_str(), done_, total_, rate, duration_text(elapsed).c_str(),
                    duration_text(remaining).c_str());
      err_ << line;
      if (done_ == total_) err_ << "\n";
      err_.flush();
    } else {
      std::snprintf(
          line, sizeof line,
          "hapmoe sweep: %zu/%zu cases, %.0f configs/s, elapsed %s, remaining ~%s: ", done_, total_,
          rate, duration_text(elapsed).c_str(), duration_text(remaining).c_str());
      err_ << line << c.name << ": " << best << "\n";
      err_.flush();
    }
  }
  // A case still running after `seconds` (case `number`, 1-based), where
  // its search stands.
  void case_running(const SweepCase& c, std::size_t number, double seconds,
                    const SearchProgress& search, const std::string& silence) {
    char line[256];
    if (tty_) {
      std::snprintf(line, sizeof line, "\r%zu/%zu cases done, case %zu running for %s   ", done_,
                    total_, number, duration_text(seconds).c_str());
      err_ << line;
    } else {
      std::snprintf(line, sizeof line,
                    "hapmoe sweep: case %zu/%zu running for %s, elapsed %s: ", number, total_,
                    duration_text(seconds).c_str(), duration_text(seconds_since(start_)).c_str());
      err_ << line << c.name << ": " << progress_text(search) << silence << "\n";
    }
    err_.flush();
  }
  // Ends a live bar before other output.
  void interrupt() {
    if (tty_ && done_ != total_) err_ << "\n";
  }

 private:
  std::ostream& err_;
  bool tty_;
  std::size_t total_;
  std::size_t done_;
  std::size_t run_now_ = 0;
  std::int64_t configs_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// What a sweep runs on: the definition, every case's resolved inputs, the
// profile, and (rank 0) what the archive on disk already holds.
struct SweepInputs {
  SweepDefinition def;
  std::vector<Workload> workloads;
  std::vector<ClusterSpec> clusters;
  std::shared_ptr<const MeasuredProfile> profile;  // --profile
  Existing existing;
  bool archive_exists = false;
  std::optional<ArchiveLock> lock;  // rank 0: held to the end of the sweep
  // What reading each model file approximated (docs/models.md), by model.
  std::map<std::string, std::vector<std::string>> model_notes;
};

// 1. The sweep, the archive and every case's inputs, checked before any
// search; a failure on any rank is every rank's.
SweepInputs read_sweep_inputs(const SweepRunOptions& o, Comm& comm) {
  SweepInputs in;
  read_on_every_rank(comm, [&] {
    install_sweep_crash_hook();
    in.def = load_sweep(o.sweep_path);
    if (comm.rank() == 0) {
      // The archive is none of the sweep's inputs: the sweep file, the
      // profile, the cases' model and cluster files (each named once).
      std::vector<NamedPath> inputs = {{"--sweep", o.sweep_path}, {"--profile", o.profile_path}};
      std::set<std::string> named;
      for (std::size_t i = 0; i < in.def.cases.size(); ++i) {
        const SweepCase& c = in.def.cases[i];
        for (const auto& [what, path] : {std::pair{"model", &c.model}, {"cluster", &c.cluster}}) {
          if (named.insert(*path).second) {
            inputs.push_back({o.sweep_path + " case " + std::to_string(i) + " " + what, *path});
          }
        }
      }
      refuse_outputs_over_inputs({{"--out", o.out}}, inputs);
      std::error_code ec;
      check_archive_path(o.out);
      in.lock.emplace(o.out);
      in.archive_exists = std::filesystem::exists(o.out, ec);
      if (in.archive_exists && !o.resume) {
        throw InputError("--out " + o.out,
                         "exists; pass --resume to finish that sweep, or remove it first");
      }
      if (in.archive_exists) in.existing = read_existing(o.out, in.def);
      remove_stale_temporaries(o.out);
    }
    if (!o.profile_path.empty()) {
      in.profile = std::make_shared<const MeasuredProfile>(read_profile(o.profile_path));
    }
    for (std::size_t i = 0; i < in.def.cases.size(); ++i) {
      const SweepCase& c = in.def.cases[i];
      try {
        std::vector<std::string> notes;
        Workload w = load_workload(c.model, &notes);
        if (!notes.empty()) in.model_notes[c.model] = notes;
        TrainingOverrides ov = c.overrides;
        // rho measured for this model, unless the case sets its imbalance.
        if (in.profile && !ov.imbalance) {
          const double rho = profile_imbalance(*in.profile, w.model.name);
          if (is_set(rho)) ov.imbalance = rho;
        }
        apply_overrides(ov, w);
        ClusterSpec cluster = load_cluster(c.cluster);
        if (const std::string e = check_precision(w, cluster); !e.empty()) {
          throw InputError("precision", e);
        }
        if (const std::string e = check_offload(w, cluster); !e.empty()) {
          throw InputError("cluster", e);
        }
        in.workloads.push_back(std::move(w));
        in.clusters.push_back(std::move(cluster));
      } catch (const InputError& e) {
        throw InputError(o.sweep_path + ": case " + std::to_string(i) + " (" + c.name + ")",
                         e.what());
      }
    }
  });
  return in;
}

// 2. Which cases are done: rank 0 read the archive, every rank learns it
// (and whether the archive exists).
std::vector<bool> cases_done(Comm& comm, SweepInputs& in) {
  std::vector<bool> done(in.def.cases.size(), false);
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i : in.existing.done) list.push_back(i);
  list.push_back(in.archive_exists ? 1 : 0);
  const nlohmann::json got = nlohmann::json::parse(from_root(comm, list.dump()));
  in.archive_exists = got.back().get<int>() != 0;
  for (std::size_t k = 0; k + 1 < got.size(); ++k) {
    const auto i = got[k].get<std::size_t>();
    if (i < done.size()) done[i] = true;
  }
  return done;
}

// The archive's record of one finished case.
void write_case(const h5::Group& cases, const SweepRunOptions& o, const SweepInputs& in,
                const Finished& fin) {
  const SweepCase& c = in.def.cases[fin.index];
  const h5::Group g = cases.create_group(case_group_name(fin.index, in.def.cases.size()));
  const h5::Attributes a = g.attrs();
  a.set("name", c.name);
  a.set("index", static_cast<std::int64_t>(fin.index));
  a.set("case", c.resolved.dump());
  a.set("status", fin.result.stopped != StopReason::kNone ? "stopped"
                  : c.options.count_only                  ? "counted"
                  : fin.reports.empty()                   ? "no_fit"
                                                          : "ok");
  a.set("ran_on_rank", fin.ran_on);
  write_provenance(g, fin.provenance);
  ArchiveInputs ai;
  ai.model_given = c.model;
  ai.model_file_text = given_file_text(c.model);
  ai.cluster_given = c.cluster;
  ai.cluster_file_text = given_file_text(c.cluster);
  ai.options_given = c.resolved;
  ai.options_resolved = c.resolved;
  ai.options_resolved["threads"] = o.threads;
  if (in.profile) ai.options_resolved["profile"] = o.profile_path;
  ai.workload = &fin.workload;
  ai.cluster = &in.clusters[fin.index];
  ai.tables = &fin.tables;
  write_run(g, ai, fin.reports, &fin.result);
}

// What a second signal prints: how many cases the archive holds (or that
// there is none yet) and how to go on.
std::string stop_line(const SweepRunOptions& o, const SweepInputs& in, std::size_t committed) {
  std::string s = o.tty ? "\n" : "";
  s += "hapmoe sweep: stopped by a second SIGTERM/SIGUSR1, the case in flight abandoned: ";
  if (in.archive_exists) {
    s += std::to_string(committed) + " of " + std::to_string(in.def.cases.size()) +
         " cases committed to " + o.out + "; run again with --resume to finish";
  } else {
    s += "no case committed yet, no archive written (" + o.out +
         "); run again with --resume to start";
  }
  return s + " (exit code " + std::to_string(kExitStopped) + ")\n";
}

// 3a. Rank 0 rewrites the archive with the committed cases and `pending`
// (docs/archive.md, "Sweeps"); every rank agrees on the outcome. A second
// signal during the commit exits after it, on every rank: the other ranks
// wait for rank 0's write here, and one that left at once would have the
// launcher (mpiexec) kill rank 0 in the middle of it, losing the commit and
// the line.
void commit(const SweepRunOptions& o, SweepInputs& in, std::vector<Finished>& pending,
            const Provenance& run, std::size_t done_count, Comm& comm) {
  std::string bad;
  const std::size_t total = in.def.cases.size();
  CommitScope committing;
  if (comm.rank() == 0 && !pending.empty()) {
    try {
      write_archive_atomic(o.out, [&](h5::File& f) {
        write_header(f, "sweep");
        write_provenance(f, run);
        {
          const h5::Group s = f.create_group("sweep");
          const h5::Attributes a = s.attrs();
          a.set("file", in.def.origin);
          a.set("text", in.def.text);
          a.set("cases", in.def.canonical());
          a.set("cases_total", static_cast<std::int64_t>(total));
          a.set("cases_done", static_cast<std::int64_t>(done_count));
          a.set("complete", done_count == total ? 1 : 0);
          a.set("runs", in.existing.runs + 1);
        }
        const h5::Group cases = f.create_group("cases");
        if (in.archive_exists) {
          const h5::File old = h5::File::open_read(o.out);
          const h5::Group old_cases = old.open_group("cases");
          std::set<std::string> replaced;
          for (const Finished& fin : pending) replaced.insert(case_group_name(fin.index, total));
          for (const std::string& n : old_cases.children()) {
            if (replaced.count(n) == 0) cases.copy_from(old_cases, n, n);
          }
        }
        for (const Finished& fin : pending) write_case(cases, o, in, fin);
      });
      in.archive_exists = true;
      set_stop_line(stop_line(o, in, done_count));
    } catch (const InputError& e) {
      bad = e.what();
    } catch (const std::exception& e) {  // any: the other ranks are waiting below
      bad = "--out " + o.out + ": " + e.what();
    }
  }
  pending.clear();
  const std::string first = first_error(comm, bad);
  if (!first.empty()) throw InputError("", first);
  committing.done();
}

// 3b. One round of cases: case `i` over all ranks, or (by_case) each rank
// its own case, alone. Rank 0 returns the round's finished cases (its own
// first); the other ranks return none. A failure on any rank is every
// rank's.
std::vector<Finished> run_round(const SweepRunOptions& o, const SweepInputs& in,
                                const std::vector<std::size_t>& todo, std::size_t start,
                                std::size_t in_round, bool by_case, std::size_t number,
                                Progress& progress, Comm& comm) {
  const auto me = static_cast<std::size_t>(comm.rank());
  const bool runs = !by_case || me < in_round;
  const std::size_t i = todo[start + (by_case && runs ? me : 0)];
  const SweepCase& c = in.def.cases[i];
  Finished fin;
  fin.index = i;
  std::string failure;
  // The round's searches and gather: a rank that stops answering ends the
  // job after the time limit and a grace.
  const WatchdogScope watchdog(comm, search_watchdog(o.limits, comm, "sweep", *o.alarm));
  stop_if_injected(comm);
  if (runs) {
    const Started case_started;
    RunOptions run;
    run.threads = o.threads;
    run.round = c.round;
    run.limits = o.limits;
    SearchProgress search;
    run.progress = &search;
    const double every = comm.rank() != 0 ? 0.0
                         : o.tty          ? std::min(o.progress_s, 1.0)
                                          : o.progress_s;
    {
      const Heartbeat beat(every, [&](double s) {
        progress.case_running(c, number, s, search, silence_text(comm.waiting()));
      });
      if (by_case) {
        // Alone: a failure must still reach the gather below.
        SerialComm alone;
        try {
          CaseSearch found =
              search_case(c, in.workloads[i], in.clusters[i], in.profile, alone, run);
          fin.result = std::move(found.result);
          fin.variant = found.variant;
        } catch (const std::exception& e) {
          failure = "rank " + std::to_string(me) + ": case " + std::to_string(i) + " (" + c.name +
                    "): " + e.what();
        }
        fin.ran_on = comm.rank();
      } else {
        CaseSearch found = search_case(c, in.workloads[i], in.clusters[i], in.profile, comm, run);
        fin.result = std::move(found.result);
        fin.variant = found.variant;
      }
    }
    fin.provenance =
        provenance_since(case_started, o.command_line, by_case ? 1 : comm.size(), o.threads);
  }
  std::vector<Finished> round;
  if (by_case) {
    const std::vector<std::string> all = comm.allgather(!failure.empty() ? "E" + failure
                                                        : runs           ? "C" + encode(fin)
                                                                         : std::string());
    for (const std::string& b : all) {
      if (!b.empty() && b[0] == 'E') throw SearchFailure(b.substr(1));
    }
    if (comm.rank() == 0) {
      round.push_back(std::move(fin));  // rank 0 always runs the round's first case
      for (std::size_t r = 1; r < in_round; ++r) round.push_back(decode(all[r].substr(1)));
    }
  } else if (comm.rank() == 0) {
    round.push_back(std::move(fin));
  }
  return round;
}

// 3c. Rank 0 alone rebuilds the tables and reports of the round's cases,
// reports each on the progress stream and moves it to `pending`; a failure
// there is agreed on, so no rank waits at the next collective for one that
// left. Returns how many cases of the round a limit stopped, on every rank.
std::size_t score_round(const SweepInputs& in, std::vector<Finished>& round,
                        std::vector<Finished>& pending, Progress& progress, Comm& comm) {
  std::string bad;
  std::size_t limited = 0;
  try {
    for (Finished& f : round) {  // rank 0 only
      const std::size_t k = f.index;
      f.workload = f.variant ? apply(in.workloads[k], *f.variant) : in.workloads[k];
      Scored scored = score(f.workload, in.clusters[k], f.result, in.profile.get());
      f.tables = std::move(scored.tables);
      f.reports = std::move(scored.reports);
      std::string best =
          in.def.cases[k].options.count_only
              ? "counted: " + std::to_string(f.result.stats.transitions) + " transitions"
          : f.reports.empty() ? "no plan fits"
                              : format_seconds(f.reports.front().latency_s);
      if (f.variant && !f.reports.empty()) {
        best += " (" + to_string(*f.variant, f.workload.model.is_moe()) + ")";
      }
      if (f.result.stopped != StopReason::kNone) {
        ++limited;
        best = (f.reports.empty() ? std::string("no plan found") : best) + ", stopped by the " +
               to_string(f.result.stopped) + ": not proven optimal";
      }
      progress.case_done(in.def.cases[k], f.result.stats.configs, best);
      pending.push_back(std::move(f));
    }
  } catch (const std::exception& e) {
    bad = e.what();
  }
  if (const std::string first = first_error(comm, bad); !first.empty()) {
    throw SearchFailure(first);
  }
  return std::stoul(from_root(comm, std::to_string(limited)));
}

// 4. Rank 0's closing lines: why the sweep stopped, or the archive's
// summary.
void print_sweep_end(std::ostream& out, std::ostream& err, const SweepRunOptions& o,
                     const SweepInputs& in, Progress& progress, std::size_t done_count,
                     bool limit_hit, bool stopped) {
  const std::size_t total = in.def.cases.size();
  if (limit_hit) {
    progress.interrupt();
    err << "hapmoe sweep: a limit (--time-limit or --max-memory) stopped the search: the case "
           "in flight is committed with status \"stopped\" (its best plan so far, not proven "
           "optimal); "
        << done_count << " of " << total << " cases done in " << o.out
        << "; run again with --resume to finish (exit code " << kExitLimit << ")\n";
  } else if (stopped) {
    progress.interrupt();
    err << "hapmoe sweep: stopped by SIGTERM/SIGUSR1: " << done_count << " of " << total
        << " cases committed to " << o.out << "; run again with --resume to finish (exit code "
        << kExitStopped << ")\n";
  } else if (in.archive_exists) {
    print_archive_summary(out, o.out);
  }
}

}  // namespace

int run_sweep(const SweepRunOptions& o, std::ostream& out, std::ostream& err, Comm& comm) {
  const Started started;
  StopSignals signals;
  if (comm.rank() == 0) {
    set_stop_line(
        "hapmoe sweep: stopped by a second SIGTERM/SIGUSR1 while reading its inputs: "
        "nothing searched, " +
        o.out + " not written; run again with --resume to start (exit code " +
        std::to_string(kExitStopped) + ")\n");
  }
  SweepInputs in = read_sweep_inputs(o, comm);
  const std::vector<bool> done = cases_done(comm, in);
  const std::size_t total = in.def.cases.size();
  std::size_t done_count = static_cast<std::size_t>(std::count(done.begin(), done.end(), true));
  if (comm.rank() == 0) {
    for (const auto& [model, notes] : in.model_notes) {
      for (const std::string& n : notes) out << "note: " << model << ": " << n << "\n";
    }
    if (!in.model_notes.empty()) out << "\n";
    out.flush();
  }
  if (comm.rank() == 0) {
    set_stop_line(stop_line(o, in, done_count));
    warn_if_unlocked(err, in.lock, "sweep");
  }
  if (comm.rank() == 0 && done_count > 0) {
    err << "hapmoe sweep: resuming " << o.out << ": " << done_count << " of " << total
        << " cases already done\n";
  }

  // 3. The cases, committed as they finish. Rounds: one case over all
  // ranks, or (--spread cases) one case per rank, each alone, gathered to
  // rank 0.
  Progress progress(err, o.tty, total, done_count);
  std::vector<Finished> pending;
  auto last_commit = std::chrono::steady_clock::now();
  const auto commit_now = [&] {
    commit(o, in, pending, provenance_since(started, o.command_line, comm.size(), o.threads),
           done_count, comm);
    last_commit = std::chrono::steady_clock::now();
  };
  bool stopped = false;
  bool limit_hit = false;
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < total; ++i) {
    if (!done[i]) todo.push_back(i);
  }
  const bool by_case = o.spread_cases && comm.size() > 1;
  const std::size_t per_round = by_case ? static_cast<std::size_t>(comm.size()) : 1;
  for (std::size_t start = 0; start < todo.size(); start += per_round) {
    const std::size_t in_round = std::min(per_round, todo.size() - start);
    std::vector<Finished> round =
        run_round(o, in, todo, start, in_round, by_case, done_count + 1, progress, comm);
    // A case a limit stopped is committed but not done (--resume runs it
    // again); the deadline has passed for the next cases too, so the sweep
    // ends here. Rank 0 counted them.
    const std::size_t limited = score_round(in, round, pending, progress, comm);
    done_count += in_round - limited;
    // Every rank takes the same decisions: rank 0's clock decides when a
    // commit is due, and the stop flag is agreed on after the commit (a
    // signal during a commit stops before the next round).
    const bool due = o.checkpoint_s <= 0 || seconds_since(last_commit) >= o.checkpoint_s;
    if (done_count == total || limited > 0 ||
        !from_root(comm, comm.rank() == 0 && due ? "1" : "").empty()) {
      commit_now();
    }
    if (limited > 0) {
      limit_hit = true;
      break;
    }
    stopped = !first_error(comm, g_stop_signal != 0 ? "stop" : "").empty();
    if (stopped) commit_now();  // what --checkpoint-every held back
    if (stopped) break;
  }

  if (stopped && done_count == total) stopped = false;  // nothing left to requeue
  if (comm.rank() == 0) {
    print_sweep_end(out, err, o, in, progress, done_count, limit_hit, stopped);
  }
  return limit_hit ? kExitLimit : stopped ? kExitStopped : kExitOk;
}

}  // namespace hapmoe
