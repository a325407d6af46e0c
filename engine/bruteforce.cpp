// Brute force (engine/search.h): every plan of one configuration without
// DP, the prunings ignored -- every sequence of stage device types within
// the stage capacities and every composition of the N layers (or the even
// split with --uniform, on SearchOptions::devices_per_type when given;
// with ConstraintOptions::launcher_placement, the orders place_stages
// places),
// each stage with its least recomputation. The
// reference the DP is tested against (tests/engine: DP == brute force):
// it costs stages through the same stage memo (stage_memo.h) and sums them
// with the same label arithmetic (labels.h: extend, offer), so equal plans
// have bit-identical latencies.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/labels.h"
#include "engine/search.h"
#include "engine/stage_memo.h"
#include "partition/constraints.h"

namespace hapmoe {

using hsdp::Evaluator;
using hsdp::extend;
using hsdp::Label;
using hsdp::note_shortfall;
using hsdp::offer;
using hsdp::StageEval;
using hsdp::Step;
using hsdp::step_of;

double bruteforce_size(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  const int n = model.workload().model.num_layers;
  int types = 0;
  for (int h = 0; h < model.cluster().num_types(); ++h) {
    if (stage_capacity(model.cluster(), h, pi, opt.space.constraints) > 0) ++types;
  }
  // types^PP sequences times C(N-1, PP-1) compositions.
  double size = std::pow(static_cast<double>(types), pi.pp);
  if (!opt.uniform) {
    double comb = 1.0;
    for (int k = 1; k <= pi.pp - 1; ++k) comb = comb * (n - k) / k;
    size *= comb;
  }
  return std::min(size, 4.6e18);
}

ConfigOutcome bruteforce_config(const CostModel& model, const ParallelConfig& pi,
                                const SearchOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  ConfigOutcome out;
  out.stats.configs_evaluated = 1;
  Evaluator ev(model, pi, opt);
  const int pp = pi.pp;
  const int n = ev.layers();
  std::vector<int> used(static_cast<std::size_t>(ev.types()), 0);
  if (opt.uniform && n % pp != 0) return out;  // no even split
  // The plan's devices of each type, as devices_per_type asks.
  const auto on_the_devices = [&] {
    if (!opt.uniform || opt.devices_per_type.empty()) return true;
    for (int h = 0; h < ev.types(); ++h) {
      if (used[static_cast<std::size_t>(h)] * pi.stage_devices() !=
          opt.devices_per_type[static_cast<std::size_t>(h)]) {
        return false;
      }
    }
    return true;
  };
  // With the launcher's placement, the stage orders place_stages places.
  std::vector<int> order;
  const auto placeable = [&] {
    return !opt.space.constraints.launcher_placement ||
           place_stages(model.cluster(), pi.stage_devices(), order).ok();
  };
  std::vector<Label> arena;  // the current path only, root first
  arena.reserve(static_cast<std::size_t>(pp) + 1);
  arena.push_back(Label{});
  std::vector<Step> trail;  // the path's steps, for offer
  std::function<void(int, int, int)> place = [&](int i, int j, int hp) {
    if (i == pp) {
      if (!on_the_devices() || !placeable()) return;
      ++out.stats.transitions;
      trail.clear();
      for (const Label& l : arena) trail.push_back(step_of(l));
      offer(out, arena.back(), trail, static_cast<std::int32_t>(arena.size() - 1), ev);
      return;
    }
    const int remaining_after = pp - i - 1;
    for (int h = 0; h < ev.types(); ++h) {
      if (used[static_cast<std::size_t>(h)] >= ev.cap(h)) continue;
      const int max_n = n - j - remaining_after;
      for (int layers = 1; layers <= max_n; ++layers) {
        if (remaining_after == 0 && layers != max_n) continue;
        if (opt.uniform && layers != n / pp) continue;
        const StageEval& e = ev.stage(h, i, j, layers);
        note_shortfall(out, e, pi, i, h, layers);
        const auto parent = static_cast<std::int32_t>(arena.size() - 1);
        arena.push_back(extend(arena.back(), parent, h, layers, e, ev.boundary(hp, h)));
        ++used[static_cast<std::size_t>(h)];
        order.push_back(h);
        place(i + 1, j + layers, h);
        order.pop_back();
        --used[static_cast<std::size_t>(h)];
        arena.pop_back();
      }
    }
  };
  place(0, 0, -1);
  out.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace hapmoe
