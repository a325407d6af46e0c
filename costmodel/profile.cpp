// Collective time formulas over the primitive table. Each primitive has the
// bandwidth and per-step latency of the link it runs on; the algorithm
// factors are those of ring (all-reduce, all-gather, reduce-scatter) and
// pairwise-exchange (all-to-all) algorithms, which are bandwidth-optimal for
// large messages (docs/costmodel.md, "Collectives").
#include "costmodel/profile.h"

#include <algorithm>
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

double CommTable::time(Primitive prim, double bytes, int world, const Link& link) const {
  if (prim != Primitive::kP2P && world <= 1) return 0.0;
  if (bytes <= 0.0) return 0.0;
  const PrimitiveEntry& e = entry(prim, link);
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
