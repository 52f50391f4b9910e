// The project's Python, which carries the test-time references (transformers,
// tokenizers, pyarrow, tensorboard, openai; scripts/python-requirements.txt):
// $RLCORE_PYTHON, else <source>/.venv/bin/python (scripts/setup_python.sh makes
// it; scripts/test.sh runs that first). A missing interpreter or package fails
// the test that needs it, naming the fix: a reference never skips itself.
// Include after catch.hpp.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "test_paths.h"

namespace rlcore_test {

inline std::string reference_python() {
  const char* configured = std::getenv("RLCORE_PYTHON");
  const std::string python =
      configured != nullptr && *configured != '\0' ? configured : source_dir() + "/.venv/bin/python";
  if (::access(python.c_str(), X_OK) != 0) {
    FAIL("no reference Python at " << python << ": run `bash scripts/setup_python.sh` (scripts/test.sh does) "
                                   << "or point RLCORE_PYTHON at an interpreter with scripts/python-requirements.txt");
  }
  return python;
}

// A script under tests/ (path relative to tests/), for run_reference().
inline std::string reference_script(const std::string& relative) { return source_dir() + "/tests/" + relative; }

// Runs `python script args...` and returns its stdout; fails the test with the
// command and everything it printed when it exits non-zero.
inline std::string run_reference(const std::string& script, const std::vector<std::string>& args = {}) {
  auto quote = [](const std::string& word) {
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
  };
  std::string command = quote(reference_python()) + " " + quote(script);
  for (const std::string& arg : args) command += " " + quote(arg);
  command += " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  INFO("reference: " << command << "\n" << output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return output;
}

}  // namespace rlcore_test
