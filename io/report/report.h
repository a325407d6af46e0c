// Human-readable output: plan reports and the catalog.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/model.h"

namespace hapmoe {

// The full report of one plan: latency and breakdown, throughput, the
// stage table, and a plain warning for every stage that does not fit.
void print_plan_report(std::ostream& out, const PlanReport& report, const Workload& workload,
                       const ClusterSpec& cluster);

// The model's lines of a report: "model    NAME (L layers, seq S, global
// batch B)" and "params   TOTALB total, ACTIVEB active per token"
// (total_params / active_params of costmodel/model.h).
void print_model_summary(std::ostream& out, const Workload& workload);

// "46.70B", "124.3M": a parameter count.
std::string format_params(double params);

// Devices, model presets and cluster presets with their figures.
void print_catalog(std::ostream& out);

// printf into a std::string (at most 511 characters).
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "paper:32-2 (16 x H800 + 16 x MI300X, 32 devices)": name and pools.
std::string cluster_summary(const ClusterSpec& cluster);

// "12.3 GiB", "850 ms", "1.2e+05" style helpers shared by reports.
std::string format_bytes(double bytes);
std::string format_seconds(double seconds);

// The search-statistics line of a search a limit stopped (`reason` as
// to_string(StopReason)).
std::string not_proven_line(const std::string& reason, std::int64_t not_searched,
                            std::int64_t configs);

}  // namespace hapmoe
