// Regular files in, atomic files out (files.h). POSIX calls rather than
// std::filesystem and iostreams where it matters: O_NONBLOCK so a FIFO
// never blocks an open, O_EXCL so a planted symlink is never followed, and
// errno read right after the call that failed.
#include "io/inputs/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <random>

#include "costmodel/errors.h"

namespace hapmoe {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// What a file that is not a regular file is, for messages.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now; returns 0 or the errno of close.
  int close() {
    const int r = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return r == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

fs::path directory_of(const fs::path& target) {
  return target.has_parent_path() ? target.parent_path() : fs::path(".");
}

// The temporaries' names (files.h): "." + NAME cut so that the longest
// suffix (".tmp." + 10 digits + "." + 6) still fits NAME_MAX.
constexpr std::size_t kSuffixMax = 5 + 10 + 1 + 6;
constexpr std::size_t kNameMax = NAME_MAX;

std::string temporary_prefix(const fs::path& target) {
  std::string name = target.filename().string();
  if (name.size() > kNameMax - 1 - kSuffixMax) name.resize(kNameMax - 1 - kSuffixMax);
  return "." + name + ".tmp.";
}

std::string random_part() {
  static constexpr char kChars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<std::uint64_t>(::getpid()) << 32)};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sizeof kChars) - 2);
  std::string s(6, '0');
  for (char& c : s) c = kChars[pick(rng)];
  return s;
}

// An output path that exists must be a regular file (or a symlink to
// one): a FIFO, device or socket there is never replaced. (A directory
// cannot be: the rename fails, with EISDIR.)
void refuse_special_target(const std::string& path, const std::string& where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return;
  if (!S_ISREG(st.st_mode)) {
    throw InputError(where,
                     "is " + kind_of(st.st_mode) + ", not a regular file; refusing to replace it");
  }
}

// A new empty file for `target` (create_temporary with open(2)); returns
// its descriptor and sets `tmp`.
int open_temporary(const std::string& target, const std::string& where, std::string& tmp) {
  int fd = -1;
  tmp = create_temporary(
      target,
      [&](const std::string& name) {
        fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) return true;
        const int e = errno;
        if (e == EEXIST) return false;
        throw InputError(where, "cannot create a file in " + directory_of(target).string() + ": " +
                                    errno_text(e));
      },
      where);
  return fd;
}

}  // namespace

// --- Inputs -------------------------------------------------------------------

void check_regular_file(const std::string& path, const std::string& where) {
  const std::string& w = where.empty() ? path : where;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) throw InputError(w, "no such file");
    throw InputError(w, "cannot be read: " + errno_text(e));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(w, "is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) {
    throw InputError(w, "is " + kind_of(st.st_mode) + ", expected a regular file");
  }
}

std::string read_regular_file(const std::string& path, std::size_t max_bytes) {
  check_regular_file(path);
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int e = errno;
    throw InputError(path, "cannot be opened for reading: " + errno_text(e));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw InputError(path, "is " + kind_of(st.st_mode) + ", expected a regular file");
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      const int e = errno;
      if (e == EINTR) continue;
      throw InputError(path, "read error: " + errno_text(e));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      throw InputError(path, "is larger than " + std::to_string(max_bytes) +
                                 " bytes, too large for an input file");
    }
  }
  return text;
}

// --- Outputs ------------------------------------------------------------------

void check_file_writable(const std::string& path, const std::string& option) {
  const std::string where = option + " " + path;
  if (path.empty()) throw InputError(option, "is empty");
  const fs::path target(path);
  if (!target.has_filename()) throw InputError(where, "names a directory, not a file");
  const std::string name = target.filename().string();
  if (name.size() > kNameMax) {
    throw InputError(where, "the file name has " + std::to_string(name.size()) +
                                " bytes, more than the " + std::to_string(kNameMax) +
                                " a file system allows (NAME_MAX)");
  }
  const fs::path dir = directory_of(target);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw InputError(where, "directory " + dir.string() + " does not exist");
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw InputError(where, "is a directory");
  }
  refuse_special_target(path, where);
  // Creating a temporary is the only reliable test (root ignores
  // permission bits; read-only mounts only show on write).
  std::string tmp;
  const int fd = open_temporary(path, where, tmp);
  ::close(fd);
  ::unlink(tmp.c_str());
}

std::string create_temporary(const std::string& target,
                             const std::function<bool(const std::string& tmp)>& create,
                             const std::string& where) {
  const fs::path t(target);
  const std::string stem =
      (directory_of(t) / temporary_prefix(t)).string() + std::to_string(::getpid()) + ".";
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string tmp = stem + random_part();
    if (create(tmp)) return tmp;
  }
  throw InputError(where, "cannot create a temporary file in " + directory_of(t).string() +
                              ": 100 names tried were all taken");
}

void commit_temporary(const std::string& tmp, const std::string& target, const std::string& where) {
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;  // before unlink can change it
    ::unlink(tmp.c_str());
    throw InputError(
        where, "cannot rename the temporary file " + fs::path(tmp).filename().string() +
                   " into place: " + errno_text(e) + "; the previous file, if any, is untouched");
  }
  const int dfd =
      ::open(directory_of(fs::path(target)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename itself is durable after this
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  refuse_special_target(path, path);
  std::string tmp;
  Fd fd(open_temporary(path, path, tmp));
  const char* p = text.data();
  std::size_t left = text.size();
  int error = 0;
  while (left > 0 && error == 0) {
    const ssize_t n = ::write(fd.get(), p, left);
    if (n < 0) {
      if (errno != EINTR) error = errno;
      continue;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (error == 0 && ::fsync(fd.get()) != 0) error = errno;
  if (const int e = fd.close(); error == 0) error = e;
  if (error != 0) {
    ::unlink(tmp.c_str());
    throw InputError(path,
                     "write failed: " + errno_text(error) + "; the previous file is untouched");
  }
  commit_temporary(tmp, path, path);
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  const auto normalised = [](const std::string& p) {
    std::error_code e;
    fs::path abs = fs::absolute(p, e);
    if (e) abs = fs::path(p);
    fs::path canonical = fs::weakly_canonical(abs, e);
    return e ? abs.lexically_normal() : canonical.lexically_normal();
  };
  return normalised(a) == normalised(b);
}

void refuse_outputs_over_inputs(const std::vector<NamedPath>& outputs,
                                const std::vector<NamedPath>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedPath& in : inputs) {
      std::error_code ec;
      if (in.path.empty() || !fs::exists(in.path, ec)) continue;
      if (same_file(out.path, in.path)) {
        throw InputError(out.option + " " + out.path,
                         "is the file of " + in.option + " " + in.path +
                             ", an input of this run; refusing to write over it");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      const NamedPath& other = outputs[j];
      if (!other.path.empty() && same_file(out.path, other.path)) {
        throw InputError(out.option + " " + out.path, "is also the file of " + other.option + " " +
                                                          other.path +
                                                          "; give each output its own file");
      }
    }
  }
}

void remove_stale_temporaries(const std::string& path) {
  const fs::path target(path);
  const std::string prefix = temporary_prefix(target);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory_of(target), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    // "PID" (the older form) or "PID.XXXXXX".
    std::string pid_text = name.substr(prefix.size());
    if (const auto dot = pid_text.find('.'); dot != std::string::npos) {
      if (pid_text.size() - dot - 1 != 6) continue;
      pid_text.resize(dot);
    }
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos ||
        pid_text.size() > 9) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(e.path(), rm);
    }
  }
}

}  // namespace hapmoe
