// Running the rlcore command line in-process (with the in-tree plugins it
// finds on its own: the test binary lives in build/bin, next to build/plugins).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rlcore/core/cli/cli.h"

namespace cli_test {

struct CliResult {
  int status;
  std::string out;
  std::string err;
};

inline CliResult run(const std::vector<std::string>& args, const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int status = rlcore::cli::run_cli(args, in, out, err);
  return {status, out.str(), err.str()};
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace cli_test
