// One writer per archive (docs/archive.md, "One run per archive"): a run
// that writes an archive (sweep, plan, evaluate, compare --out) holds an
// exclusive lock on it from before its search to its end, so a second run
// given the same --out refuses at once, naming the holder, instead of both
// rewriting the file and one silently losing the other's cases.
//
// Policy: flock(2) on a lock file beside the archive, NAME.lock, not a pid
// file created with O_EXCL. The kernel releases a flock when its process
// dies, even by SIGKILL, so a lock file left behind by a killed run is
// merely reused by the next one, never a stale lock to remove by hand (a pid
// file would have to be judged stale, which a pid on another node or a
// reused pid makes unreliable). Linux's NFS client maps flock onto NFS
// locks, so runs on two nodes exclude each other too. The holder writes
// "pid P on host H since T" into the file for the message of the refused
// run. The archive itself cannot carry the lock: each commit renames a new
// file over it.
#pragma once

#include <string>

namespace hapmoe {

// The lock file of the archive `path`: `path` + ".lock" (the name cut so
// that it fits NAME_MAX).
std::string archive_lock_path(const std::string& path);

class ArchiveLock {
 public:
  // Takes the lock of the archive `path` for this process, or throws
  // InputError naming `option` and `path`: another run holds it (who,
  // as its lock file says), or the lock file cannot be created. A file
  // system that has no locks (flock fails with ENOLCK, ENOSYS or
  // EOPNOTSUPP: Lustre mounted without -o flock, NFS without its lock
  // manager) leaves the run unlocked; unsupported() says why.
  explicit ArchiveLock(const std::string& path, const std::string& option = "--out");
  ArchiveLock(ArchiveLock&& other) noexcept;
  ArchiveLock& operator=(ArchiveLock&& other) noexcept;
  ArchiveLock(const ArchiveLock&) = delete;
  ArchiveLock& operator=(const ArchiveLock&) = delete;
  // Removes the lock file, then releases the lock.
  ~ArchiveLock();

  const std::string& lock_path() const { return lock_path_; }
  // "" when locked; else why the run goes on without a lock.
  const std::string& unsupported() const { return unsupported_; }

 private:
  void release();

  int fd_ = -1;
  std::string lock_path_;
  std::string unsupported_;
};

}  // namespace hapmoe
