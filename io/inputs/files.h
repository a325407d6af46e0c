// Files in and files out, for every library that reads or writes one.
//
// Inputs must be regular files: a FIFO, a device, a socket or a directory
// is refused at once with a one-line message, never opened in a way that
// waits (a FIFO with no writer would block an open or a read forever).
//
// Outputs are replaced atomically through a temporary file in the target's
// directory. The temporary is created with O_CREAT|O_EXCL under a name with
// a random part, so a symlink planted in the directory is never followed
// (O_EXCL fails on it and another name is tried), and its name is cut so it
// fits NAME_MAX whatever the target's length:
//   "." + NAME (cut to 232 bytes) + ".tmp." + PID + "." + 6 random characters.
// The PID lets a later writer remove the leftovers of a killed one
// (remove_stale_temporaries).
//
// Every error is an InputError naming the option or file, the path and the
// cause (strerror of the errno of the call that failed).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace hapmoe {

// --- Inputs -----------------------------------------------------------------

// Throws InputError(`where` or `path`, ...) unless `path` names an existing
// regular file (symlinks followed): "no such file", "is a directory,
// expected a file", "is a FIFO (named pipe), expected a regular file", ...
// Never opens the file, so never blocks.
void check_regular_file(const std::string& path, const std::string& where = "");

// Reads a whole regular file of at most `max_bytes`. The file is checked
// with stat, opened with O_NONBLOCK and checked again on the descriptor
// (it may have been replaced in between). Throws InputError naming `path`.
std::string read_regular_file(const std::string& path, std::size_t max_bytes = 64u << 20);

// --- Outputs ----------------------------------------------------------------

// Before a long run: throws InputError naming `option` and `path` unless an
// atomic write of `path` could succeed: a file name (at most NAME_MAX bytes)
// in an existing directory where a file can be created, and `path` either
// absent or a regular file (a FIFO, device or directory there is refused,
// never replaced).
void check_file_writable(const std::string& path, const std::string& option);

// Creates the temporary file for `target` (see above): calls
// `create(name)` with fresh names until it returns true. `create` must
// create the file exclusively (O_CREAT|O_EXCL, or HDF5's H5F_ACC_EXCL) and
// return false when the name is taken; any other failure it throws.
// Returns the name created. Throws InputError(`where`) after 100 names
// taken.
std::string create_temporary(const std::string& target,
                             const std::function<bool(const std::string& tmp)>& create,
                             const std::string& where);

// Renames the finished (closed, fsync'ed) temporary `tmp` over `target`
// and fsyncs the directory. On failure removes `tmp` and throws
// InputError(`where`, "cannot rename ... into place: <strerror>").
void commit_temporary(const std::string& tmp, const std::string& target, const std::string& where);

// Writes `text` to `path` through a temporary file in the same directory,
// fsync'ed and renamed, so `path` is either the old file or the whole new
// one. Throws InputError naming the path on failure (also when `path` is a
// directory, FIFO, device or socket, which is never replaced); no
// temporary is left.
void write_file_atomic(const std::string& path, const std::string& text);

// --- Outputs over inputs ---------------------------------------------------

// An option and the file it names ("--model", "m.json").
struct NamedPath {
  std::string option;
  std::string path;
};

// Whether `a` and `b` name one file: by identity (std::filesystem::equivalent,
// so symlinks, hard links and different spellings count) where both exist,
// else by normalised absolute path (weakly_canonical: the existing part of
// the path with its symlinks resolved).
bool same_file(const std::string& a, const std::string& b);

// Before a run: throws InputError naming both options and the path when an
// output is one of the inputs (writing it would destroy what the run read)
// or when two outputs are one file. An input that is not a file on disk (a
// preset name, or a missing file, which its reader reports) cannot be
// overwritten and is skipped; empty paths are skipped.
void refuse_outputs_over_inputs(const std::vector<NamedPath>& outputs,
                                const std::vector<NamedPath>& inputs);

// Removes the temporary files of earlier writers of `path` that were killed
// (temporaries of `path` whose PID is no longer a live process on this
// host; the older form ".NAME.tmp.PID" too).
void remove_stale_temporaries(const std::string& path);

}  // namespace hapmoe
