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
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace hapmoe::hsdp {

namespace {

// Bits [a, b] of a bitset of words (a <= b).
[[gnu::always_inline]] inline void set_range(std::uint64_t* w, int a, int b) {
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

// Positions of a word's bits, bit b of the position: sum of the positions
// of a word's set bits = sum over b of 2^b x popcount(word & kPosBit[b]).
constexpr std::uint64_t kPosBit[6] = {0xAAAAAAAAAAAAAAAAULL, 0xCCCCCCCCCCCCCCCCULL,
                                      0xF0F0F0F0F0F0F0F0ULL, 0xFF00FF00FF00FF00ULL,
                                      0xFFFF0000FFFF0000ULL, 0xFFFFFFFF00000000ULL};

// The bits of `s` in [a, b]: how many, and the sum of their positions.
[[gnu::always_inline]] inline void range_stats(const std::uint64_t* s, int a, int b,
                                               std::int64_t& count, std::int64_t& sum) {
  count = 0;
  sum = 0;
  if (a > b) return;
  for (int w = a >> 6; w <= b >> 6; ++w) {
    std::uint64_t m = s[w];
    if (w == a >> 6) m &= ~std::uint64_t{0} << (a & 63);
    if (w == b >> 6) m &= ~std::uint64_t{0} >> (63 - (b & 63));
    if (m == 0) continue;
    const int pop = std::popcount(m);
    count += pop;
    std::int64_t within = 0;
    for (int k = 0; k < 6; ++k) within += std::int64_t{std::popcount(m & kPosBit[k])} << k;
    sum += std::int64_t{w} * 64 * pop + within;
  }
}

[[gnu::always_inline]] inline std::int64_t range_count(const std::uint64_t* s, int a, int b) {
  std::int64_t count = 0;
  std::int64_t sum = 0;
  range_stats(s, a, b, count, sum);
  return count;
}

// acc |= acc << by, in place (words from the top down).
[[gnu::always_inline]] inline void shift_or(std::uint64_t* acc, int words, int by) {
  const int ws = by >> 6;
  const int bs = by & 63;
  for (int w = words - 1; w >= ws; --w) {
    std::uint64_t v = acc[w - ws] << bs;
    if (bs != 0 && w - ws - 1 >= 0) v |= acc[w - ws - 1] >> (64 - bs);
    acc[w] |= v;
  }
}

// out = s << by (out zeroed first).
[[gnu::always_inline]] inline void shift_to(const std::uint64_t* s, std::uint64_t* out, int words,
                                            int by) {
  const int ws = by >> 6;
  const int bs = by & 63;
  for (int w = 0; w < words; ++w) {
    std::uint64_t v = 0;
    if (w - ws >= 0) {
      v = s[w - ws] << bs;
      if (bs != 0 && w - ws - 1 >= 0) v |= s[w - ws - 1] >> (64 - bs);
    }
    out[w] = v;
  }
}

// The groups of one DP level: per (u code, h_prev + 1), the bitset of the
// layer counts j reached, in order of creation. A key belongs to one level
// (the code fixes the stages placed), so one index serves every level of
// a run: a flat table of the thread's, reset after use, when the keys are
// few enough, else a map.
class Level {
 public:
  Level(std::vector<std::int32_t>* flat, int words) : flat_(flat), words_(words) {}
  std::uint64_t* at(std::uint64_t key) {
    std::size_t g = 0;
    if (flat_ != nullptr) {
      std::int32_t& slot = (*flat_)[static_cast<std::size_t>(key)];
      if (slot < 0) {
        slot = static_cast<std::int32_t>(keys_.size());
        add(key);
      }
      g = static_cast<std::size_t>(slot);
    } else {
      auto [it, created] = map_.try_emplace(key, static_cast<std::uint32_t>(keys_.size()));
      if (created) add(key);
      g = it->second;
    }
    return bits_.data() + g * static_cast<std::size_t>(words_);
  }
  std::size_t size() const { return keys_.size(); }
  std::uint64_t key(std::size_t g) const { return keys_[g]; }
  const std::uint64_t* bits(std::size_t g) const {
    return bits_.data() + g * static_cast<std::size_t>(words_);
  }
  void clear() {
    if (flat_ != nullptr) {
      for (const std::uint64_t k : keys_) (*flat_)[static_cast<std::size_t>(k)] = -1;
    }
    keys_.clear();
    bits_.clear();
    map_.clear();
  }

 private:
  void add(std::uint64_t key) {
    keys_.push_back(key);
    bits_.resize(bits_.size() + static_cast<std::size_t>(words_), 0);
  }
  std::vector<std::int32_t>* flat_;
  int words_;
  std::vector<std::uint64_t> bits_;
  std::vector<std::uint64_t> keys_;
  std::unordered_map<std::uint64_t, std::uint32_t> map_;
};

// Counts one run. `fitting(h, i, j, max_n)`: the most layers (at most
// max_n) a stage of type h at position i from layer j fits with;
// `position_fit(h, i)`: the same for every j when it does not depend on j
// (up to N - PP + 1, the most a stage takes), else -1. Both only with
// pruning 2.
//
// A group's moves are counted per state (a loop over its bits) or, when
// the window and the fit do not depend on j, for all its states at once:
// a state j of level i with L = max(1, lo) and C = N - stages left takes
// between L and min(A, C - j) layers for a top A, so the moves sum to
// (A - L + 1) x #{j <= C - A} + sum over C - A < j <= C - L of
// (C - L + 1 - j), and the states reached are the bits dilated by [L, A]
// below C (the last stage: j = N - layers).
//
// Cloned for CPUs with and without POPCNT (chosen at run time): the
// software popcount took a tenth of the time. Not under ThreadSanitizer:
// the clones' resolver (an ifunc) runs before the sanitizer's runtime is
// up, and test_engine crashed as it started (CI, build-tsan).
#if defined(__SANITIZE_THREAD__)
#define HAPMOE_POPCNT_CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAPMOE_POPCNT_CLONES
#endif
#endif
#ifndef HAPMOE_POPCNT_CLONES
#define HAPMOE_POPCNT_CLONES [[gnu::target_clones("popcnt", "default")]]
#endif
using FitAt = std::function<int(int h, int i, int j, int max_n)>;
using PositionFitAt = std::function<int(int h, int i)>;
HAPMOE_POPCNT_CLONES RunCounts count_run(const Shape& sh, const FitAt& fitting,
                                         const PositionFitAt& position_fit) {
  const int pp = sh.pp;
  const int n = sh.n;
  const int types = sh.types;
  const std::vector<int>& limit = *sh.limit;
  const int words = (n + 1 + 63) / 64;
  const auto hspan = static_cast<std::uint64_t>(types + 1);
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
  std::vector<std::uint64_t> clipped(static_cast<std::size_t>(words));
  std::vector<std::uint64_t> reach(static_cast<std::size_t>(words));

  // Expands the states `set` of group (code, hp) at level i into `next`.
  // (Inlined: a lambda is not cloned with its caller.)
  const auto expand = [&](Level & next, std::uint64_t code, int hp, int i, const std::uint64_t* set)
      __attribute__((always_inline)) {
    for (int w = 0; w < words; ++w) rc.states += std::popcount(set[w]);
    const int left = pp - i - 1;  // stages after this one
    const int cap = n - left;     // the most layers covered after it
    const int j_top = cap - 1;    // the states that can still place a stage
    // The states that can, and their count and sum of j.
    std::int64_t count = 0;
    std::int64_t sum = 0;
    range_stats(set, 0, j_top, count, sum);
    if (count == 0) return;
    for (int w = 0; w < words; ++w) {
      const int from = w * 64;
      clipped[static_cast<std::size_t>(w)] =
          from > j_top         ? 0
          : from + 63 <= j_top ? set[w]
                               : set[w] & (~std::uint64_t{0} >> (63 - (j_top - from)));
    }
    const std::uint64_t* s = clipped.data();
    for (int h = 0; h < types; ++h) {
      if (used[static_cast<std::size_t>(h)] >= limit[static_cast<std::size_t>(h)]) continue;
      bool cut = false;
      if (hp >= 0 && hp != h && sh.consider) {
        rc.considered[static_cast<std::size_t>(hp * types + h)] = 1;
        cut = sh.cut[static_cast<std::size_t>(hp * types + h)] != 0;
      }
      const int wlo = sh.win->lo_at(i, h);
      const int whi = sh.win->hi_at(i, h);
      const std::uint64_t next_key =
          (code + stride[static_cast<std::size_t>(h)]) * hspan + static_cast<std::uint64_t>(h + 1);
      const int fit = sh.prune_memory ? position_fit(h, i) : cap;
      if (fit < 0 || count_state_by_state) {  // the fit depends on j: state by state
        std::uint64_t* dest = nullptr;        // looked up at the first move
        for (int w = 0; w < words && w * 64 <= j_top; ++w) {
          std::uint64_t word = s[w];
          while (word != 0) {
            const int j = w * 64 + std::countr_zero(word);
            word &= word - 1;
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
            if (dest == nullptr) dest = next.at(next_key);
            set_range(dest, j + lo, j + top);
          }
        }
        continue;
      }
      if (left == 0) {
        // The last stage takes the N - j layers left: a move when they
        // are within the window (and fit), every other one cut by it.
        const std::int64_t in_window = range_count(s, std::max(0, n - whi), n - wlo);
        if (!sh.uniform) rc.load_balance += count - in_window;
        if (cut) {
          rc.hetero_comm += in_window;
          continue;
        }
        const std::int64_t moves =
            fit >= cap ? in_window : range_count(s, std::max(0, n - std::min(whi, fit)), n - wlo);
        rc.memory += in_window - moves;
        rc.transitions += moves;
        if (moves > 0) {
          std::uint64_t* dest = next.at(next_key);
          dest[n >> 6] |= std::uint64_t{1} << (n & 63);
        }
        continue;
      }
      const int low = std::max(1, wlo);
      // Moves from the states with top a: sum of max(0, min(a, cap - j) - low + 1).
      const auto moves_up_to = [&](int a) -> std::int64_t {
        if (a < low) return 0;
        std::int64_t c1 = 0;
        std::int64_t s1 = 0;
        std::int64_t c2 = 0;
        std::int64_t s2 = 0;
        range_stats(s, 0, std::min(j_top, cap - a), c1, s1);
        range_stats(s, std::max(0, cap - a + 1), std::min(j_top, cap - low), c2, s2);
        return c1 * (a - low + 1) + c2 * (cap - low + 1) - s2;
      };
      const std::int64_t in_window = moves_up_to(whi);
      if (!sh.uniform) rc.load_balance += count * cap - sum - in_window;
      if (cut) {
        rc.hetero_comm += in_window;
        continue;
      }
      const int top = sh.prune_memory ? std::min(whi, fit) : whi;
      const std::int64_t moves = top >= whi ? in_window : moves_up_to(top);
      rc.memory += in_window - moves;
      rc.transitions += moves;
      if (moves == 0) continue;
      // The states reached: j + low .. min(j + top, cap).
      shift_to(s, reach.data(), words, low);
      for (int covered = 1; covered < top - low + 1;) {
        const int by = std::min(covered, top - low + 1 - covered);
        shift_or(reach.data(), words, by);
        covered += by;
      }
      std::uint64_t* dest = next.at(next_key);
      for (int w = 0; w < words; ++w) {
        const int from = w * 64;
        if (from > cap) break;
        const std::uint64_t r = reach[static_cast<std::size_t>(w)];
        dest[w] |= from + 63 <= cap ? r : r & (~std::uint64_t{0} >> (63 - (cap - from)));
      }
    }
  };

  thread_local std::vector<std::int32_t> flat;
  const std::uint64_t keys = codes * hspan;
  std::vector<std::int32_t>* index = nullptr;
  if (keys <= count_flat_keys) {  // (16 MiB per thread at most)
    if (flat.size() < keys) flat.resize(static_cast<std::size_t>(keys), -1);
    index = &flat;
  }
  Level current(index, words);
  Level upcoming(index, words);
  current.at(0)[0] = 1;  // the root: u = 0, j = 0, no previous type
  for (int i = 0; i < pp && current.size() > 0; ++i) {
    for (std::size_t g = 0; g < current.size(); ++g) {
      const std::uint64_t code = current.key(g) / hspan;
      const int hp = static_cast<int>(current.key(g) % hspan) - 1;
      for (int h = 0; h < types; ++h) {
        used[static_cast<std::size_t>(h)] =
            static_cast<int>(code / stride[static_cast<std::size_t>(h)] %
                             static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1));
      }
      expand(upcoming, code, hp, i, current.bits(g));
    }
    current.clear();
    std::swap(current, upcoming);
  }
  // Complete plans: all PP stages, all N layers, the mix if required.
  for (std::size_t g = 0; g < current.size(); ++g) {
    if (sh.exact_mix && current.key(g) / hspan != full) continue;
    rc.states += static_cast<std::int64_t>((current.bits(g)[n >> 6] >> (n & 63)) & 1U);
  }
  current.clear();
  return rc;
}

// The shape of a run and the memory verdicts it reads, as bytes: equal
// keys, equal counts.
void append(std::string& key, std::int32_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void shape_key(const Shape& sh, const std::vector<std::int32_t>& binding, std::string& key) {
  key.clear();
  for (const int v :
       {sh.pp, sh.n, sh.types, static_cast<int>(sh.exact_mix), static_cast<int>(sh.uniform),
        static_cast<int>(sh.prune_memory), static_cast<int>(sh.consider)}) {
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
      classes =
          sh.win->lo_at(i, h) == sh.win->lo_at(1, h) && sh.win->hi_at(i, h) == sh.win->hi_at(1, h);
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
  thread_local Shape sh;  // (its vector reused)
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
  thread_local std::vector<double> t_comm;
  t_comm.assign(static_cast<std::size_t>(types * types), 0.0);
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
  const auto fitting = [&](int h, int i, int j, int max_n) { return fits.at(ev, h, i, j, max_n); };
  const auto position_fit = [&](int h, int i) { return fits.one_kind ? fits.at(ev, h, i) : -1; };
  // With pruning 2 the key holds where memory binds: per (type, position)
  // of the mix, the most layers that fit when fewer than the window's
  // top and the most a stage takes (N - PP + 1). Not for layers of
  // several kinds (a verdict per first layer): those are counted anew.
  thread_local std::vector<std::int32_t> binding;
  binding.clear();
  bool keyed = count_flat_keys == kCountFlatKeys && !count_state_by_state;
  if (sh.prune_memory) {
    keyed = keyed && fits.one_kind;
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
  thread_local std::string key;
  if (keyed) {
    shape_key(sh, binding, key);
    if (auto it = shapes.find(key); it != shapes.end()) rc = &it->second;
  }
  if (rc == nullptr) {
    fresh = count_run(sh, fitting, position_fit);
    rc = &fresh;
    if (keyed) {
      if (shapes.size() >= kMaxShapes) shapes.clear();
      rc = &shapes.emplace(key, std::move(fresh)).first->second;
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
