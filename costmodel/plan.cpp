#include "costmodel/plan.h"

namespace hapmoe {

std::string to_string(const Recompute& r, int stage_layers) {
  switch (r.kind) {
    case RecomputeKind::kNone:
      return "none";
    case RecomputeKind::kSelective:
      return "selective";
    case RecomputeKind::kFull:
      if (r.layers >= stage_layers) return "full";
      return "full:" + std::to_string(r.layers);
  }
  return "?";
}

}  // namespace hapmoe
