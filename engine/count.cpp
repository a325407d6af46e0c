// Counting the plain DP without costing it (count.h; docs/search.md,
// "Counting the plain DP").
//
// run_dp's counters depend on the labels only through which fronts are
// non-empty, and with the bound off a front is non-empty exactly when a
// move reaches its state (a merge always keeps a label). So the states
// and moves are those of a reachability DP over (u, j, h_prev) with
// run_dp's filters, in run_dp's order:
//   - structure: every later stage needs a layer (max_n = N - j - left);
//     the last stage takes all the layers left;
//   - the window [lo, hi] of (position, type) (pruning 1), counted as the
//     moves between the structural bounds outside it;
//   - the boundary from h_prev (pruning 3): all the window's moves cut;
//   - memory (pruning 2): the window's moves beyond the most layers the
//     stage memo says fit; with the pruning off they are moves like any
//     other (carried, marked infeasible, in the search).
// States with the same (u, h_prev) are one group, their j a bitset; a move
// from j adds a range of layer counts, so the next bits are ranges set,
// and counting costs a few operations per state and type rather than per
// label and move.
//
// The counts of a run are a function of its shape alone (PP, N, the
// limits, the windows, which boundaries are cut, and with pruning 2 where
// memory binds), not of the costs: configurations and stage mixes with
// the same shape (a large cluster has millions of mixes, a few hundred
// thousand shapes) are counted once per thread and looked up after.
#include "engine/count.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace hapmoe::hsdp {

namespace {

// Bits [a, b] of a bitset of words (a <= b).
void set_range(std::uint64_t* w, int a, int b) {
  int wa = a >> 6;
  const int wb = b >> 6;
  const std::uint64_t first = ~std::uint64_t{0} << (a & 63);
  const std::uint64_t last = ~std::uint64_t{0} >> (63 - (b & 63));
  if (wa == wb) {
    w[wa] |= first & last;
    return;
  }
  w[wa] |= first;
  for (++wa; wa < wb; ++wa) w[wa] = ~std::uint64_t{0};
  w[wb] |= last;
}

// What one run of the DP adds to the statistics, and the boundaries
// (h_prev, h) it considered (for hetero_comm_ratio).
struct RunCounts {
  std::int64_t states = 0;
  std::int64_t transitions = 0;
  std::int64_t load_balance = 0;
  std::int64_t memory = 0;
  std::int64_t hetero_comm = 0;
  std::vector<std::uint8_t> considered;  // per (h_prev, h), h_prev != h
};

// The shape of one run: everything its counts depend on but the memory
// verdicts (a callback).
struct Shape {
  int pp = 0;
  int n = 0;
  int types = 0;
  const std::vector<int>* limit = nullptr;
  bool exact_mix = false;
  bool uniform = false;
  bool prune_memory = false;
  bool consider = false;          // comp_threshold > 0: boundaries are compared
  std::vector<std::uint8_t> cut;  // per (h_prev, h): pruning 3 cuts it
  const Windows* win = nullptr;
};

// The DP's states of one level, or of every level at once: per group
// (u code, h_prev + 1), the bitset of the layer counts j reached.
class Groups {
 public:
  // `codes` > 0: one flat table for every level when it is small (codes
  // only grow along a move, so increasing code order is a topological
  // order); otherwise (or 0) a map, one level at a time.
  Groups(std::uint64_t codes, int hspan, int words) : hspan_(hspan), words_(words) {
    const std::uint64_t flat = codes * static_cast<std::uint64_t>(hspan) * words;
    dense_ = codes > 0 && flat <= (std::uint64_t{1} << 23);
    if (dense_) bits_.assign(static_cast<std::size_t>(flat), 0);
  }
  bool dense() const { return dense_; }
  std::uint64_t* at(std::uint64_t code, int hp1) {
    const std::uint64_t key = code * static_cast<std::uint64_t>(hspan_) + hp1;
    if (dense_) return bits_.data() + key * static_cast<std::uint64_t>(words_);
    auto [it, created] = index_.try_emplace(key, static_cast<std::uint32_t>(keys_.size()));
    if (created) {
      keys_.push_back(key);
      bits_.resize(bits_.size() + static_cast<std::size_t>(words_), 0);
    }
    return bits_.data() + static_cast<std::size_t>(it->second) * static_cast<std::size_t>(words_);
  }
  // Sparse only: the groups in order of creation.
  std::size_t size() const { return keys_.size(); }
  std::uint64_t key(std::size_t g) const { return keys_[g]; }
  const std::uint64_t* bits(std::size_t g) const {
    return bits_.data() + g * static_cast<std::size_t>(words_);
  }
  void clear() {
    keys_.clear();
    bits_.clear();
    index_.clear();
  }

