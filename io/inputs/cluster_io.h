// Reading clusters: inline specs ("H800:16,910B:16", "910B:2x16"), presets
// (the paper's twelve clusters "paper:16-1-h" ... "paper:32-3") and cluster
// JSON files with custom device types and links (docs/clusters.md).
#pragma once

#include <span>
#include <string>

#include "costmodel/cluster.h"

namespace hapmoe {

struct ClusterPreset {
  std::string name;         // e.g. "paper:16-1"
  std::string description;  // e.g. "H800 (1x8) + 910B (1x8)"
  ClusterSpec cluster;
};

std::span<const ClusterPreset> cluster_presets();
const ClusterPreset* find_cluster_preset(const std::string& name);

// --cluster: a preset name, a path to a cluster JSON file, or an inline
// spec. Throws InputError naming the problem; the result is validated.
ClusterSpec load_cluster(const std::string& spec);

ClusterSpec parse_inline_cluster(const std::string& spec);
ClusterSpec parse_cluster_json(const std::string& text, const std::string& origin);

// The cluster as cluster JSON (round-trips through parse_cluster_json).
std::string cluster_to_json(const ClusterSpec& cluster);

}  // namespace hapmoe
