// Values as bytes, for a collective that moves them between ranks (the
// driver's bounds and figures, a search run on one rank, a sweep's
// finished cases, plan --resume's committed units): every rank
// runs the same binary on the same machine type, so plain data travels as
// its bytes; what holds vectors or strings is written field by field.
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/search.h"

namespace hapmoe {

class Bytes {
 public:
  Bytes() = default;
  explicit Bytes(std::size_t capacity) { data_.reserve(capacity); }
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    data_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put(const std::string& s) {
    put(s.size());
    data_ += s;
  }
  template <class T>
  void put(const std::vector<T>& v) {
    put(v.size());
    for (const T& x : v) put(x);
  }
  void put(const Plan& p) {
    put(p.parallel);
    put(p.stages);
  }
  void put(const PlanCandidate& c) {
    put(c.latency_s);
    put(c.plan);
  }
  void put(const ConfigOutcome& o) {
    put(o.best.has_value());
    if (o.best) put(*o.best);
    put(o.stats);
    put(o.closest);
    put(o.cancelled);
  }
  const std::string& data() const { return data_; }
  std::string take() { return std::move(data_); }

 private:
  std::string data_;
};

class Unbytes {
 public:
  explicit Unbytes(const std::string& data) : data_(data) {}
  template <class T>
  T get() {
    T v{};
    get(v);
    return v;
  }
  bool done() const { return at_ == data_.size(); }
  template <class T>
  void get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&v, sizeof v);
  }
  void get(std::string& s) {
    std::size_t n = 0;
    get(n);
    if (n > data_.size() - at_) throw std::runtime_error("truncated data from another rank");
    s.assign(data_, at_, n);
    at_ += n;
  }
  template <class T>
  void get(std::vector<T>& v) {
    std::size_t n = 0;
    get(n);
    if (n > data_.size() - at_) throw std::runtime_error("truncated data from another rank");
    v.resize(n);
    for (T& x : v) get(x);
  }
  void get(Plan& p) {
    get(p.parallel);
    get(p.stages);
  }
  void get(PlanCandidate& c) {
    get(c.latency_s);
    get(c.plan);
  }
  void get(ConfigOutcome& o) {
    bool has = false;
    get(has);
    if (has) {
      o.best.emplace();
      get(*o.best);
    }
    get(o.stats);
    get(o.closest);
    get(o.cancelled);
  }

 private:
  void take(void* out, std::size_t n) {
    if (n > data_.size() - at_) throw std::runtime_error("truncated data from another rank");
    std::memcpy(out, data_.data() + at_, n);
    at_ += n;
  }
  const std::string& data_;
  std::size_t at_ = 0;
};

}  // namespace hapmoe
