// Runs a measurement in a forked child with a time limit, so a benchmark
// can try the plain (unpruned) DP without waiting for it forever.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <type_traits>

namespace hapmoe::bench {

// f() in a forked child, its result sent back through a pipe; nullopt if
// it did not finish within limit_s seconds (the child is then killed) or
// failed. The result must be trivially copyable.
template <class F>
auto run_limited(F f, double limit_s) -> std::optional<decltype(f())> {
  using T = decltype(f());
  static_assert(std::is_trivially_copyable_v<T>, "run_limited: result must be trivially copyable");
  std::fflush(stdout);
  int fd[2];
  if (pipe(fd) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fd[0]);
    int rc = 1;
    try {
      const T value = f();
      rc = write(fd[1], &value, sizeof value) == static_cast<ssize_t>(sizeof value) ? 0 : 1;
    } catch (...) {
    }
    _exit(rc);
  }
  close(fd[1]);
  pollfd p{fd[0], POLLIN, 0};
  const int ready = poll(&p, 1, static_cast<int>(limit_s * 1000.0));
  std::optional<T> out;
  if (ready > 0) {
    T value;
    if (read(fd[0], &value, sizeof value) == static_cast<ssize_t>(sizeof value)) out = value;
  } else {
    kill(pid, SIGKILL);
  }
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

}  // namespace hapmoe::bench
