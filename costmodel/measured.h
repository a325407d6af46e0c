// Measured profiles (paper §3.4, docs/profile.md): what a user measured on
// their own cluster, and how it replaces the analytic tables entry by
// entry. Pure data and pure functions: the readers live in io/ (HDF5,
// nccl-tests logs, CSV), the MPI timing in engine/.
//
// Every value the cost model reads either comes from here or from the
// catalog, and ProfileSources says which, so a report never passes off a
// catalog figure (or an extrapolation) as a measurement.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "costmodel/profile.h"

namespace hapmoe {

inline constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
inline bool is_set(double v) { return v == v; }

// One timed collective: `bytes` as in CommTable::time (the per-device
// buffer), `seconds` one median time. Device types by name; type_b equals
// type_a except on cross-type links.
struct CommSample {
  Primitive prim = Primitive::kAllReduce;
  LinkKind link = LinkKind::kIntraNode;
  std::string type_a;
  std::string type_b;
  int world = 2;
  double bytes = 0;
  double seconds = 0;
  bool operator==(const CommSample&) const = default;
};

// Measured per-layer times of one micro-batch on one device, seconds. The
// paper's t_dense (a dense layer) and t_ffn (its FFN alone; unset if not
// measured).
struct ComputeSample {
  std::string device;
  int tp = 1;
  int cp = 1;
  int micro_batch = 1;
  double dense_fwd_s = 0;
  double dense_bwd_s = 0;
  double ffn_fwd_s = kUnset;
  double ffn_bwd_s = kUnset;
  bool operator==(const ComputeSample&) const = default;
};

// Fitted per device type coefficients; unset ones keep the catalog's.
struct DeviceCalibration {
  std::string device;
  double eta = kUnset;                 // routed-expert kernel efficiency
  double router_s_per_token = kUnset;  // router time per token per hidden unit, s
  double activation_scale = kUnset;    // measured / analytic activations
  double overhead_bytes = kUnset;      // context, allocator, buffers
  bool operator==(const DeviceCalibration&) const = default;
};

// Router imbalance rho measured for one model (by its name).
struct ModelCalibration {
  std::string model;
  double imbalance = kUnset;
  bool operator==(const ModelCalibration&) const = default;
};

// One training run measured on the user's cluster (`profile import
// --megatron-log`, docs/profile.md): what ran, as hapmoe's own JSON
// documents (so the run is priced again with any later profile), and what
// was measured. The cost model never reads these; `profile fit` and
// `profile check` do.
struct ProfileRun {
  struct StagePeak {
    int rank = 0;   // the global rank that reported it
    int stage = 0;  // its pipeline stage (Megatron's rank order: PP outermost)
    double max_allocated_bytes = 0;
    bool operator==(const StagePeak&) const = default;
  };
  struct Timer {
    std::string name;    // Megatron's timer name ("forward-backward", ...)
    double seconds = 0;  // median over the logged intervals of the max over ranks
    bool operator==(const Timer&) const = default;
  };
  std::string name;      // unique in a profile
  std::string source;    // the log it was read from
  std::string workload;  // workload JSON (io/inputs/model_io.h, workload_to_json)
  std::string cluster;   // cluster JSON
  std::string plan;      // plan JSON: the plan the script ran
  double latency_s = 0;  // measured iteration time
  std::vector<StagePeak> peaks;
  std::vector<Timer> timers;
  bool operator==(const ProfileRun&) const = default;
};

// The largest JSON document of a stored run (far above a real model,
// cluster or plan: a few kilobytes).
inline constexpr std::size_t kMaxProfileRunText = 1u << 20;

struct MeasuredProfile {
  std::vector<CommSample> comm;
  std::vector<ComputeSample> compute;
  std::vector<DeviceCalibration> devices;
  std::vector<ModelCalibration> models;
  std::vector<ProfileRun> runs;
  bool empty() const {
    return comm.empty() && compute.empty() && devices.empty() && models.empty() && runs.empty();
  }
  bool operator==(const MeasuredProfile&) const = default;
  // Adds `other`: its samples are appended, its calibrations replace the
  // fields they set, its runs replace the runs of the same name.
  void merge(const MeasuredProfile& other);
};

// The first value of a profile that a profile file may not hold
// (docs/profile.md, "The profile file"): where it is ("comm[3].world") and
// what is wrong ("= 1 must be >= 2 (>= 1 for p2p)"); `field` is empty when
// every value is valid. Names: check_name (costmodel/text.h); times and
// sizes finite and positive; degrees and worlds within [1, 2^24]; rho
// finite and >= 1; an unset (NaN) calibration is valid. The profile writer
// checks with it before writing and the reader after reading, so one never
// writes what the other refuses.
struct ProfileIssue {
  std::string field;
  std::string what;
};
ProfileIssue validate_profile(const MeasuredProfile& profile);

// The largest world, tensor/context-parallel degree and micro-batch a
// profile holds (2^24, the process limit of the launchers).
inline constexpr int kMaxProfileDegree = 1 << 24;

// Where the values of the tables came from, for reports.
struct ComputeSource {
  int type = 0;
  int tp = 1;
  int cp = 1;
  enum Kind { kCatalog, kMeasured, kScaledMicroBatch } kind = kCatalog;
  int measured_micro_batch = 0;  // kScaledMicroBatch: from this micro-batch
};
struct CoefficientSource {
  int type = 0;
  bool eta = false, router = false, memory = false;  // measured (fitted)
};
struct ProfileSources {
  std::string file;                        // the profile's path, for messages
  std::vector<ComputeSource> compute;      // one per compute entry
  std::vector<CoefficientSource> devices;  // one per device type
  bool imbalance = false;                  // rho from the profile
  int comm_keys = 0;                       // (primitive, link) keys measured
  std::vector<std::string> unused;         // samples for device types not in the cluster
};

// Replaces the analytic entries of `tables` (built for `micro_batch`) with
// what `profile` measured, for the device types of `cluster`:
//  - compute: an exact (device, TP, CP, micro-batch) sample scales the
//    entry's attention and FFN parts to the measured times; a sample at
//    another micro-batch is scaled in proportion to tokens (reported);
//  - communication: every (primitive, link) with samples gets a curve;
//  - device coefficients: eta, router, memory calibration.
// Entries without measurements keep the catalog's values.
ProfileSources apply_profile(ProfileTables& tables, const MeasuredProfile& profile,
                             const Workload& workload, const ClusterSpec& cluster, int micro_batch);

// The tables one plan is scored with: the analytic entries for its (TP, CP)
// and micro-batch, with what `profile` measured in their place when given
// (nullptr: the catalog alone); `sources`, when given, says which.
ProfileTables plan_tables(const Workload& workload, const ClusterSpec& cluster,
                          const ParallelConfig& pi, const MeasuredProfile* profile,
                          ProfileSources* sources = nullptr);

// rho of `model` in `profile`, or kUnset.
double profile_imbalance(const MeasuredProfile& profile, const std::string& model);

// The terms of a plan's cost that read measured times of `prim` (where
// costmodel/cost.cpp looks it up), for `profile import` to say what a log
// changes: one sentence, no final period.
std::string primitive_plan_terms(Primitive prim);

// --- Fitting (docs/profile.md, "Fit") ---------------------------------------

// A measured layer (one micro-batch on one device): compute times in
// seconds (for a MoE layer without dispatch and combine), the router time
// if it was measured apart, the peak memory of the layer benchmark.
struct LayerSample {
  std::string device;
  bool moe = false;
  int tp = 1, cp = 1, micro_batch = 1, ep = 1, tpe = 1;
  double fwd_s = 0, bwd_s = 0;
  double router_fwd_s = kUnset;
  double ffn_fwd_s = kUnset, ffn_bwd_s = kUnset;  // dense layers: the FFN alone
  double peak_bytes = kUnset;                     // peak memory of the layer benchmark
  int line = 0;                                   // where it was read (messages)
};

// Router statistics: tokens routed to each expert in one (iteration, layer).
struct RouterSample {
  int iteration = 0;
  int layer = 0;
  std::vector<double> tokens;  // per expert
};

// A fitted value with its residuals.
struct FitValue {
  std::string name;    // "eta", "router", "activation_scale", "overhead", "rho"
  std::string device;  // or the model for rho
  double value = kUnset;
  int samples = 0;
  double rms_residual = 0;      // in the unit of the fitted observations
  double max_rel_residual = 0;  // |residual| / |observation|, worst
  std::string unit;             // of the residuals
  std::string note;             // e.g. why a value was not fitted
};

// Fits per device type: the router coefficient (from router_fwd_s, least
// squares through the origin against tokens x hidden), eta (least squares
// of the MoE layers' expert time against the cost model's expert term at
// eta = 1) and the memory calibration (least squares of peak bytes against
// analytic activations: scale and overhead). `tables` are the tables the
// samples' shapes are predicted with (catalog, with measured compute if
// any). Appends the fitted values to `out` and returns the fits.
std::vector<FitValue> fit_layers(const std::vector<LayerSample>& samples, const Workload& workload,
                                 const ClusterSpec& cluster, MeasuredProfile& out);

// A stored run with its documents read (io/ parses the JSON).
struct FitRun {
  std::string name;
  Workload workload;
  ClusterSpec cluster;
  Plan plan;
  double latency_s = 0;
  std::vector<ProfileRun::StagePeak> peaks;
};

// Fits per device type from whole training runs (docs/profile.md, "Fit
// from training runs"), with the tables of `out` (measured compute and
// collectives apply):
//  1. the activation scale: a stage's measured max allocated minus its
//     predicted parameter state and buffers, against its predicted
//     activations at scale 1, least squares through the origin (max
//     allocated holds no runtime reserve, so the overhead is not fitted);
//  2. eta: the value minimising the sum over runs of ln(predicted /
//     measured)^2, one device type at a time (golden-section search over
//     ln eta in [ln 0.05, ln 2], three sweeps), for the types whose
//     routed experts a run's time depends on.
// Stores the fitted values in `out` and returns the fits; `note` of an
// eta fit says what share of the iteration scales with 1/eta.
std::vector<FitValue> fit_runs(const std::vector<FitRun>& runs, MeasuredProfile& out);

// rho = mean over (iteration, layer) of max/mean tokens per expert.
FitValue fit_imbalance(const std::vector<RouterSample>& samples, const std::string& model,
                       MeasuredProfile& out);

}  // namespace hapmoe
