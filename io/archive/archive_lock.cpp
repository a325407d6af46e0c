// The archive's lock (archive_lock.h).
#include "io/archive/archive_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <utility>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

std::string archive_lock_path(const std::string& path) {
  constexpr std::size_t kSuffix = 5;  // ".lock"
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  if (name.size() > NAME_MAX - kSuffix) name.resize(NAME_MAX - kSuffix);
  return (p.parent_path() / (name + ".lock")).string();
}

namespace {

// Who holds the lock, as its lock file says (at most a line, echoed safely).
std::string holder_of(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text.empty() ? "a run that has not yet written who it is" : echo_value(text, 160);
}

}  // namespace

ArchiveLock::ArchiveLock(const std::string& path, const std::string& option)
    : lock_path_(archive_lock_path(path)) {
  const std::string where = option + " " + path;
  // The holder removes its lock file when it ends: a run that opened the
  // file just before may then lock a file that is no longer there, so the
  // lock counts only when the name still leads to the locked file.
  constexpr int kFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | kFlags, 0666);
    // Another user's lock file (left behind, or held): flock needs no
    // write access. Ours is then made afresh once the lock shows it stale.
    const bool read_only = fd < 0 && errno == EACCES;
    if (read_only) fd = ::open(lock_path_.c_str(), O_RDONLY | kFlags);
    if (fd < 0) {
      const int e = errno;
      throw InputError(where,
                       "cannot create its lock file " + lock_path_ + ": " + std::strerror(e));
    }
    struct stat mine {};
    if (::fstat(fd, &mine) != 0 || !S_ISREG(mine.st_mode)) {
      ::close(fd);
      throw InputError(where, "its lock file " + lock_path_ + " is not a regular file");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      if (e == EWOULDBLOCK) {
        const std::string holder = holder_of(fd);
        ::close(fd);
        throw InputError(where, "is being written by another run (" + holder + "; lock file " +
                                    lock_path_ + "); wait for it to end or choose another --out");
      }
      ::close(fd);
      if (e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP) {
        unsupported_ = "cannot lock " + lock_path_ + " (" + std::strerror(e) +
                       "; a file system without locks)";
        ::unlink(lock_path_.c_str());
        return;
      }
      throw InputError(where, "cannot lock " + lock_path_ + ": " + std::strerror(e));
    }
    struct stat now {};
    if (::stat(lock_path_.c_str(), &now) != 0 || now.st_ino != mine.st_ino ||
        now.st_dev != mine.st_dev) {
      ::close(fd);  // removed by the run that held it: lock the new one
      continue;
    }
    if (read_only && ::unlink(lock_path_.c_str()) == 0) {
      ::close(fd);  // stale and not ours to write: make our own
      continue;
    }
    const std::string who = "pid " + std::to_string(::getpid()) + " on host " + host_name() +
                            " since " + utc_now() + "\n";
    // Who holds it is for messages only: a failure here is no reason to stop.
    if (::ftruncate(fd, 0) == 0) {
      [[maybe_unused]] const ssize_t n = ::pwrite(fd, who.data(), who.size(), 0);
    }
    fd_ = fd;
    return;
  }
  throw InputError(where, "cannot lock " + lock_path_ + ": it keeps being replaced");
}

ArchiveLock::ArchiveLock(ArchiveLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      lock_path_(std::move(other.lock_path_)),
      unsupported_(std::move(other.unsupported_)) {}

ArchiveLock& ArchiveLock::operator=(ArchiveLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    lock_path_ = std::move(other.lock_path_);
    unsupported_ = std::move(other.unsupported_);
  }
  return *this;
}

ArchiveLock::~ArchiveLock() { release(); }

void ArchiveLock::release() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still locked (see the constructor)
  ::close(fd_);
  fd_ = -1;
}

}  // namespace hapmoe
