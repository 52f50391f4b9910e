// The rlcore executable: everything happens in librlcore_core's run_cli.
#include <iostream>
#include <string>
#include <vector>

#include "rlcore/core/cli/cli.h"

int main(int argc, char** argv) {
  return rlcore::cli::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cin, std::cout, std::cerr);
}
