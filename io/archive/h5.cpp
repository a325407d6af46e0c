#include "io/archive/h5.h"

#include <sys/stat.h>

#include <algorithm>

#include "io/inputs/files.h"

namespace hapmoe::h5 {

namespace {

// HDF5 prints its error stack to stderr by default; library code never
// prints, so it is switched off once per thread that touches HDF5, and the
// stack's innermost message goes into the H5Error instead.
// HDF5 closes every file still open when the process exits (an atexit
// handler it installs when it starts). A file whose flush failed (disk
// full, a file-size limit) stays half-closed inside the library, and that
// last close then crashes (HDF5 1.10, seen as a SIGSEGV in H5F__close_cb
// after EFBIG). Every file hapmoe opens is closed by its owner, so the
// handler has nothing to do but crash: it is turned off before the
// library starts (before main; nothing else calls HDF5 that early).
const bool kNoAtexit = H5dont_atexit() >= 0;

void silence() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

herr_t innermost(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n == 0 && e->desc != nullptr) *out = e->desc;
  return 0;
}

[[noreturn]] void fail(const std::string& what) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw H5Error(detail.empty() ? what : what + " (HDF5: " + detail + ")");
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) fail(what);
  return id;
}

void check(herr_t status, const std::string& what) {
  if (status < 0) fail(what);
}

// Rows per chunk: about 64 KiB per chunk, at least one row, at most all.
hsize_t chunk_rows(std::size_t n, std::size_t row_bytes) {
  const std::size_t target =
      std::max<std::size_t>(1, (64u << 10) / std::max<std::size_t>(1, row_bytes));
  return static_cast<hsize_t>(std::clamp<std::size_t>(n, 1, target));
}

// Transfer properties with a type-conversion buffer sized to the data:
// HDF5's default is a zeroed 1 MiB buffer per read or write, which costs
// more than writing a small table.
Handle transfer(std::size_t n, hid_t mem_type) {
  Handle dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "transfer properties"), H5Pclose);
  const std::size_t bytes = std::clamp<std::size_t>(n * H5Tget_size(mem_type) * 2, 4096, 1u << 20);
  check(H5Pset_buffer(dxpl.id(), bytes, nullptr, nullptr), "conversion buffer");
  return dxpl;
}

Handle simple_space(std::size_t n, bool unlimited) {
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  const hsize_t max[1] = {unlimited ? H5S_UNLIMITED : static_cast<hsize_t>(n)};
  return Handle(check_id(H5Screate_simple(1, dims, max), "create a dataspace"), H5Sclose);
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ >= 0 && closer_ != nullptr) {
    closer_(id_);
    H5Eclear2(H5E_DEFAULT);
  }
  id_ = H5I_INVALID_HID;
}

void Handle::close(const std::string& what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  if (closer_ != nullptr) check(closer_(id), what);
}

Type utf8_string_type() {
  Type t = Type::owned(check_id(H5Tcopy(H5T_C_S1), "copy the string type"));
  check(H5Tset_size(t.id(), H5T_VARIABLE), "make a variable-length string type");
  check(H5Tset_cset(t.id(), H5T_CSET_UTF8), "set the UTF-8 character set");
  return t;
}

hid_t create_compound(std::size_t size) {
  return check_id(H5Tcreate(H5T_COMPOUND, size), "create a compound type");
}

void insert_field(hid_t compound, const char* name, std::size_t offset, hid_t field) {
  check(H5Tinsert(compound, name, offset, field), std::string("add field ") + name);
}

// --- Attributes -------------------------------------------------------------

namespace {

Handle create_attribute(hid_t object, const std::string& name, hid_t type) {
  if (H5Aexists(object, name.c_str()) > 0) {
    check(H5Adelete(object, name.c_str()), "replace attribute " + name);
  }
  Handle space(check_id(H5Screate(H5S_SCALAR), "create a scalar dataspace"), H5Sclose);
  return Handle(
      check_id(H5Acreate2(object, name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT),
               "create attribute " + name),
      H5Aclose);
}

Handle open_attribute(hid_t object, const std::string& name) {
  return Handle(check_id(H5Aopen(object, name.c_str(), H5P_DEFAULT), "open attribute " + name),
                H5Aclose);
}

H5T_class_t attribute_class(const Handle& a, const std::string& name) {
  Handle type(check_id(H5Aget_type(a.id()), "type of attribute " + name), H5Tclose);
  return H5Tget_class(type.id());
}

}  // namespace

Attributes::Attributes(hid_t object) : object_(object) {
  check(H5Iinc_ref(object), "H5Iinc_ref");
  ref_ = Handle(object, &H5Idec_ref);
}

void Attributes::set(const std::string& name, const std::string& value) const {
  const Type t = utf8_string_type();
  Handle a = create_attribute(object_, name, t.id());
  const char* p = value.c_str();
  check(H5Awrite(a.id(), t.id(), &p), "write attribute " + name);
}

