// The python tool from the outside: the code runs and prints, cannot write
// outside its scratch directory, is killed at its wall-clock and CPU limits,
// and what it floods or crashes with comes back bounded, as an error result.
// The isolation itself is attacked in sandbox/ (as root and as nobody).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "python_tool.h"
#include "rlcore/error.h"

using rlcore::tools::PythonTool;
using rlcore::tools::PythonToolOptions;

namespace python_tool_test {

rlcore::ToolResult run(const std::string& code, PythonToolOptions options = {}) {
  const PythonTool tool(options);
  return tool.call({{"code", code}}, rlcore::ToolCallContext{});
}

}  // namespace python_tool_test

using namespace python_tool_test;

TEST_CASE("the code runs and its output is the result", "[python_tool]") {
  const rlcore::ToolResult result = run("print(sum(range(10)))\nprint(open('main.py').read().count('print'))");
  CHECK_FALSE(result.error);
  CHECK(result.text == "45\n3\n");  // main.py holds the program: "print" three times
  const PythonTool tool{PythonToolOptions{}};
  CHECK(tool.schema().name == "python");
  CHECK(tool.call({{"program", "print(1)"}}, {}).error);
}

TEST_CASE("nothing outside the scratch directory is writable, and the directory goes with the call", "[python_tool]") {
  const std::filesystem::path outside =
      std::filesystem::temp_directory_path() / ("rlcore_python_escape_" + std::to_string(::getpid()));
  std::filesystem::remove(outside);
  const rlcore::ToolResult result =
      run("import os\n"
          "open('mine.txt', 'w').write('ok')\n"
          "print('here', open('mine.txt').read(), os.getcwd().startswith('/tmp/rlcore-python-'))\n"
          "for path in ['" +
          outside.string() +
          "', '/root/rlcore_escape', '/usr/rlcore_escape', '/etc/rlcore_escape']:\n"
          "    try:\n"
          "        open(path, 'w').write('escaped')\n"
          "        print('wrote', path)\n"
          "    except OSError as e:\n"
          "        print('refused', type(e).__name__)\n"
          "print(os.getcwd())\n");
  INFO(result.text);
  CHECK_THAT(result.text, Catch::StartsWith("here ok True\nrefused") && !Catch::Contains("wrote"));
  CHECK_FALSE(std::filesystem::exists(outside));
  const std::string scratch = result.text.substr(result.text.rfind('\n', result.text.size() - 2) + 1);
  CHECK_FALSE(std::filesystem::exists(scratch.substr(0, scratch.size() - 1)));
}

TEST_CASE("a program is killed at its wall-clock and CPU limits", "[python_tool]") {
  PythonToolOptions quick;
  quick.timeout_s = 1;
  // Not killed, it would sleep its 60 s and end with exit code 0, not this error.
  const rlcore::ToolResult slept = run("import time\nprint('start', flush=True)\ntime.sleep(60)", quick);
  CHECK(slept.error);
  CHECK_THAT(slept.text, Catch::StartsWith("start") && Catch::Contains("time limit"));

  PythonToolOptions cpu;
  cpu.cpu_seconds = 1;
  cpu.timeout_s = 20;
  const rlcore::ToolResult spun = run("while True:\n    pass", cpu);
  CHECK(spun.error);
  CHECK_THAT(spun.text, Catch::Contains("CPU-time limit"));
}

TEST_CASE("floods, crashes and memory hogs come back bounded, as error results", "[python_tool]") {
  PythonToolOptions options;
  options.max_output_bytes = 1000;
  const rlcore::ToolResult flood = run("import sys\nsys.stdout.write('x' * 10_000_000)", options);
  CHECK(flood.text.size() < 1200);
  CHECK_THAT(flood.text, Catch::Contains("output cut at 1000 bytes"));

  const rlcore::ToolResult crashed = run("import os\nos.abort()");
  CHECK(crashed.error);
  CHECK_THAT(crashed.text, Catch::Contains("killed by signal 6"));

  PythonToolOptions small;
  small.memory_mb = 200;
  const rlcore::ToolResult hog = run("x = bytearray(1 << 30)\nprint('allocated')", small);
  CHECK(hog.error);
  CHECK_THAT(hog.text, Catch::Contains("MemoryError") && !Catch::Contains("allocated"));

  const rlcore::ToolResult raised = run("raise ValueError('no')");
  CHECK(raised.error);
  CHECK_THAT(raised.text, Catch::Contains("ValueError: no") && Catch::Contains("exit code 1"));
}

TEST_CASE("where it cannot isolate it refuses to start unless told so by name", "[python_tool]") {
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>(
                 [] { rlcore::tools::require_isolation(false, "unshare(CLONE_NEWNET | CLONE_NEWNS): EPERM", false); }),
             Catch::Contains("refuses to start") && Catch::Contains("EPERM") &&
                 Catch::Contains("tools[python].config.allow_unisolated"));
  CHECK_NOTHROW(rlcore::tools::require_isolation(false, "EPERM", true));
  CHECK_NOTHROW(rlcore::tools::require_isolation(true, "", false));
  PythonToolOptions missing;
  missing.python = "no-such-python-3";
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([&] { PythonTool tool(missing); }),
             Catch::Contains("no-such-python-3"));
}
