// Test helper for the readers' errors: runs a call that must throw
// InputError and returns where() and what(), failing the test otherwise.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

#include "costmodel/errors.h"

namespace hapmoe::test {

struct Caught {
  std::string where;
  std::string what;
};

inline Caught catch_input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return {e.where(), e.what()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return {};
}

}  // namespace hapmoe::test
