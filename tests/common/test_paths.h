// Where the tests find the source tree, the build tree, the rlcore binary and
// the plugins they load. The paths live in one generated file
// (tests/common/test_paths.cc.in) rather than in compile definitions of every
// test: a definition that spells the checkout's absolute path changes every
// test file's command line, so ccache could never reuse a test object built in
// another clone (CI builds a fresh one each run).
#pragma once

#include <string>

namespace rlcore_test {

const std::string& source_dir();
const std::string& binary_dir();
// The in-tree plugins, as rlcore --plugins takes them.
const std::string& plugin_build_dir();
// Test-only plugins: fixture ABIs (tests/core), the e2e grader, the broken conformance engines.
const std::string& fixture_plugin_dir();
const std::string& e2e_plugin_dir();
const std::string& conformance_plugin_dir();

// <binary_dir>/bin/<name>
std::string built_executable(const std::string& name);
inline std::string rlcore_executable() { return built_executable("rlcore"); }

}  // namespace rlcore_test
