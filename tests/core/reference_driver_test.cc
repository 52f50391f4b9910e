// The reference driver (tests/common/reference_driver.py) runs every reference script of a test
// binary in one interpreter: each must still see what `python SCRIPT ARGS...` would give it.
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "../common/reference_python.h"

namespace fs = std::filesystem;
using rlcore_test::ReferenceDriver;

namespace {

std::string write_script(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_reference_driver_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("a script in the driver sees its argv, environment, directory and own folder on sys.path", "[reference]") {
  const fs::path dir = scratch();
  std::ofstream(dir / "sibling_module.py") << "VALUE = 'from the sibling'\n";
  const std::string script = write_script(dir, "show.py", R"(import os, sys
import sibling_module
print("argv", sys.argv[1:], "name", __name__)
print("env", os.environ.get("RLCORE_DRIVER_TEST"))
print("cwd", os.getcwd())
print("to stderr", file=sys.stderr)
print(sibling_module.VALUE)
)");
  ::setenv("RLCORE_DRIVER_TEST", "first", 1);
  const ReferenceDriver::Result first = ReferenceDriver::instance().run(script, {"a b", "c'd"});
  INFO(first.output);
  CHECK(first.status == 0);
  CHECK(first.output.find("argv ['a b', \"c'd\"] name __main__") != std::string::npos);
  CHECK(first.output.find("env first") != std::string::npos);
  CHECK(first.output.find("cwd " + fs::current_path().string()) != std::string::npos);
  CHECK(first.output.find("to stderr") != std::string::npos);
  CHECK(first.output.find("from the sibling") != std::string::npos);

  // The environment is the caller's at each call, not the one the driver started with.
  ::setenv("RLCORE_DRIVER_TEST", "second", 1);
  const ReferenceDriver::Result second = ReferenceDriver::instance().run(script, {});
  CHECK(second.output.find("env second") != std::string::npos);
  ::unsetenv("RLCORE_DRIVER_TEST");
  fs::remove_all(dir);
}

TEST_CASE("the driver keeps one interpreter and reports exit statuses as python would", "[reference]") {
  const fs::path dir = scratch();
  const std::string pid = write_script(dir, "pid.py", "import os\nprint(os.getpid())\n");
  const ReferenceDriver::Result a = ReferenceDriver::instance().run(pid, {});
  const ReferenceDriver::Result b = ReferenceDriver::instance().run(pid, {});
  CHECK(a.status == 0);
  CHECK(a.output == b.output);  // the same process: its imports are paid once

  CHECK(ReferenceDriver::instance().run(write_script(dir, "exit3.py", "import sys\nsys.exit(3)\n"), {}).status == 3);
  const ReferenceDriver::Result raised =
      ReferenceDriver::instance().run(write_script(dir, "raise.py", "raise ValueError('bad input 17')\n"), {});
  CHECK(raised.status == 1);
  CHECK(raised.output.find("ValueError: bad input 17") != std::string::npos);

  // A script that kills the interpreter fails its call with how; the next call gets a new driver.
  const ReferenceDriver::Result killed =
      ReferenceDriver::instance().run(write_script(dir, "die.py", "import os\nos._exit(5)\n"), {});
  CHECK(killed.status == -1);
  CHECK(killed.output.find("died: exit status 5") != std::string::npos);
  const ReferenceDriver::Result after = ReferenceDriver::instance().run(pid, {});
  CHECK(after.status == 0);
  CHECK(after.output != a.output);
  fs::remove_all(dir);
}

TEST_CASE("the driver holds none of the test's descriptors", "[reference]") {
  const fs::path dir = scratch();
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);  // inheritable, as a test's server socket or pipe may be
  // A new driver starts now that the pipe exists.
  CHECK(ReferenceDriver::instance().run(write_script(dir, "die.py", "import os\nos._exit(0)\n"), {}).status == -1);
  CHECK(ReferenceDriver::instance().run(write_script(dir, "ok.py", "print('ok')\n"), {}).status == 0);
  ::close(pipe_ends[1]);
  pollfd read_end{pipe_ends[0], POLLIN, 0};
  REQUIRE(::poll(&read_end, 1, 5000) == 1);  // end-of-file at once: no other process holds the write end
  CHECK((read_end.revents & POLLHUP) != 0);
  ::close(pipe_ends[0]);
  fs::remove_all(dir);
}
