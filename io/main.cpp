// The hapmoe executable: everything is in io/cli.cpp.
#include <iostream>

#include "io/cli.h"

int main(int argc, char** argv) { return hapmoe::run_cli(argc, argv, std::cout, std::cerr); }
