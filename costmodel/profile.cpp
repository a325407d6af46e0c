// Collective time formulas over the primitive table. Each primitive has the
// bandwidth and per-step latency of the link it runs on; the algorithm
// factors are those of ring (all-reduce, all-gather, reduce-scatter) and
// pairwise-exchange (all-to-all) algorithms, which are bandwidth-optimal for
// large messages (docs/costmodel.md, "Collectives").
#include "costmodel/profile.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "costmodel/errors.h"

namespace hapmoe {

const char* to_string(Primitive p) {
  switch (p) {
    case Primitive::kAllReduce:
      return "all-reduce";
    case Primitive::kAllGather:
      return "all-gather";
    case Primitive::kReduceScatter:
      return "reduce-scatter";
    case Primitive::kAllToAll:
      return "all-to-all";
    case Primitive::kP2P:
      return "p2p";
  }
  return "?";
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::kIntraNode:
      return "intra-node";
    case LinkKind::kInterNode:
      return "inter-node";
    case LinkKind::kCrossType:
      return "cross-type";
  }
  return "?";
}

CommTable::Key CommTable::key(Primitive prim, const Link& link) {
  int a = link.type_a;
  int b = link.kind == LinkKind::kCrossType ? link.type_b : link.type_a;
  if (a > b) std::swap(a, b);
  return {static_cast<int>(prim), static_cast<int>(link.kind), a, b};
}

void CommTable::set(Primitive prim, const Link& link, PrimitiveEntry entry) {
  entries_[key(prim, link)] = entry;
}

const PrimitiveEntry& CommTable::entry(Primitive prim, const Link& link) const {
  const auto it = entries_.find(key(prim, link));
  if (it == entries_.end()) {
    throw ContractError(std::string("CommTable::entry: no ") + to_string(prim) + " entry for " +
                        to_string(link.kind) + " link of types " + std::to_string(link.type_a) +
                        "/" + std::to_string(link.type_b));
  }
  return it->second;
}

namespace {

double formula_time(const PrimitiveEntry& e, Primitive prim, double bytes, int world) {
  const double w = world;
  switch (prim) {
    case Primitive::kAllReduce:
      return 2.0 * (w - 1.0) * e.latency + 2.0 * (w - 1.0) / w * bytes / e.bandwidth;
    case Primitive::kAllGather:
    case Primitive::kReduceScatter:
    case Primitive::kAllToAll:
      return (w - 1.0) * e.latency + (w - 1.0) / w * bytes / e.bandwidth;
    case Primitive::kP2P:
      return e.latency + bytes / e.bandwidth;
  }
  return 0.0;
}

// The bandwidth term's algorithm factor of a primitive over `world` ranks
// (docs/costmodel.md, "Collectives"): how its time scales with the world
// at a fixed per-device buffer.
double algorithm_factor(Primitive prim, double world) {
  switch (prim) {
    case Primitive::kAllReduce:
      return 2.0 * (world - 1.0) / world;
    case Primitive::kAllGather:
    case Primitive::kReduceScatter:
    case Primitive::kAllToAll:
      return (world - 1.0) / world;
    case Primitive::kP2P:
      return 1.0;
  }
  return 1.0;
}

// log t at log(bytes) on one world's points: linear between points, the
// smallest size's time below them (latency floor), proportional to bytes
// above them (bandwidth bound at the largest size's rate).
double log_time_at(const std::vector<double>& xs, const std::vector<double>& ys, double lb,
                   unsigned& flags) {
  if (lb <= xs.front()) {
    if (lb < xs.front()) flags |= kLookupBelowBytes;
    return ys.front();
  }
  if (lb >= xs.back()) {
    if (lb > xs.back()) flags |= kLookupAboveBytes;
    return ys.back() + (lb - xs.back());
  }
  const auto hi = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), lb) - xs.begin());
  const std::size_t lo = hi - 1;
  const double f = (lb - xs[lo]) / (xs[hi] - xs[lo]);
  return ys[lo] + f * (ys[hi] - ys[lo]);
}

}  // namespace

