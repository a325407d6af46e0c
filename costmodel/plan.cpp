#include "costmodel/plan.h"

#include <algorithm>

namespace hapmoe {

const char* to_string(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::kCoreAttn:
      return "core_attn";
    case RecomputeModule::kMoeAct:
      return "moe_act";
    case RecomputeModule::kLayernorm:
      return "layernorm";
    case RecomputeModule::kMlaUpProj:
      return "mla_up_proj";
    case RecomputeModule::kMlp:
      return "mlp";
    case RecomputeModule::kMoe:
      return "moe";
    case RecomputeModule::kSharedExperts:
      return "shared_experts";
  }
  return "?";
}

std::optional<RecomputeModule> parse_recompute_module(const std::string& name) {
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    const auto m = static_cast<RecomputeModule>(i);
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::vector<std::string> recompute_module_names(unsigned modules) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    const auto m = static_cast<RecomputeModule>(i);
    if ((modules & module_bit(m)) != 0) names.emplace_back(to_string(m));
  }
  return names;
}

Recompute stage_recompute(const RecomputeSetting& s, int stage_layers) {
  switch (s.kind) {
    case RecomputeKind::kNone:
      break;
    case RecomputeKind::kSelective:
      return {RecomputeKind::kSelective, 0, s.modules};
    case RecomputeKind::kFull: {
      const int layers = s.block == 0 ? stage_layers : std::min(s.block, stage_layers);
      if (layers > 0) return {RecomputeKind::kFull, layers};
      break;
    }
  }
  return {RecomputeKind::kNone, 0};
}

std::string to_string(const RecomputeSetting& s) {
  if (s.kind == RecomputeKind::kFull) {
    return s.block == 0 ? "full" : "full block " + std::to_string(s.block);
  }
  return to_string(Recompute{s.kind, 0, s.modules}, 0);
}

std::string to_string(const Recompute& r, int stage_layers) {
  switch (r.kind) {
    case RecomputeKind::kNone:
      return "none";
    case RecomputeKind::kSelective: {
      if (r.modules == kDefaultRecomputeModules) return "selective";
      std::string out = "selective:";
      const std::vector<std::string> names = recompute_module_names(r.modules);
      for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
      return out;
    }
    case RecomputeKind::kFull:
      if (r.layers >= stage_layers) return "full";
      return "full:" + std::to_string(r.layers);
  }
  return "?";
}

}  // namespace hapmoe
