// Labels and Pareto fronts of HS-DP (docs/search.md). T_iter = sum +
// (M-1)*max + tail is not a sum, so a DP state keeps a Pareto front of
// labels (sum of stage steps, max stage step, max stage sync+optimizer):
// every completion adds to the sum and can only raise the maxima, so a
// label that is no better in any of the three can never lead to a better
// plan. That makes the DP exact (tests/engine: DP == brute force).
//
// Here: the label and the arithmetic of appending a stage to it (Label,
// extend, latency), dominance with the canonical tie-break (dominates,
// tie_gap), the fronts of the level being built (Entry, merge,
// by_insertion, FrontStore, key_order) and ranking a finished level in
// canonical order (rank_level); in labels.cpp, turning a complete label
// into a plan (offer). All but offer are inline here, so that the DP
// (hsdp.cpp) compiles as it did when the kernel was one file: dominance
// and merge run on every transition, and GCC folds the per-level steps
// (key_order, rank_level) into run_dp (out of line, the large case was
// 1.5 % slower). Relies on the stage memo (stage_memo.h) for the cost and
// recomputation of a stage, and on the canonical plan order
// (candidate_less, plan_order.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/search.h"
#include "engine/stage_memo.h"

namespace hapmoe::hsdp {

// One DP label: the summary of a partial plan and how it was reached.
struct Label {
  double sum = 0;        // sum of stage steps
  double max = 0;        // max stage step
  double tail = -1;      // max stage sync + optimizer
  double tail_sync = 0;  // sync and optimizer of the first stage reaching tail
  double tail_opt = 0;
  std::int32_t parent = -1;  // number of the previous label (its index in the trail)
  std::int16_t type = 0;
  std::int32_t layers = 0;  // up to kKeyLayersMask (a stage of 100,000 layers)
  bool feasible = true;
  // Canonical order of partial plans of one level (all have i stages):
  // (rank of the parent in its level, type, layers). `rank` is this label's
  // position in that order, assigned once its level is complete.
  std::int64_t key = 0;
  std::int32_t rank = 0;
};

// What a plan needs of a label once its level is expanded: its stage
// (type and layers) and the label before it. The DP keeps every label's
// step (the trail, indexed like the labels) and whole labels only for the
// level it expands and the one it builds.
struct Step {
  std::int32_t parent = -1;
  std::int16_t type = 0;
  std::int32_t layers = 0;
};
inline Step step_of(const Label& l) { return {l.parent, l.type, l.layers}; }

// The low 32 bits of Label::key: (type, layers), 12 and 20 bits (a stage
// of up to 2^20 - 1 layers; 16 bits each held at most 32,767 layers,
// below the models' 100,000).
inline constexpr int kKeyTypeShift = 20;
inline constexpr std::int64_t kKeyLayersMask = (std::int64_t{1} << kKeyTypeShift) - 1;
inline std::int64_t low_key(int h, int n) {
  return (static_cast<std::int64_t>(h) << kKeyTypeShift) | n;
}

// Appending a stage to a label, with the arithmetic of iteration_latency.
inline Label extend(const Label& from, std::int32_t parent, int h, int n, const StageEval& e,
                    const CostModel::Boundary& b) {
  Label l;
  const double fwd = e.fwd + b.fwd_s;
  const double bwd = e.bwd + b.bwd_s;
  const double step = fwd + bwd;
  l.sum = from.sum + step;
  l.max = std::max(from.max, step);
  if (e.sync + e.opt > from.tail) {
    l.tail = e.sync + e.opt;
    l.tail_sync = e.sync;
    l.tail_opt = e.opt;
  } else {
    l.tail = from.tail;
    l.tail_sync = from.tail_sync;
    l.tail_opt = from.tail_opt;
  }
  l.parent = parent;
  l.type = static_cast<std::int16_t>(h);
  l.layers = n;
  l.feasible = from.feasible && e.feasible;
  l.key = (static_cast<std::int64_t>(from.rank) << 32) | low_key(h, n);
  return l;
}

inline double latency(const Label& l, int m, int vpp) {
  IterationBreakdown it;
  it.edge_s = pipeline_edge(l.sum, l.max, vpp);
  it.middle_s = (m - 1) * l.max;
  it.dp_sync_s = l.tail_sync;
  it.optimizer_s = l.tail_opt;
  return it.total();
}

// a dominates b (same state): no worse in sum, max and tail, and either
// not later in the canonical plan order or ahead in the sum by more than
// `gap`. Then every completion of a is no worse than the same completion
// of b in (latency, plan key) -- floating-point sums and maxima are
// monotone -- so dropping b keeps the DP exact, ties included.
//
// Ties: a better max or tail can be absorbed by a later, larger stage, so
// b's completion may tie a's and win on the key; a and b then both stay
// unless a is ahead in the sum by more than `gap`, a margin far above the
// rounding of any latency up to U, the best latency this configuration
// can still matter at (docs/search.md): the completions of b are then
// strictly slower. With no such U yet, gap is infinite and the key
// decides. Within a level, partial plans compare lexicographically by
// (parent's rank, type, layers): Label::key. (At one state both paths
// place the same layers, so the recomputation of the first differing
// stage is decided by its type and layers.)
template <class A, class B>
bool dominates(const A& a, const B& b, double gap) {
  return a.feasible == b.feasible && a.sum <= b.sum && a.max <= b.max && a.tail <= b.tail &&
         (a.key <= b.key || b.sum - a.sum > gap);
}

// The sum margin of `dominates` for plans of `pp` stages whose latency
// matters only up to `upper`: a latency is a sum of pp + 3 terms, each
// rounding costs at most 2^-53 of it, so a lead of more than
// 2 (pp + 3) 2^-53 upper survives on both sides; 1e-14 (pp + 4) upper is
// about 20 times that.
inline double tie_gap(int pp, double upper) {
  return std::isfinite(upper) ? 1e-14 * (pp + 4) * upper : std::numeric_limits<double>::infinity();
}

// Offers a finished label to the configuration's best: `last`, whose step
// is trail[index].
void offer(ConfigOutcome& out, const Label& last, const std::vector<Step>& trail,
           std::int32_t index, Evaluator& ev);

// Reusable storage of the DP's fronts: an open-addressing map from a state
// key to a front in a pool. Kept per thread and reused across runs, so a
// run allocates nothing once the pool has grown.
template <class T>
class FrontStore {
 public:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  // The front of `key`, created empty if new; `created` tells which.
  std::vector<T>& at(std::uint64_t key, bool& created) {
    if ((used_.size() + 1) * 2 > keys_.size()) grow();
    std::size_t mask = keys_.size() - 1;
    std::size_t slot = hash(key) & mask;
    while (keys_[slot] != kEmpty) {
      if (keys_[slot] == key) {
        created = false;
        return pool_[static_cast<std::size_t>(values_[slot])];
      }
      slot = (slot + 1) & mask;
    }
    created = true;
    keys_[slot] = key;
    if (pool_used_ == pool_.size()) pool_.emplace_back();
    values_[slot] = static_cast<std::int32_t>(pool_used_);
    used_.push_back(slot);
    auto& front = pool_[pool_used_++];
    front.clear();
    return front;
  }