double measured_time(const MeasuredCurve& c, Primitive prim, double bytes, int world,
                     unsigned& flags) {
  flags |= kLookupMeasured;
  const double lb = std::log(bytes);
  const auto n = c.worlds.size();
  auto at = [&](std::size_t i) { return log_time_at(c.log_bytes[i], c.log_seconds[i], lb, flags); };
  if (prim == Primitive::kP2P) return std::exp(at(0));  // one world (docs/profile.md)
  if (world <= c.worlds.front() || world >= c.worlds.back()) {
    const std::size_t i = world <= c.worlds.front() ? 0 : n - 1;
    const int edge = c.worlds[i];
    double t = std::exp(at(i));
    if (world != edge) {
      flags |= kLookupWorldScaled;
      const double g = algorithm_factor(prim, edge);
      if (g > 0.0) t *= algorithm_factor(prim, world) / g;
    }
    return t;
  }
  const auto hi = static_cast<std::size_t>(
      std::upper_bound(c.worlds.begin(), c.worlds.end(), world) - c.worlds.begin());
  const std::size_t lo = hi - 1;
  const double y0 = at(lo);
  if (c.worlds[lo] == world) return std::exp(y0);
  const double y1 = at(hi);
  const double f = (std::log(world) - std::log(c.worlds[lo])) /
                   (std::log(c.worlds[hi]) - std::log(c.worlds[lo]));
  return std::exp(y0 + f * (y1 - y0));
}

MeasuredCurve make_curve(std::vector<CommPoint> points) {
  HAPMOE_REQUIRE(!points.empty(), "make_curve: no points");
  std::sort(points.begin(), points.end(), [](const CommPoint& a, const CommPoint& b) {
    return a.world != b.world ? a.world < b.world : a.bytes < b.bytes;
  });
  MeasuredCurve c;
  c.min_bytes = points.front().bytes;
  c.max_bytes = points.front().bytes;
  for (std::size_t i = 0; i < points.size();) {
    const CommPoint& p = points[i];
    HAPMOE_REQUIRE(p.bytes > 0 && p.seconds > 0 && p.world >= 1,
                   "make_curve: bytes, seconds and world must be positive");
    std::vector<double> same;
    std::size_t j = i;
    while (j < points.size() && points[j].world == p.world && points[j].bytes == p.bytes) {
      same.push_back(points[j].seconds);
      ++j;
    }
    std::sort(same.begin(), same.end());
    const double median = same.size() % 2 == 1
                              ? same[same.size() / 2]
                              : 0.5 * (same[same.size() / 2 - 1] + same[same.size() / 2]);
    if (c.worlds.empty() || c.worlds.back() != p.world) {
      c.worlds.push_back(p.world);
      c.log_bytes.emplace_back();
      c.log_seconds.emplace_back();
    }
    c.log_bytes.back().push_back(std::log(p.bytes));
    c.log_seconds.back().push_back(std::log(median));
    c.min_bytes = std::min(c.min_bytes, p.bytes);
    c.max_bytes = std::max(c.max_bytes, p.bytes);
    i = j;
  }
  return c;
}

void CommTable::set_measured(Primitive prim, const Link& link, MeasuredCurve curve) {
  measured_[key(prim, link)] = std::move(curve);
}

bool CommTable::has_measured(Primitive prim, const Link& link) const {
  return measured_.count(key(prim, link)) > 0;
}

double CommTable::time_flags(Primitive prim, double bytes, int world, const Link& link,
                             unsigned& flags) const {
  flags = 0;
  if (prim != Primitive::kP2P && world <= 1) return 0.0;
  if (bytes <= 0.0) return 0.0;
  if (!measured_.empty()) {
    const auto it = measured_.find(key(prim, link));
    if (it != measured_.end()) return measured_time(it->second, prim, bytes, world, flags);
  }
  return formula_time(entry(prim, link), prim, bytes, world);
}

double CommTable::time(Primitive prim, double bytes, int world, const Link& link) const {
  if (prim != Primitive::kP2P && world <= 1) return 0.0;
  if (bytes <= 0.0) return 0.0;
  if (measured_.empty() && log_ == nullptr) {
    return formula_time(entry(prim, link), prim, bytes, world);
  }
  unsigned flags = 0;
  const double t = time_flags(prim, bytes, world, link, flags);
  if (log_ != nullptr) log_->push_back({prim, link, world, bytes, flags});
  return t;
}

const ComputeEntry& ProfileTables::compute_entry(int type, int tp, int cp,
                                                 const std::string& type_name) const {
  if (type < 0 || type >= static_cast<int>(compute.size())) {
    throw ContractError("ProfileTables::compute_entry: device type " + std::to_string(type) +
                        " out of range");
  }
  const auto it = compute[static_cast<std::size_t>(type)].find({tp, cp});
  if (it == compute[static_cast<std::size_t>(type)].end()) {
    throw InputError("profile", "no compute entry for " + type_name +
                                    " with TP=" + std::to_string(tp) + " CP=" + std::to_string(cp));
  }
  return it->second;
}

}  // namespace hapmoe
