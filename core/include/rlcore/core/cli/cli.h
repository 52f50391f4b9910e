// The rlcore command line: `rlcore [COMMAND] [--plugins PATH]... [options] [key=value ...]`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore::cli {

// Runs one command; returns the process exit status. Errors are printed to `err`.
RLCORE_API int run_cli(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace rlcore::cli
