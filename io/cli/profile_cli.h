// `hapmoe profile ...` (docs/profile.md) and the profile's part of the
// other commands' output.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/cost.h"
#include "costmodel/measured.h"
#include "engine/comm.h"

namespace hapmoe {

// `hapmoe profile import|fit|check|comm ...`; argv[0] is "profile".
int run_profile_command(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                        Comm& comm);

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
