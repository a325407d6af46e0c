// The paper's 24 cases: its two MoE models on its twelve MoE clusters
// (io/inputs/cluster_io.cpp), the benchmarks' default.
#pragma once

#include <string>
#include <vector>

namespace hapmoe::bench {

inline std::vector<std::string> paper_models() { return {"mixtral-s", "mixtral-l"}; }

inline std::vector<std::string> paper_clusters() {
  return {"paper:16-1-h", "paper:16-2-h", "paper:16-3-h", "paper:16-1", "paper:16-2", "paper:16-3",
          "paper:24-1",   "paper:24-2",   "paper:24-3",   "paper:32-1", "paper:32-2", "paper:32-3"};
}

}  // namespace hapmoe::bench
