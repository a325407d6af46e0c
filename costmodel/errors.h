// Error types shared by every hapmoe library.
//
// Three tiers (see docs/costmodel.md, "Errors"):
//   * InputError: something a user gave us is wrong (a file, a field, a flag).
//     It carries where (file, JSON pointer or option) and what (the value),
//     and the command line turns it into one message and exit code 2.
//   * ContractError: a caller broke a documented precondition of a library
//     function. It names the function; it is a bug, not a user mistake.
//   * assert(): internal invariants, checked in Debug and sanitizer builds.
// Library code never prints and never exits.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace hapmoe {

class InputError : public std::runtime_error {
 public:
  // `where` is a file name, "file:/json/pointer", "--option" or a preset
  // name; `what` says what is wrong and, where it helps, what is allowed.
  InputError(std::string where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what), where_(std::move(where)) {}

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// A cost came out non-finite (NaN, infinity) or negative. Thrown where it
// is computed (CostModel::type_costs, CostModel::evaluate), naming the
// quantity and the inputs that produced it (model, device type, parallel
// degrees), so it never reaches a plan. It is an InputError: the inputs
// are within their documented ranges only if the model has a bug, and
// either way the message says what to look at (docs/costmodel.md,
// "Numerical hygiene").
class NumericError : public InputError {
 public:
  using InputError::InputError;
};

class ContractError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// REQUIRE(cond, message): a precondition of a public function. The message
// should name the function and the offending value.
#define HAPMOE_REQUIRE(cond, message)                    \
  do {                                                   \
    if (!(cond)) throw ::hapmoe::ContractError(message); \
  } while (false)

}  // namespace hapmoe
