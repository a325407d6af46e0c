// The profile's part of plan's and evaluate's output (docs/profile.md):
// which values of a plan were measured and which came from the catalog.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/cost.h"
#include "costmodel/measured.h"

namespace hapmoe {

// Which values of `report`'s plan came from the profile and which from the
// catalog: compute entries and coefficients of the stage device types,
// rho, and every communication lookup (re-evaluated with a lookup log),
// with clamped or extrapolated lookups named.
struct PlanSources {
  std::vector<std::string> measured;
  std::vector<std::string> catalog;
  std::vector<std::string> outside;  // measured, but outside the measured range
};
PlanSources plan_sources(const PlanReport& report, const Workload& workload,
                         const ClusterSpec& cluster, const ProfileTables& tables,
                         const ProfileSources& sources);
void print_plan_sources(std::ostream& out, const PlanSources& s, const std::string& profile_path);
nlohmann::ordered_json plan_sources_json(const PlanSources& s, const std::string& profile_path);

}  // namespace hapmoe