 private:
  int hspan_;
  int words_;
  bool dense_ = false;
  std::vector<std::uint64_t> bits_;
  std::vector<std::uint64_t> keys_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;
};

// Counts one run. `fitting(h, i, j, max_n)`: the most layers (at most
// max_n) a stage of type h at position i from layer j fits with (only
// with pruning 2).
template <class Fit>
RunCounts count_run(const Shape& sh, Fit&& fitting) {
  const int pp = sh.pp;
  const int n = sh.n;
  const int types = sh.types;
  const std::vector<int>& limit = *sh.limit;
  const int words = (n + 1 + 63) / 64;
  const int hspan = types + 1;
  std::vector<std::uint64_t> stride(static_cast<std::size_t>(types));
  std::uint64_t full = 0;  // code of u = limit
  std::uint64_t codes = 1;
  for (int h = 0; h < types; ++h) {
    stride[static_cast<std::size_t>(h)] = codes;
    full += codes * static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)]);
    codes *= static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1);
  }
  RunCounts rc;
  rc.considered.assign(static_cast<std::size_t>(types * types), 0);
  std::vector<int> used(static_cast<std::size_t>(types), 0);

  // Expands the states `set` of group (code, hp) at level i into `next`.
  const auto expand = [&](Groups& next, std::uint64_t code, int hp, int i,
                          const std::uint64_t* set) {
    for (int w = 0; w < words; ++w) rc.states += std::popcount(set[w]);
    const int left = pp - i - 1;  // stages after this one
    const int j_top = n - left - 1;  // the states that can still place a stage
    int j_low = -1;
    for (int w = 0; w < words && j_low < 0; ++w) {
      if (set[w] != 0) j_low = w * 64 + std::countr_zero(set[w]);
    }
    if (j_low < 0 || j_low > j_top) return;
    for (int h = 0; h < types; ++h) {
      if (used[static_cast<std::size_t>(h)] >= limit[static_cast<std::size_t>(h)]) continue;
      bool cut = false;
      if (hp >= 0 && hp != h && sh.consider) {
        rc.considered[static_cast<std::size_t>(hp * types + h)] = 1;
        cut = sh.cut[static_cast<std::size_t>(hp * types + h)] != 0;
      }
      const int wlo = sh.win->lo_at(i, h);
      const int whi = sh.win->hi_at(i, h);
      std::uint64_t* dest = nullptr;  // looked up at the first move
      for (int w = 0; w < words && w * 64 <= j_top; ++w) {
        std::uint64_t word = set[w];
        while (word != 0) {
          const int j = w * 64 + std::countr_zero(word);
          word &= word - 1;
          if (j > j_top) break;
          const int max_n = n - j - left;
          const int min_n = left == 0 ? max_n : 1;
          const int lo = std::max(min_n, wlo);
          const int hi = std::min(max_n, whi);
          const int width = std::max(0, hi - lo + 1);
          if (!sh.uniform) rc.load_balance += (max_n - min_n + 1) - width;
          if (cut) {
            rc.hetero_comm += width;
            continue;
          }
          if (width == 0) continue;
          int top = hi;
          if (sh.prune_memory) {
            top = std::min(hi, fitting(h, i, j, max_n));
            rc.memory += hi - std::max(top, lo - 1);
          }
          if (top < lo) continue;
          rc.transitions += top - lo + 1;
          if (dest == nullptr) dest = next.at(code + stride[static_cast<std::size_t>(h)], h + 1);
          set_range(dest, j + lo, j + top);
        }
      }
    }
  };
  const auto complete = [&](std::uint64_t code, const std::uint64_t* set) {
    // Complete plans: all PP stages, all N layers, the mix if required.
    if (!sh.exact_mix || code == full) {
      rc.states += static_cast<std::int64_t>((set[n >> 6] >> (n & 63)) & 1U);
    }
  };

  Groups all(codes, hspan, words);
  if (all.dense()) {
    all.at(0, 0)[0] = 1;  // the root: u = 0, j = 0, no previous type
    int level = 0;        // sum of used
    for (std::uint64_t code = 0; code < codes; ++code) {
      if (code > 0) {  // the next usage vector in mixed radix
        for (int h = 0; h < types; ++h) {
          auto& u = used[static_cast<std::size_t>(h)];
          if (u < limit[static_cast<std::size_t>(h)]) {
            ++u;
            ++level;
            break;
          }
          level -= u;
          u = 0;
        }
      }
      if (level > pp) continue;
      for (int hp1 = code == 0 ? 0 : 1; hp1 <= (code == 0 ? 0 : types); ++hp1) {
        const std::uint64_t* set = all.at(code, hp1);
        bool any = false;
        for (int w = 0; w < words; ++w) any = any || set[w] != 0;
        if (!any) continue;
        if (level == pp) {
          complete(code, set);
        } else {
          expand(all, code, hp1 - 1, level, set);
        }
      }
    }
    return rc;
  }
  // Level by level, each level's groups in a map.
  Groups current(0, hspan, words);
  Groups upcoming(0, hspan, words);
  current.at(0, 0)[0] = 1;
  for (int i = 0; i < pp && current.size() > 0; ++i) {
    upcoming.clear();
    for (std::size_t g = 0; g < current.size(); ++g) {
      const std::uint64_t code = current.key(g) / static_cast<std::uint64_t>(hspan);
      const int hp = static_cast<int>(current.key(g) % static_cast<std::uint64_t>(hspan)) - 1;
      for (int h = 0; h < types; ++h) {
        used[static_cast<std::size_t>(h)] = static_cast<int>(
            code / stride[static_cast<std::size_t>(h)] %
            static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1));
      }
      expand(upcoming, code, hp, i, current.bits(g));
    }
    std::swap(current, upcoming);
  }
  for (std::size_t g = 0; g < current.size(); ++g) {
    complete(current.key(g) / static_cast<std::uint64_t>(hspan), current.bits(g));
  }
  return rc;
}