void Attributes::set(const std::string& name, std::int64_t value) const {
  Handle a = create_attribute(object_, name, H5T_STD_I64LE);
  check(H5Awrite(a.id(), H5T_NATIVE_INT64, &value), "write attribute " + name);
}

void Attributes::set(const std::string& name, double value) const {
  Handle a = create_attribute(object_, name, H5T_IEEE_F64LE);
  check(H5Awrite(a.id(), H5T_NATIVE_DOUBLE, &value), "write attribute " + name);
}

bool Attributes::has(const std::string& name) const { return H5Aexists(object_, name.c_str()) > 0; }

std::string Attributes::get_string(const std::string& name) const {
  Handle a = open_attribute(object_, name);
  if (attribute_class(a, name) != H5T_STRING) throw H5Error("attribute " + name + " is not text");
  const Type t = utf8_string_type();
  char* p = nullptr;
  check(H5Aread(a.id(), t.id(), &p), "read attribute " + name);
  std::string s = p == nullptr ? "" : p;
  H5free_memory(p);
  return s;
}

std::int64_t Attributes::get_int(const std::string& name) const {
  Handle a = open_attribute(object_, name);
  if (attribute_class(a, name) != H5T_INTEGER) {
    throw H5Error("attribute " + name + " is not an integer");
  }
  std::int64_t v = 0;
  check(H5Aread(a.id(), H5T_NATIVE_INT64, &v), "read attribute " + name);
  return v;
}

double Attributes::get_double(const std::string& name) const {
  Handle a = open_attribute(object_, name);
  const H5T_class_t c = attribute_class(a, name);
  if (c != H5T_FLOAT && c != H5T_INTEGER) throw H5Error("attribute " + name + " is not a number");
  double v = 0;
  check(H5Aread(a.id(), H5T_NATIVE_DOUBLE, &v), "read attribute " + name);
  return v;
}

// --- Groups and datasets ------------------------------------------------------

namespace {

std::string join(const std::string& path, const std::string& name) {
  return path == "/" ? "/" + name : path + "/" + name;
}

}  // namespace

Group Group::create_group(const std::string& name) const {
  const std::string p = join(path_, name);
  return Group(
      Handle(check_id(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      "create group " + p),
             H5Gclose),
      p);
}

void Group::require_hard_link(const std::string& name) const {
  const std::string p = join(path_, name);
  H5L_info_t info{};
  check(H5Lget_info(id(), name.c_str(), &info, H5P_DEFAULT), "find " + p);
  if (info.type == H5L_TYPE_HARD) return;
  throw H5Error(p +
                (info.type == H5L_TYPE_SOFT       ? " is a soft link"
                 : info.type == H5L_TYPE_EXTERNAL ? " is an external link (to another file)"
                                                  : " is a user-defined link") +
                ", not a dataset or group: hapmoe follows no links");
}

Group Group::open_group(const std::string& name) const {
  const std::string p = join(path_, name);
  require_hard_link(name);
  return Group(
      Handle(check_id(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), "open group " + p), H5Gclose), p);
}

bool Group::has(const std::string& name) const {
  const htri_t r = H5Lexists(id(), name.c_str(), H5P_DEFAULT);
  H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

namespace {

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> Group::children() const {
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names),
        "list group " + path_);
  return names;
}

void Group::write_raw(const std::string& name, hid_t mem_type, std::size_t n,
                      const void* data) const {
  const std::string p = join(path_, name);
  Handle space = simple_space(n, true);
  Handle dcpl(check_id(H5Pcreate(H5P_DATASET_CREATE), "dataset properties"), H5Pclose);
  const hsize_t chunk[1] = {chunk_rows(n, H5Tget_size(mem_type))};
  check(H5Pset_chunk(dcpl.id(), 1, chunk), "chunk " + p);
  check(H5Pset_shuffle(dcpl.id()), "shuffle filter for " + p);
  check(H5Pset_deflate(dcpl.id(), 4), "deflate filter for " + p);
  Handle ds(check_id(H5Dcreate2(id(), name.c_str(), mem_type, space.id(), H5P_DEFAULT, dcpl.id(),
                                H5P_DEFAULT),
                     "create dataset " + p),
            H5Dclose);
  if (n > 0) {
    check(H5Dwrite(ds.id(), mem_type, H5S_ALL, H5S_ALL, transfer(n, mem_type).id(), data),
          "write " + p);
  }
  ds.close("close dataset " + p);
}

std::size_t Group::extent(const std::string& name) const {
  const std::string p = join(path_, name);
  require_hard_link(name);
  Handle ds(check_id(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), "open dataset " + p), H5Dclose);
  Handle space(check_id(H5Dget_space(ds.id()), "dataspace of " + p), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.id()) != 1) throw H5Error(p + " is not one-dimensional");
  hsize_t dims[1] = {0};
  check(H5Sget_simple_extent_dims(space.id(), dims, nullptr), "extent of " + p);
  return static_cast<std::size_t>(dims[0]);
}

