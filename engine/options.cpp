// The prune set of --prune and sweep files (engine/search.h): "all",
// "none" or a comma list of lb, mem, comm.
#include <string>

#include "costmodel/errors.h"
#include "engine/search.h"

namespace hapmoe {

PruneSet parse_prune_set(const std::string& text, const std::string& where) {
  if (text == "all") return {};
  if (text == "none") return {false, false, false};
  PruneSet p{false, false, false};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == "lb") {
      p.load_balance = true;
    } else if (item == "mem") {
      p.memory = true;
    } else if (item == "comm") {
      p.hetero_comm = true;
    } else {
      throw InputError(where, "unknown pruning \"" + item +
                                  "\" (allowed: all, none, or a comma list of lb, mem, comm)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return p;
}

std::string to_string(const PruneSet& p) {
  if (p.load_balance && p.memory && p.hetero_comm) return "all";
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ',';
    s += name;
  };
  add(p.load_balance, "lb");
  add(p.memory, "mem");
  add(p.hetero_comm, "comm");
  return s.empty() ? "none" : s;
}

}  // namespace hapmoe