// The shape of a run and the memory verdicts it reads, as bytes: equal
// keys, equal counts.
void append(std::string& key, std::int32_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string shape_key(const Shape& sh, const std::vector<std::int32_t>& binding) {
  std::string key;
  key.reserve(64);
  for (const int v : {sh.pp, sh.n, sh.types, static_cast<int>(sh.exact_mix),
                      static_cast<int>(sh.uniform), static_cast<int>(sh.prune_memory),
                      static_cast<int>(sh.consider)}) {
    append(key, v);
  }
  for (const int v : *sh.limit) append(key, v);
  for (const std::uint8_t v : sh.cut) append(key, v);
  // The windows of the types used: per type first, middle and last when
  // every middle position has the same (as balanced_windows makes them),
  // else every position.
  for (int h = 0; h < sh.types; ++h) {
    if ((*sh.limit)[static_cast<std::size_t>(h)] == 0) continue;
    bool classes = true;
    for (int i = 2; i < sh.pp - 1 && classes; ++i) {
      classes = sh.win->lo_at(i, h) == sh.win->lo_at(1, h) &&
                sh.win->hi_at(i, h) == sh.win->hi_at(1, h);
    }
    append(key, classes ? -1 : -2);
    for (int i = 0; i < sh.pp; ++i) {
      if (classes && i > 1 && i < sh.pp - 1) continue;
      append(key, sh.win->lo_at(i, h));
      append(key, sh.win->hi_at(i, h));
    }
  }
  append(key, -3);
  for (const std::int32_t v : binding) append(key, v);
  return key;
}

// The memory verdicts of the thread's current configuration (its
// evaluator): with layers of one kind only, a stage's fit does not depend
// on its first layer (the memo shares those entries), so per (type,
// position) the most layers that fit, up to N - PP + 1 (the most any stage
// takes); otherwise per (type, position, first layer).
struct FitCache {
  std::uint32_t generation = 0;
  const Evaluator* ev = nullptr;
  bool one_kind = false;
  int pp = 0;
  int n = 0;
  std::vector<int> fit;  // -1: not known yet

  void reset(const Evaluator& e) {
    if (e.generation() == generation && &e == ev) return;
    generation = e.generation();
    ev = &e;
    pp = e.pi().pp;
    n = e.layers();
    one_kind = e.row(0, 0, 0).run >= n;
    const std::size_t per_type =
        static_cast<std::size_t>(pp) * (one_kind ? 1 : static_cast<std::size_t>(n + 1));
    fit.assign(static_cast<std::size_t>(e.types()) * per_type, -1);
  }
  // The most layers, at most `cap`, that stage (h, i, j) fits with:
  // the memo's verdict, by bisection (fitting is monotone in the layer
  // count; tests/engine Count.FittingIsMonotoneInTheLayerCount), starting
  // from a guess (the neighbouring position's answer) that two verdicts
  // confirm.
  int most(Evaluator& e, int h, int i, int j, int cap, int guess) {
    const Evaluator::Row row = e.row(h, i, j);
    if (e.stage(row, cap).feasible) return cap;
    if (guess >= 0 && guess < cap && (guess == 0 || e.stage(row, guess).feasible) &&
        !e.stage(row, guess + 1).feasible) {
      return guess;
    }
    int lo = 0;
    int hi = cap - 1;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (e.stage(row, mid).feasible) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
  // One kind: the most layers at (h, i), up to N - PP + 1.
  int at(Evaluator& e, int h, int i) {
    int& f = fit[static_cast<std::size_t>(h) * static_cast<std::size_t>(pp) +
                 static_cast<std::size_t>(i)];
    if (f < 0) {
      const int guess = i > 0 ? fit[static_cast<std::size_t>(h) * static_cast<std::size_t>(pp) +
                                    static_cast<std::size_t>(i - 1)]
                              : -1;
      f = most(e, h, i, 0, n - pp + 1, guess);
    }
    return f;
  }
  // Any kind: the most layers at (h, i, j), up to max_n.
  int at(Evaluator& e, int h, int i, int j, int max_n) {
    if (one_kind) return std::min(at(e, h, i), max_n);
    int& f = fit[(static_cast<std::size_t>(h) * static_cast<std::size_t>(pp) +
                  static_cast<std::size_t>(i)) *
                     static_cast<std::size_t>(n + 1) +
                 static_cast<std::size_t>(j)];
    // max_n depends on (i, j) alone: cached as is.
    if (f < 0) f = most(e, h, i, j, max_n, -1);
    return f;
  }
};

// Counted shapes, per thread; cleared when this large (keys of a few
// dozen bytes: about 100 MB).
constexpr std::size_t kMaxShapes = std::size_t{1} << 20;

}  // namespace

void count_dp(Evaluator& ev, const std::vector<int>& limit, bool exact_mix, const Windows& win,
              const SearchOptions& opt, double comp_threshold, const CancelCheck* cancel,
              ConfigOutcome& out) {
  if (cancel != nullptr && (*cancel)(0)) {
    out.cancelled = true;
    return;
  }
  const int types = ev.types();
  const int pp = ev.pi().pp;
  const int n = ev.layers();
  Shape sh;
  sh.pp = pp;
  sh.n = n;
  sh.types = types;
  sh.limit = &limit;
  sh.exact_mix = exact_mix;
  sh.uniform = opt.uniform;
  sh.prune_memory = opt.prune.memory;
  sh.consider = comp_threshold > 0;
  sh.win = &win;
  // The boundary transfers per (h_prev, h), as run_dp compares them.
  std::vector<double> t_comm(static_cast<std::size_t>(types * types), 0.0);
  sh.cut.assign(t_comm.size(), 0);
  for (int hp = 0; hp < types; ++hp) {
    for (int h = 0; h < types; ++h) {
      if (hp == h || limit[static_cast<std::size_t>(hp)] == 0 ||
          limit[static_cast<std::size_t>(h)] == 0) {
        continue;
      }
      const CostModel::Boundary& b = ev.boundary(hp, h);
      const auto k = static_cast<std::size_t>(hp * types + h);
      t_comm[k] = b.fwd_s + b.bwd_s;
      sh.cut[k] = opt.prune.hetero_comm && sh.consider && t_comm[k] > comp_threshold ? 1 : 0;
    }
  }
  thread_local FitCache fits;
  thread_local std::unordered_map<std::string, RunCounts> shapes;
  if (sh.prune_memory) fits.reset(ev);
  const auto fitting = [&](int h, int i, int j, int max_n) {
    return fits.at(ev, h, i, j, max_n);
  };
  // With pruning 2 the key holds where memory binds: per (type, position)
  // of the mix, the most layers that fit when fewer than the window's
  // top and the most a stage takes (N - PP + 1). Not for layers of
  // several kinds (a verdict per first layer): those are counted anew.
  std::vector<std::int32_t> binding;
  bool keyed = true;
  if (sh.prune_memory) {
    keyed = fits.one_kind;
    for (int h = 0; h < types && keyed; ++h) {
      if (limit[static_cast<std::size_t>(h)] == 0) continue;
      for (int i = 0; i < pp; ++i) {
        const int f = fits.at(ev, h, i);
        if (f < std::min(win.hi_at(i, h), n - pp + 1)) {
          binding.push_back(h);
          binding.push_back(i);
          binding.push_back(f);
        }
      }
    }
  }
  const RunCounts* rc = nullptr;
  RunCounts fresh;
  std::string key;
  if (keyed) {
    key = shape_key(sh, binding);
    if (auto it = shapes.find(key); it != shapes.end()) rc = &it->second;
  }
  if (rc == nullptr) {
    fresh = count_run(sh, fitting);
    rc = &fresh;
    if (keyed) {
      if (shapes.size() >= kMaxShapes) shapes.clear();
      rc = &shapes.emplace(std::move(key), std::move(fresh)).first->second;
    }
  }
  SearchStats& s = out.stats;
  s.states += rc->states;
  s.transitions += rc->transitions;
  s.pruned_load_balance += rc->load_balance;
  s.pruned_memory += rc->memory;
  s.pruned_hetero_comm += rc->hetero_comm;
  for (std::size_t k = 0; k < t_comm.size(); ++k) {
    if (rc->considered[k] != 0) {
      s.hetero_comm_ratio = std::max(s.hetero_comm_ratio, t_comm[k] * opt.eta / comp_threshold);
    }
  }
}

}  // namespace hapmoe::hsdp