void Group::read_raw(const std::string& name, hid_t mem_type, std::size_t first, std::size_t n,
                     void* data) const {
  if (n == 0) return;
  const std::string p = join(path_, name);
  require_hard_link(name);
  Handle ds(check_id(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), "open dataset " + p), H5Dclose);
  Handle file_space(check_id(H5Dget_space(ds.id()), "dataspace of " + p), H5Sclose);
  const hsize_t start[1] = {static_cast<hsize_t>(first)};
  const hsize_t count[1] = {static_cast<hsize_t>(n)};
  check(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start, nullptr, count, nullptr),
        "select rows of " + p);
  Handle mem_space = simple_space(n, false);
  check(
      H5Dread(ds.id(), mem_type, mem_space.id(), file_space.id(), transfer(n, mem_type).id(), data),
      "read " + p);
}

namespace {

// Text or a number: the two kinds of field a reader tells apart.
bool is_text(H5T_class_t c) { return c == H5T_STRING; }
bool is_number(H5T_class_t c) { return c == H5T_INTEGER || c == H5T_FLOAT; }

std::string member_name(hid_t type, unsigned k) {
  char* n = H5Tget_member_name(type, k);
  std::string s = n == nullptr ? "" : n;
  H5free_memory(n);
  return s;
}

}  // namespace

void Group::check_fields(const std::string& name, hid_t mem_type, bool exact) const {
  const std::string p = join(path_, name);
  require_hard_link(name);
  Handle ds(check_id(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), "open dataset " + p), H5Dclose);
  Handle type(check_id(H5Dget_type(ds.id()), "type of " + p), H5Tclose);
  if (H5Tget_class(type.id()) != H5T_COMPOUND) throw H5Error(p + " is not a table of records");
  const int have = H5Tget_nmembers(type.id());
  const int want = H5Tget_nmembers(mem_type);
  if (have < 0 || want < 0) fail("fields of " + p);
  for (unsigned k = 0; k < static_cast<unsigned>(want); ++k) {
    const std::string field = member_name(mem_type, k);
    const int at = H5Tget_member_index(type.id(), field.c_str());
    H5Eclear2(H5E_DEFAULT);
    if (at < 0) throw H5Error(p + " has no field " + field);
    const H5T_class_t wanted = H5Tget_member_class(mem_type, k);
    const H5T_class_t got = H5Tget_member_class(type.id(), static_cast<unsigned>(at));
    if (is_text(wanted) && !is_text(got)) {
      throw H5Error(p + " field " + field + " is not text");
    }
    if (is_number(wanted) && !is_number(got)) {
      throw H5Error(p + " field " + field + " is not a number");
    }
  }
  if (exact && have > want) {
    for (unsigned k = 0; k < static_cast<unsigned>(have); ++k) {
      const std::string field = member_name(type.id(), k);
      if (H5Tget_member_index(mem_type, field.c_str()) < 0) {
        H5Eclear2(H5E_DEFAULT);
        constexpr std::size_t kShown = 64;
        throw H5Error(p + " has an unknown field " +
                      (field.size() > kShown ? field.substr(0, kShown) + "...(" +
                                                   std::to_string(field.size()) + " bytes)"
                                             : field));
      }
    }
  }
}

void Group::reclaim(hid_t mem_type, std::size_t n, void* data) {
  if (n == 0) return;
  Handle space = simple_space(n, false);
  check(H5Dvlen_reclaim(mem_type, space.id(), H5P_DEFAULT, data), "free strings read");
}

void Group::copy_from(const Group& source, const std::string& name, const std::string& as) const {
  check(H5Ocopy(source.id(), name.c_str(), id(), as.c_str(), H5P_DEFAULT, H5P_DEFAULT),
        "copy " + join(source.path(), name) + " to " + join(path_, as));
}

// --- Files --------------------------------------------------------------------

namespace {

// Closing the file closes whatever is still open in it, so a handle kept
// by mistake cannot keep the file open past File::close.
Handle file_access() {
  Handle fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "file access properties"), H5Pclose);
  check(H5Pset_fclose_degree(fapl.id(), H5F_CLOSE_STRONG), "file close degree");
  return fapl;
}

}  // namespace

File::File(Handle h, std::string path) : Group(std::move(h), "/"), file_(std::move(path)) {}

File File::create(const std::string& path) {
  silence();
  Handle fapl = file_access();
  return File(Handle(check_id(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.id()),
                              "create " + path),
                     H5Fclose),
              path);
}

File File::open_read(const std::string& path) {
  silence();
  Handle fapl = file_access();
  return File(
      Handle(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id()), "open " + path), H5Fclose),
      path);
}

void File::close() {
  if (!handle_.valid()) return;
  check(H5Fflush(handle_.id(), H5F_SCOPE_GLOBAL), "flush " + file_);
  handle_.close("close " + file_);
}

bool is_hdf5(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  silence();
  const htri_t r = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

void check_input_file(const std::string& path) { check_regular_file(path); }

}  // namespace hapmoe::h5
