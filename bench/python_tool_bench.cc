// Per-call overhead of the python tool's sandbox: `print(1)` through the tool
// (a scratch directory, the sandbox, the interpreter) against the bare
// interpreter started with posix_spawn in the same run; median, min and max of
// N calls. Only the tool's public API is used, so the same file measures an
// older sandbox too (docs/agent-loop.md#overhead).
//   build/bin/bench_python_tool [calls (50)] [python (/usr/bin/python3)]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "python_tool.h"

extern char** environ;

namespace {

struct Summary {
  double median_ms, min_ms, max_ms;
};

Summary time_calls(int calls, const std::function<void()>& call) {
  std::vector<double> ms;
  call();  // warm the page cache
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

void bare_interpreter(const std::string& python) {
  std::vector<std::string> args = {python, "-I", "-c", "print(1)"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  if (posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), environ) == 0) ::waitpid(pid, nullptr, 0);
  posix_spawn_file_actions_destroy(&actions);
}

}  // namespace

int main(int argc, char** argv) try {
  const int calls = argc > 1 ? std::stoi(argv[1]) : 50;
  rlcore::tools::PythonToolOptions options;
  options.python = argc > 2 ? argv[2] : "/usr/bin/python3";
  const rlcore::tools::PythonTool tool(options);
  const Summary bare = time_calls(calls, [&] { bare_interpreter(options.python); });
  const Summary sandboxed = time_calls(calls, [&] {
    const rlcore::ToolResult result = tool.call({{"code", "print(1)"}}, rlcore::ToolCallContext{});
    if (result.error || result.text != "1\n") std::fprintf(stderr, "unexpected result: %s\n", result.text.c_str());
  });
  std::printf("print(1), %d calls, uid %d\n\n", calls, static_cast<int>(::geteuid()));
  std::printf("| %-24s | median ms | min ms | max ms | overhead ms (median) |\n", "how");
  std::printf("|%s|---:|---:|---:|---:|\n", std::string(26, '-').c_str());
  std::printf("| %-24s | %9.1f | %6.1f | %6.1f | %20s |\n", "bare interpreter", bare.median_ms, bare.min_ms,
              bare.max_ms, "-");
  std::printf("| %-24s | %9.1f | %6.1f | %6.1f | %20.1f |\n", "python tool (sandboxed)", sandboxed.median_ms,
              sandboxed.min_ms, sandboxed.max_ms, sandboxed.median_ms - bare.median_ms);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_python_tool: %s\n", e.what());
  return 1;
}
