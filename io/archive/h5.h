// A thin RAII layer over HDF5's C API (docs/archive.md), in the style of
// HighFive: one small owner type per handle, every C call checked and
// turned into an H5Error that names what was being done and HDF5's own
// message. HDF5's automatic error printing is switched off: library code
// never prints.
//
// Only what the archive needs: files, groups, attributes (scalars and
// UTF-8 strings), 1-D datasets of numbers or of compound records (chunked,
// shuffled and deflated), read back by field name so an archive with more
// fields than a reader knows still reads.
//
// Serial HDF5 only (Debian's libhdf5-dev, thread-safe build): the archive
// is written by rank 0 after the reduction, never collectively.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hapmoe::h5 {

// A failed HDF5 call: `what` names the operation and object, followed by
// the innermost message of HDF5's error stack.
class H5Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One HDF5 identifier and the function that closes it. Move-only.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; throws H5Error if the close fails (a file's close is
  // where buffered data reaches the disk).
  void close(const std::string& what);

 private:
  void reset() noexcept;
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// ---------------------------------------------------------------------------
// Types

// A datatype: owned (compound, string; closed with the object) or one of
// HDF5's predefined types (never closed).
class Type {
 public:
  static Type predefined(hid_t id) { return Type(Handle(id, nullptr)); }
  static Type owned(hid_t id) { return Type(Handle(id, H5Tclose)); }
  hid_t id() const { return handle_.id(); }

 private:
  explicit Type(Handle h) : handle_(std::move(h)) {}
  Handle handle_;
};

// Variable-length UTF-8 string (in memory: a `const char*` / `char*`).
Type utf8_string_type();

template <class T>
Type native();
template <>
inline Type native<std::int32_t>() {
  return Type::predefined(H5T_NATIVE_INT32);
}
template <>
inline Type native<std::int64_t>() {
  return Type::predefined(H5T_NATIVE_INT64);
}
template <>
inline Type native<std::uint8_t>() {
  return Type::predefined(H5T_NATIVE_UINT8);
}
template <>
inline Type native<double>() {
  return Type::predefined(H5T_NATIVE_DOUBLE);
}
template <>
inline Type native<const char*>() {
  return utf8_string_type();
}
template <>
inline Type native<char*>() {
  return utf8_string_type();
}

// A compound type for a plain struct Row: fields added by name and offset.
// String fields are `const char*` (variable-length UTF-8).
template <class Row>
class Compound {
 public:
  Compound() : type_(Type::owned(create())) {}
  template <class Field>
  Compound& add(const char* name, std::size_t offset) {
    insert(name, offset, native<Field>());
    return *this;
  }
  hid_t id() const { return type_.id(); }

 private:
  static hid_t create();
  void insert(const char* name, std::size_t offset, const Type& field);
  Type type_;
};

hid_t create_compound(std::size_t size);
void insert_field(hid_t compound, const char* name, std::size_t offset, hid_t field);

template <class Row>
hid_t Compound<Row>::create() {
  return create_compound(sizeof(Row));
}
template <class Row>
void Compound<Row>::insert(const char* name, std::size_t offset, const Type& field) {
  insert_field(type_.id(), name, offset, field.id());
}

// Adds member `member` of `Row` to compound `c` under its own name.
#define HAPMOE_H5_FIELD(c, Row, member) \
  (c).template add<decltype(Row::member)>(#member, offsetof(Row, member))

// ---------------------------------------------------------------------------
// Objects

class Group;

// Attributes of a group or the file's root. Holds a reference to the
// object, so it stays valid when the Group it came from is gone
// (`f.open_group("sweep").attrs().get_string(...)` is safe).
class Attributes {
 public:
  explicit Attributes(hid_t object);
  void set(const std::string& name, const std::string& value) const;
  void set(const std::string& name, const char* value) const { set(name, std::string(value)); }
  void set(const std::string& name, std::int64_t value) const;
  void set(const std::string& name, int value) const { set(name, std::int64_t{value}); }
  void set(const std::string& name, double value) const;
  bool has(const std::string& name) const;
  // Throw H5Error when absent or of another class.
  std::string get_string(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;

 private:
  Handle ref_;  // one reference to the object, dropped with the Attributes
  hid_t object_;
};

class Group {
 public:
  Group(Handle h, std::string path) : handle_(std::move(h)), path_(std::move(path)) {}
  hid_t id() const { return handle_.id(); }
  const std::string& path() const { return path_; }
  Attributes attrs() const { return Attributes(handle_.id()); }

  Group create_group(const std::string& name) const;
  Group open_group(const std::string& name) const;
  bool has(const std::string& name) const;
  // Names of the links in this group, in name order.
  std::vector<std::string> children() const;

  // A 1-D dataset of numbers, chunked and deflated.
  template <class T>
  void write_array(const std::string& name, const std::vector<T>& values) const {
    write_raw(name, native<T>().id(), values.size(), values.data());
  }
  // A 1-D dataset of compound records, chunked and deflated.
  template <class Row>
  void write_table(const std::string& name, const Compound<Row>& type,
                   const std::vector<Row>& rows) const {
    write_raw(name, type.id(), rows.size(), rows.data());
  }
  template <class T>
  std::vector<T> read_array(const std::string& name) const {
    std::vector<T> out(extent(name));
    read_raw(name, native<T>().id(), 0, out.size(), out.data());
    return out;
  }
  // Reads every record into `Row` (fields matched by name), hands each to
  // `each`, and frees the strings HDF5 allocated: copy them in `each`.
  // Reads kReadBlockRows records at a time, so memory beyond what `each`
  // keeps is bounded whatever the table's length.
  template <class Row>
  void read_table(const std::string& name, const Compound<Row>& type,
                  const std::function<void(const Row&)>& each) const {
    const std::size_t n = extent(name);
    std::vector<Row> rows;
    for (std::size_t first = 0; first < n; first += kReadBlockRows) {
      rows.assign(std::min(kReadBlockRows, n - first), Row{});
      read_raw(name, type.id(), first, rows.size(), rows.data());
      try {
        for (const Row& r : rows) each(r);
      } catch (...) {
        reclaim(type.id(), rows.size(), rows.data());
        throw;
      }
      reclaim(type.id(), rows.size(), rows.data());
    }
  }
  static constexpr std::size_t kReadBlockRows = 1u << 16;
  // Rows of the 1-D dataset `name`. Like every read, refuses a name that is
  // not a hard link (H5Error): a soft link or an external link (which would
  // open another file) where a dataset or group is expected.
  std::size_t extent(const std::string& name) const;
  // Checks, before reading, that dataset `name` holds compound records
  // with every field of `type` by name, text where `type` has text and a
  // number (integer or floating point) where it has a number; with
  // `exact`, and no other field. Throws H5Error naming the field.
  template <class Row>
  void check_table(const std::string& name, const Compound<Row>& type, bool exact) const {
    check_fields(name, type.id(), exact);
  }

  // Copies `name` (a group or dataset, recursively) from `source` into this
  // group under `as`.
  void copy_from(const Group& source, const std::string& name, const std::string& as) const;

 protected:
  void write_raw(const std::string& name, hid_t mem_type, std::size_t n, const void* data) const;
  // Reads records [first, first + n).
  void read_raw(const std::string& name, hid_t mem_type, std::size_t first, std::size_t n,
                void* data) const;
  void check_fields(const std::string& name, hid_t mem_type, bool exact) const;
  // Throws H5Error unless `name` is a hard link of this group.
  void require_hard_link(const std::string& name) const;
  static void reclaim(hid_t mem_type, std::size_t n, void* data);
  Handle handle_;
  std::string path_;
};

// A file; its root group is the File itself.
class File : public Group {
 public:
  // Creates `path`, failing if it exists (the archive writer creates a
  // fresh temporary name).
  static File create(const std::string& path);
  static File open_read(const std::string& path);
  // Flushes and closes; throws H5Error if either fails.
  void close();
  const std::string& file_path() const { return file_; }

 private:
  File(Handle h, std::string path);
  std::string file_;
};

// True if `path` is a readable HDF5 file (no exception, no output). False
// without opening it when `path` is not a regular file.
bool is_hdf5(const std::string& path);

// Throws InputError unless `path` is an existing regular file
// (check_regular_file, io/inputs/files.h). Readers of HDF5 inputs call it
// first: opening a FIFO with no writer would wait forever.
void check_input_file(const std::string& path);

}  // namespace hapmoe::h5
