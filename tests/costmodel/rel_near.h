// EXPECT_REL(actual, expected): equal within 1e-12 relative, with both
// values printed to 17 digits on failure. Shared by the cost-model tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>

namespace hapmoe::testing_support {

inline ::testing::AssertionResult RelNear(const char* actual_expr, const char* expected_expr,
                                          double actual, double expected) {
  const double scale = std::max(std::abs(actual), std::abs(expected));
  if (actual == expected || std::abs(actual - expected) <= 1e-12 * scale) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << std::setprecision(17) << actual_expr << " = " << actual << "\n  expected "
         << expected_expr << " = " << expected << "\n  relative difference "
         << std::abs(actual - expected) / scale;
}

}  // namespace hapmoe::testing_support

#define EXPECT_REL(actual, expected) \
  EXPECT_PRED_FORMAT2(::hapmoe::testing_support::RelNear, actual, expected)
