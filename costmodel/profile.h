// Profile tables (paper §3.4): everything the cost model knows about the
// hardware. The cost model reads only these tables; they are filled either
// analytically from the device catalog (costmodel/analytic.h) or, later,
// from measurements.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"

namespace hapmoe {

// ---------------------------------------------------------------------------
// Compute table: per device type h and (TP, CP), the time of the pieces of
// one layer for one micro-batch on one device. The paper's t_dense(h,TP,CP)
// is attention + dense_mlp; t_ffn(h,TP,CP) is dense_mlp.
struct ComputeEntry {
  // Forward times in seconds; backward times are in the *_bwd fields.
  double attention_fwd = 0;       // norms, QKV/out projections, core attention
  double core_attention_fwd = 0;  // the S^2 part alone (selective recompute)
  double core_attention_bwd = 0;  // ... of attention_bwd
  double norm_fwd = 0;            // one norm over the device's tokens (layernorm recompute)
  double mla_up_fwd = 0;          // MLA's up-projections and rotary (mla_up_proj recompute)
  double dense_mlp_fwd = 0;       // one dense MLP of width F
  double dense_act_fwd = 0;       // its activation function alone
  double expert_fwd = 0;          // one expert-width MLP over the device's
                                  // tokens at full GEMM efficiency: a
                                  // reference (archives), not the routed
                                  // experts' cost (routed_expert_time)
  double expert_act_fwd = 0;      // its activation function alone
  // The routed experts' time is the shape model's (routed_expert_time in
  // costmodel/analytic.h, which depends on EP and TPE) times these: 1 in
  // the analytic tables, the measured/analytic ratio of the FFN when a
  // profile measured it.
  double expert_scale_fwd = 1;
  double expert_scale_bwd = 1;
  double shared_fwd = 0;      // the shared experts (0 if none)
  double shared_act_fwd = 0;  // their activation function alone
  double router_fwd = 0;      // router GEMM, softmax and top-k
  double embedding_fwd = 0;   // first stage: embedding lookup
  double output_fwd = 0;      // last stage: output GEMM + cross entropy
  double mtp_fwd = 0;         // last stage, per MTP depth: embedding lookup, norms,
                              // 2H -> H projection (its layer and output pass apart)
  double attention_bwd = 0;
  double dense_mlp_bwd = 0;
  double expert_bwd = 0;
  double shared_bwd = 0;
  double router_bwd = 0;
  double embedding_bwd = 0;
  double output_bwd = 0;
  double mtp_bwd = 0;
};

// ---------------------------------------------------------------------------
// Communication primitives and link kinds (paper §3.4 (ii)).
enum class Primitive { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kP2P };
inline constexpr int kNumPrimitives = 5;
const char* to_string(Primitive);

enum class LinkKind { kIntraNode, kInterNode, kCrossType };
const char* to_string(LinkKind);

// A link: its kind and the device types at both ends (equal unless cross).
struct Link {
  LinkKind kind = LinkKind::kIntraNode;
  int type_a = 0;
  int type_b = 0;
};

// Parameters of one primitive on one link: t = steps * latency +
// volume_factor * bytes / bandwidth, with the ring/pairwise algorithm
// factors of docs/costmodel.md ("Collectives").
struct PrimitiveEntry {
  double bandwidth = 0;  // B/s per device per direction
  double latency = 0;    // s per step
};

// A measured primitive (docs/profile.md, "Interpolation"): times at
// (world, bytes) points, looked up log-log in bytes and in world size.
// Built once per (primitive, link) key, so a lookup is two binary searches
// over a few points and no allocation.
struct MeasuredCurve {
  std::vector<int> worlds;                       // ascending, distinct
  std::vector<std::vector<double>> log_bytes;    // per world, ascending
  std::vector<std::vector<double>> log_seconds;  // per world, same length
  double min_bytes = 0, max_bytes = 0;           // over every world
};

// How a communication time was obtained (bit flags).
enum LookupFlag : unsigned {
  kLookupMeasured = 1u,     // from a measured curve (else the catalog)
  kLookupBelowBytes = 2u,   // below the smallest measured size: its time
  kLookupAboveBytes = 4u,   // above the largest: scaled linearly in bytes
  kLookupWorldScaled = 8u,  // world outside the measured ones: scaled by
                            // the algorithm factor from the nearest
};

// A record of the lookups made while it is attached to a CommTable
// (CommTable::set_log): for reports, never during a search.
struct LookupRecord {
  Primitive prim = Primitive::kAllReduce;
  Link link;
  int world = 0;
  double bytes = 0;
  unsigned flags = 0;
};
using LookupLog = std::vector<LookupRecord>;

class CommTable {
 public:
  // `bytes` is the per-device buffer: for all-reduce the reduced tensor, for
  // all-gather the gathered output, for reduce-scatter the input, for
  // all-to-all what one device sends in total, for p2p the message.
  double time(Primitive prim, double bytes, int world, const Link& link) const;

  void set(Primitive prim, const Link& link, PrimitiveEntry entry);
  const PrimitiveEntry& entry(Primitive prim, const Link& link) const;

  // Measured times replace the formula for this (primitive, link) key.
  void set_measured(Primitive prim, const Link& link, MeasuredCurve curve);
  bool has_measured(Primitive prim, const Link& link) const;
  bool any_measured() const { return !measured_.empty(); }
  // The time and flags of one lookup, without logging.
  double time_flags(Primitive prim, double bytes, int world, const Link& link,
                    unsigned& flags) const;
  // While set, every time() call is appended to `log` (nullptr: off).
  // Not thread-safe: attach it only to a table one thread evaluates.
  void set_log(LookupLog* log) { log_ = log; }

 private:
  using Key = std::tuple<int, int, int, int>;  // prim, kind, a, b (a <= b)
  static Key key(Primitive prim, const Link& link);
  std::map<Key, PrimitiveEntry> entries_;
  std::map<Key, MeasuredCurve> measured_;
  LookupLog* log_ = nullptr;
};

// t(bytes, world) from a measured curve; `flags` gets the kLookup* bits.
double measured_time(const MeasuredCurve& curve, Primitive prim, double bytes, int world,
                     unsigned& flags);

// Builds a curve from (world, bytes, seconds) samples; several samples at
// one point are reduced to their median. Throws ContractError on
// non-positive bytes or seconds (the readers check them first).
struct CommPoint {
  int world = 0;
  double bytes = 0;
  double seconds = 0;
};
MeasuredCurve make_curve(std::vector<CommPoint> points);

// ---------------------------------------------------------------------------
// Per device type coefficients.
struct DeviceCoefficients {
  double capacity_bytes = 0;         // C_h, memory a plan may use
  double eta = 1.0;                  // eta_h in (0,1]: routed-expert kernel
                                     // efficiency relative to the dense MLP
  double hbm_bandwidth = 0;          // B/s, streaming of expert weights
  double optimizer_s_per_param = 0;  // Adam step, seconds per local param
  double activation_scale = 1.0;     // memory calibration: measured/analytic
  double overhead_bytes = 0;         // memory calibration: context, buffers
};

struct ProfileTables {
  std::vector<DeviceCoefficients> devices;  // index = device type
  CommTable comm;
  // compute[h][(tp, cp)]
  std::vector<std::map<std::pair<int, int>, ComputeEntry>> compute;

  // Throws InputError naming the device and degrees if the entry is absent.
  const ComputeEntry& compute_entry(int type, int tp, int cp, const std::string& type_name) const;
};

}  // namespace hapmoe
