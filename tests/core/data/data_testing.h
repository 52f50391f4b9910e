// Shared by the data tests: a scratch directory removed at the end of a test (tests/common/scratch_dir.h).
// Include after catch.hpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "../../common/error_of.h"
#include "../../common/scratch_dir.h"

namespace rlcore::testing {

using ScratchDir = rlcore_test::ScratchDir;

}  // namespace rlcore::testing
