// Which values of a plan came from a measured profile and which from the
// catalog (docs/profile.md): the profile's part of plan's and evaluate's
// output.
#include "io/cli/plan_sources.h"

#include <set>
#include <string>
#include <vector>

#include "engine/driver.h"
#include "io/report/report.h"

namespace hapmoe {

PlanSources plan_sources(const PlanReport& report, const Workload& w, const ClusterSpec& cluster,
                         const ProfileTables& tables, const ProfileSources& src) {
  PlanSources s;
  const ParallelConfig& pi = report.plan.parallel;
  std::set<int> types;
  for (const StageReport& st : report.stages) types.insert(st.device_type);
  auto name = [&](int h) { return cluster.pools[static_cast<std::size_t>(h)].device.name; };
  for (const int h : types) {
    for (const ComputeSource& c : src.compute) {
      if (c.type != h || c.tp != pi.tp || c.cp != pi.cp) continue;
      const std::string what =
          "compute " + name(h) + " TP=" + std::to_string(c.tp) + " CP=" + std::to_string(c.cp);
      if (c.kind == ComputeSource::kMeasured) {
        s.measured.push_back(what);
      } else if (c.kind == ComputeSource::kScaledMicroBatch) {
        s.outside.push_back(what + ": scaled from micro-batch " +
                            std::to_string(c.measured_micro_batch) + " to " +
                            std::to_string(pi.micro_batch));
      } else {
        s.catalog.push_back(what);
      }
    }
    for (const CoefficientSource& c : src.devices) {
      if (c.type != h) continue;
      (c.eta ? s.measured : s.catalog).push_back("eta " + name(h));
      (c.router ? s.measured : s.catalog).push_back("router " + name(h));
      (c.memory ? s.measured : s.catalog).push_back("memory calibration " + name(h));
    }
  }
  if (w.model.is_moe()) (src.imbalance ? s.measured : s.catalog).push_back("rho " + w.model.name);
  // Communication: re-evaluate with a lookup log.
  LookupLog log;
  ProfileTables traced = tables;
  traced.comm.set_log(&log);
  (void)CostModel(w, cluster, traced).evaluate(report.plan);
  struct Agg {
    unsigned flags = 0;
    double min_b = 0, max_b = 0;
  };
  std::map<std::string, Agg> agg;
  for (const LookupRecord& rec : log) {
    if (rec.bytes < 1.0) continue;  // the latency probe of the gradient sync (docs/profile.md)
    std::string key = std::string(to_string(rec.prim)) + " " + to_string(rec.link.kind) + " " +
                      name(rec.link.type_a) +
                      (rec.link.kind == LinkKind::kCrossType ? "/" + name(rec.link.type_b) : "") +
                      (rec.prim == Primitive::kP2P ? "" : " world " + std::to_string(rec.world));
    Agg& a = agg[key];
    if (a.flags == 0 && a.min_b == 0) a.min_b = a.max_b = rec.bytes;
    a.flags |= rec.flags;
    a.min_b = std::min(a.min_b, rec.bytes);
    a.max_b = std::max(a.max_b, rec.bytes);
  }
  for (const auto& [key, a] : agg) {
    if ((a.flags & kLookupMeasured) == 0) {
      s.catalog.push_back(key);
      continue;
    }
    std::string why;
    if (a.flags & kLookupWorldScaled)
      why += "world outside the measured ones, scaled from the nearest; ";
    if (a.flags & kLookupAboveBytes)
      why += "above the largest measured size, extrapolated linearly in bytes; ";
    if (a.flags & kLookupBelowBytes)
      why += "below the smallest measured size, clamped to its time; ";
    if (why.empty()) {
      s.measured.push_back(key);
    } else {
      why.resize(why.size() - 2);
      s.outside.push_back(key + " (" + format_bytes(a.min_b) + ".." + format_bytes(a.max_b) +
                          "): " + why);
    }
  }
  return s;
}

void print_plan_sources(std::ostream& out, const PlanSources& s, const std::string& path) {
  out << "\nprofile " << path << ": values of this plan\n";
  auto list = [&](const char* title, const std::vector<std::string>& v) {
    out << "  " << title << " (" << v.size() << ")";
    if (v.empty()) {
      out << ": none\n";
      return;
    }
    out << ":\n";
    for (const auto& x : v) out << "    " << x << "\n";
  };
  list("measured", s.measured);
  list("measured, outside the measured range (extrapolated or clamped)", s.outside);
  list("catalog (no measurement)", s.catalog);
}

nlohmann::ordered_json plan_sources_json(const PlanSources& s, const std::string& path) {
  return {{"file", path},
          {"measured", s.measured},
          {"outside_range", s.outside},
          {"catalog", s.catalog}};
}

}  // namespace hapmoe
