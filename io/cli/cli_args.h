// Option parsing shared by the commands (io/cli/cli.cpp, io/cli/profile_cli.cpp).
#pragma once

#include <cxxopts.hpp>
#include <optional>
#include <ostream>
#include <string>

namespace hapmoe {

// Parses argv for one command, with -h/--help added; nullopt after printing
// the help to `out`. InputError naming an unexpected argument.
std::optional<cxxopts::ParseResult> parse(cxxopts::Options& o, int argc, const char* const* argv,
                                          std::ostream& out);

// The value of --name, or InputError("--name", "is required").
std::string required(const cxxopts::ParseResult& r, const char* name);

}  // namespace hapmoe