  // Every (key, front) present, in insertion order.
  std::size_t size() const { return used_.size(); }
  std::uint64_t key(std::size_t k) const { return keys_[used_[k]]; }
  std::vector<T>& front(std::size_t k) {
    return pool_[static_cast<std::size_t>(values_[used_[k]])];
  }
  const std::vector<T>& front(std::size_t k) const {
    return pool_[static_cast<std::size_t>(values_[used_[k]])];
  }

  // Empties the map (the fronts stay in the pool until recycled).
  void clear() {
    for (std::size_t slot : used_) keys_[slot] = kEmpty;
    used_.clear();
  }
  // Makes every front of the pool reusable.
  void recycle_pool() { pool_used_ = 0; }

 private:
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  void grow() {
    std::vector<std::uint64_t> old_keys = std::move(keys_);
    std::vector<std::int32_t> old_values = std::move(values_);
    const std::size_t size = std::max<std::size_t>(64, old_keys.size() * 2);
    keys_.assign(size, kEmpty);
    values_.assign(size, 0);
    std::vector<std::size_t> old_used = std::move(used_);
    used_.clear();
    for (std::size_t slot : old_used) {
      std::size_t s = hash(old_keys[slot]) & (size - 1);
      while (keys_[s] != kEmpty) s = (s + 1) & (size - 1);
      keys_[s] = old_keys[slot];
      values_[s] = old_values[slot];
      used_.push_back(s);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::int32_t> values_;
  std::vector<std::size_t> used_;
  std::vector<std::vector<T>> pool_;
  std::size_t pool_used_ = 0;
};

// The entries of `store` in increasing key order (deterministic runs).
template <class T>
void key_order(const FrontStore<T>& store,
               std::vector<std::pair<std::uint64_t, std::size_t>>& order) {
  order.resize(store.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = {store.key(k), k};
  std::sort(order.begin(), order.end());  // keys are distinct
}

// A label of the level being built, inline in its state's front: the
// dominance scan reads contiguous memory, and a label that a later one
// dominates never reaches the labels kept (run_dp).
struct Entry {
  double sum = 0;
  double max = 0;
  double tail = 0;
  std::int64_t key = 0;
  double tail_sync = 0;
  double tail_opt = 0;
  std::int32_t parent = -1;
  std::int32_t seq = 0;  // insertion order in the level
  bool feasible = true;
};

inline Label to_label(const Entry& c) {
  Label l;
  l.sum = c.sum;
  l.max = c.max;
  l.tail = c.tail;
  l.tail_sync = c.tail_sync;
  l.tail_opt = c.tail_opt;
  l.parent = c.parent;
  l.type = static_cast<std::int16_t>((c.key >> kKeyTypeShift) & 0xfff);
  l.layers = static_cast<std::int32_t>(c.key & kKeyLayersMask);
  l.feasible = c.feasible;
  l.key = c.key;
  return l;
}

// dominates(a, b, gap) when a.sum <= b.sum is known; `&` instead of `&&`
// (the same value, fewer unpredictable branches).
inline bool dominates_given_sum(const Entry& a, const Entry& b, double gap) {
  return (a.feasible == b.feasible) & (a.max <= b.max) & (a.tail <= b.tail) &
         ((a.key <= b.key) | (b.sum - a.sum > gap));
}

// Offers `cand` to a front: dropped if a label of the front dominates it,
// otherwise inserted after the labels it dominates are removed -- the
// same set as checking and erasing over the front in any order.
//
// A front is kept sorted by (feasible, sum): the infeasible labels first,
// and within each part by sum, labels whose sum is NaN (which dominate
// nothing and nothing dominates) at the part's end. Feasible and
// infeasible labels never dominate each other, so only cand's part is
// scanned; only labels with sum <= cand.sum can dominate cand, so that
// scan stops at the first larger sum; only labels with sum >= cand.sum
// can be dominated by it. The DP still expands a front in insertion order
// (`seq`, restored when the level is complete) where ties depend on it.
inline void merge(std::vector<Entry>& front, const Entry& cand, double gap) {
  if (front.empty()) {
    front.push_back(cand);
    return;
  }
  Entry* m = front.data();
  // An infeasible label never completes into a plan (offer() drops it), so
  // its values matter to nothing: one keeps the state reached, and the
  // counters (states, transitions) count moves, not labels.
  if (!cand.feasible && !m[0].feasible) return;
  // cand's part [lo, hi).
  std::size_t split = 0;  // the first feasible label
  if (!front.empty() && !m[0].feasible) {
    split =
        static_cast<std::size_t>(std::partition_point(front.begin(), front.end(),
                                                      [](const Entry& e) { return !e.feasible; }) -
                                 front.begin());
  }
  const std::size_t lo = cand.feasible ? split : 0;
  const std::size_t hi = cand.feasible ? front.size() : split;
  // k: the first label with sum > cand.sum (or NaN); q: the first with
  // sum >= cand.sum.
  std::size_t k = hi;
  if (hi - lo <= 16) {  // short: linearly, from the top
    while (k > lo && !(m[k - 1].sum <= cand.sum)) --k;
  } else {
    k = static_cast<std::size_t>(
        std::partition_point(front.begin() + static_cast<std::ptrdiff_t>(lo),
                             front.begin() + static_cast<std::ptrdiff_t>(hi),
                             [&](const Entry& e) { return e.sum <= cand.sum; }) -
        front.begin());
  }
  std::size_t q = k;
  while (q > lo && !(m[q - 1].sum < cand.sum)) --q;
  // Downwards from the nearest sums: ties (equal values, an earlier key)
  // and near ties are the likeliest dominators.
  for (std::size_t r = k; r > lo; --r) {
    if (dominates_given_sum(m[r - 1], cand, gap)) return;
  }
  if (cand.sum != cand.sum) k = hi;  // NaN: at the end, dominates nothing
  // The first label cand dominates, if any.
  std::size_t d = q;
  while (d < hi && !(cand.sum <= m[d].sum && dominates_given_sum(cand, m[d], gap))) ++d;
  if (d == hi) {
    front.insert(front.begin() + static_cast<std::ptrdiff_t>(k), cand);
    return;
  }
  // Compact in place, cand taking its place among the survivors (after
  // the equal sums that stay; m[d] is removed, so there is room).
  std::size_t w = 0;
  std::size_t r = 0;
  if (d >= k) {  // cand goes at k: [k, d) moves up by one over m[d]
    std::copy_backward(m + k, m + d, m + d + 1);
    m[k] = cand;
    w = d + 1;
    r = d + 1;
  } else {  // an equal sum is removed: compact up to k, then cand
    w = d;
    for (r = d + 1; r < k; ++r) {
      if (!(cand.sum <= m[r].sum && dominates_given_sum(cand, m[r], gap))) m[w++] = m[r];
    }
    m[w++] = cand;
  }
  for (; r < hi; ++r) {
    if (!(cand.sum <= m[r].sum && dominates_given_sum(cand, m[r], gap))) m[w++] = m[r];
  }
  front.erase(front.begin() + static_cast<std::ptrdiff_t>(w),
              front.begin() + static_cast<std::ptrdiff_t>(hi));
}

// Back to insertion order (fronts are short: insertion sort).
inline void by_insertion(std::vector<Entry>& front) {
  for (std::size_t a = 1; a < front.size(); ++a) {
    if (front[a - 1].seq < front[a].seq) continue;
    const Entry e = front[a];
    std::size_t b = a;
    while (b > 0 && front[b - 1].seq > e.seq) {
      front[b] = front[b - 1];
      --b;
    }
    front[b] = e;
  }
}

// Ranks the labels level[level_begin, end) in canonical order, i.e. by
// key = (parent's rank, type, layers): a radix sort, first by
// (type, layers) < types x (N + 1), then stably by the parent's rank
// (the previous level's `parents` labels are ranked 0 .. parents - 1).
inline void rank_level(std::vector<Label>& level, std::int32_t parents, std::int32_t level_begin,
                       int types, int n, std::vector<std::int32_t>& bucket,
                       std::vector<std::int32_t>& order, std::vector<std::int32_t>& ranked) {
  const auto level_end = static_cast<std::int32_t>(level.size());
  if (level_end == level_begin) return;
  const auto low = [&](std::int32_t k) {
    const std::int64_t key = level[static_cast<std::size_t>(k)].key;
    return static_cast<std::size_t>(((key >> kKeyTypeShift) & 0xfff) * (n + 1) +
                                    (key & kKeyLayersMask));
  };
  const auto high = [&](std::int32_t k) {
    return static_cast<std::size_t>(level[static_cast<std::size_t>(k)].key >> 32);
  };
  const auto count = static_cast<std::size_t>(level_end - level_begin);
  if (count <= 32) {  // a few labels (deep pipelines): sort them directly
    ranked.resize(count);
    for (std::size_t r = 0; r < count; ++r) ranked[r] = level_begin + static_cast<std::int32_t>(r);
    for (std::size_t a = 1; a < count; ++a) {
      const std::int32_t x = ranked[a];
      const std::int64_t key = level[static_cast<std::size_t>(x)].key;
      std::size_t b = a;
      for (; b > 0 && level[static_cast<std::size_t>(ranked[b - 1])].key > key; --b) {
        ranked[b] = ranked[b - 1];
      }
      ranked[b] = x;
    }
    for (std::size_t r = 0; r < count; ++r) {
      level[static_cast<std::size_t>(ranked[r])].rank = static_cast<std::int32_t>(r);
    }
    return;
  }
  bucket.assign(static_cast<std::size_t>(types) * (static_cast<std::size_t>(n) + 1) + 1, 0);
  for (std::int32_t k = level_begin; k < level_end; ++k) ++bucket[low(k) + 1];
  for (std::size_t r = 1; r < bucket.size(); ++r) bucket[r] += bucket[r - 1];
  order.resize(count);
  for (std::int32_t k = level_begin; k < level_end; ++k) {
    order[static_cast<std::size_t>(bucket[low(k)]++)] = k;
  }
  bucket.assign(static_cast<std::size_t>(parents) + 1, 0);
  for (std::int32_t k = level_begin; k < level_end; ++k) ++bucket[high(k) + 1];
  for (std::size_t r = 1; r < bucket.size(); ++r) bucket[r] += bucket[r - 1];
  ranked.resize(count);
  for (const std::int32_t k : order) ranked[static_cast<std::size_t>(bucket[high(k)]++)] = k;
  for (std::size_t r = 0; r < count; ++r) {
    level[static_cast<std::size_t>(ranked[r])].rank = static_cast<std::int32_t>(r);
  }
}

}  // namespace hapmoe::hsdp
