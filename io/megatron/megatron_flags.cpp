// Look-ups in the flag list; the list itself is compiled in from the data
// file by io/megatron/CMakeLists.txt (megatron_flags_data.cpp.in).
#include "io/megatron/megatron_flags.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace hapmoe {

bool is_megatron_flag(std::string_view name) {
  const auto flags = megatron_flags();
  return std::binary_search(flags.begin(), flags.end(), name);
}

std::string nearest_megatron_flag(std::string_view name) {
  constexpr std::size_t kMaxEdits = 2;
  std::string best;
  std::size_t best_edits = kMaxEdits + 1;
  std::vector<std::size_t> row, prev;
  for (const std::string_view flag : megatron_flags()) {
    const std::size_t gap =
        flag.size() > name.size() ? flag.size() - name.size() : name.size() - flag.size();
    if (gap >= best_edits) continue;
    // Levenshtein distance, one row at a time.
    prev.resize(flag.size() + 1);
    row.resize(flag.size() + 1);
    for (std::size_t j = 0; j <= flag.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= name.size(); ++i) {
      row[0] = i;
      for (std::size_t j = 1; j <= flag.size(); ++j) {
        row[j] = std::min(
            {prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (name[i - 1] == flag[j - 1] ? 0 : 1)});
      }
      std::swap(row, prev);
    }
    if (prev[flag.size()] < best_edits) {
      best_edits = prev[flag.size()];
      best = std::string(flag);
    }
  }
  return best;
}

}  // namespace hapmoe
