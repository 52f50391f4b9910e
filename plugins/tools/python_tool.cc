// The `python` tool (see python_tool.h).
#include "python_tool.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// The interpreter itself, not a wrapper script (pyenv's shims run bash and read $HOME).
std::string resolve_python(const std::string& python) {
  const std::string found = find_in_path(python);
  if (found.empty()) {
    throw ConfigError("tools[python].config.python: '" + python + "' is not an executable in PATH");
  }
  const std::string probe = "'" + found + "' -c 'import sys; print(sys.executable)' 2>/dev/null";
  FILE* pipe = ::popen(probe.c_str(), "r");
  std::string executable;
  if (pipe != nullptr) {
    char buffer[4096];
    while (fgets(buffer, sizeof buffer, pipe) != nullptr) executable += buffer;
    ::pclose(pipe);
  }
  while (!executable.empty() && (executable.back() == '\n' || executable.back() == '\r')) executable.pop_back();
  if (executable.empty() || ::access(executable.c_str(), X_OK) != 0) {
    throw ConfigError("tools[python].config.python: '" + found + "' did not run as a Python interpreter");
  }
  return executable;
}

// A fresh directory for one call, removed with it.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& root) {
    std::string base = root;
    if (base.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string pattern = (std::filesystem::path(base) / "rlcore-python-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw IoError("python tool: cannot create a scratch directory in " + base);
    path_ = std::filesystem::canonical(pattern).string();
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string how_it_ended(const SandboxResult& run, const PythonToolOptions& options) {
  if (run.timed_out) return "killed: over its " + std::to_string(static_cast<int>(options.timeout_s)) + " s time limit";
  if (run.signal == SIGXCPU || run.signal == SIGKILL) return "killed: over its CPU-time limit";
  if (run.signal != 0) return "killed by signal " + std::to_string(run.signal);
  return "exit code " + std::to_string(run.exit_code);
}

}  // namespace

void require_isolation(bool available, const std::string& why, bool allow_unisolated) {
  if (available || allow_unisolated) return;
  throw ConfigError("tools[python]: cannot isolate the code it runs here (" + why +
                    "); it refuses to start. Run rlcore where it may create network and mount namespaces "
                    "(root, or unprivileged user namespaces), or set tools[python].config.allow_unisolated: true "
                    "to run untrusted code with resource limits only, network and files open to it");
}

PythonTool::PythonTool(PythonToolOptions options) : options_(std::move(options)) {
  std::string why;
  const bool available = sandbox_available(&why);
  require_isolation(available, why, options_.allow_unisolated);
  isolate_ = available;
  python_path_ = resolve_python(options_.python);
}

ToolSchema PythonTool::schema() const {
  ToolSchema schema;
  schema.name = "python";
  schema.description =
      "Run Python 3 code and return what it prints (no network; only the current directory is writable).";
  schema.parameters = {{"type", "object"},
                       {"properties", {{"code", {{"type", "string"}, {"description", "The program to run."}}}}},
                       {"required", {"code"}}};
  return schema;
}

std::chrono::milliseconds PythonTool::timeout() const {
  // The sandbox kills the program at timeout_s; the agent loop's wait covers the start and clean-up too.
  return std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000) + 5000);
}

ToolResult PythonTool::call(const nlohmann::json& arguments, const ToolCallContext&) const {
  const auto code = arguments.find("code");
  if (!arguments.is_object() || code == arguments.end() || !code->is_string()) {
    return {"error: python takes {\"code\": \"<program>\"}", true, 0.0};
  }
  const ScratchDirectory scratch(options_.scratch_root);
  const std::string program = (std::filesystem::path(scratch.path()) / "main.py").string();
  std::ofstream(program) << code->get<std::string>();
  SandboxLimits limits;
  limits.cpu_seconds = options_.cpu_seconds;
  limits.wall_seconds = options_.timeout_s;
  limits.memory_mb = options_.memory_mb;
  limits.file_size_mb = options_.file_size_mb;
  limits.max_processes = options_.max_processes;
  limits.output_bytes = options_.max_output_bytes;
  const SandboxResult run = run_sandboxed({python_path_, "-I", "main.py"}, scratch.path(), limits, isolate_);
  const bool failed = run.timed_out || run.signal != 0 || run.exit_code != 0;
  std::string text = run.out;
  if (run.output_truncated) text += "\n...(output cut at " + std::to_string(options_.max_output_bytes) + " bytes)";
  if (failed) {
    if (!run.err.empty()) text += (text.empty() ? "" : "\n") + run.err;
    text += (text.empty() ? "" : "\n") + std::string("error: ") + how_it_ended(run, options_);
  }
  return {text, failed, 0.0};
}

}  // namespace rlcore::tools
