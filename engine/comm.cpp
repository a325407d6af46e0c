#include "engine/comm.h"

#include <cstdlib>

namespace hapmoe {

void SerialComm::abort(int code) { std::_Exit(code); }

std::string first_error(Comm& comm, const std::string& mine) {
  const std::vector<std::string> all = comm.allgather(mine);
  for (const std::string& e : all) {
    if (!e.empty()) return e;
  }
  return {};
}

}  // namespace hapmoe
