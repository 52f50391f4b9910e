// The `python` tool (see python_tool.h).
#include "python_tool.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

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

struct Interpreter {
  std::string executable;
  std::vector<std::string> prefixes;  // sys.prefix, sys.base_prefix, sys.exec_prefix
};

// The interpreter itself, not a wrapper script (pyenv's shims run bash and read $HOME), and where its library is.
Interpreter resolve_python(const std::string& python) {
  const std::string found = find_in_path(python);
  if (found.empty()) {
    throw ConfigError("tools[python].config.python: '" + python + "' is not an executable in PATH");
  }
  const std::string probe = "'" + found +
                            "' -I -c 'import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix); " +
                            "print(sys.exec_prefix)' 2>/dev/null";
  FILE* pipe = ::popen(probe.c_str(), "r");
  std::vector<std::string> lines;
  if (pipe != nullptr) {
    char buffer[4096];
    while (fgets(buffer, sizeof buffer, pipe) != nullptr) {
      std::string line = buffer;
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      lines.push_back(line);
    }
    ::pclose(pipe);
  }
  if (lines.size() != 4 || ::access(lines[0].c_str(), X_OK) != 0) {
    throw ConfigError("tools[python].config.python: '" + found + "' did not run as a Python interpreter");
  }
  Interpreter interpreter{lines[0], {}};
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& prefix = lines[i];
    const bool under_usr = prefix == "/usr" || prefix.rfind("/usr/", 0) == 0;
    if (!prefix.empty() && !under_usr &&
        std::find(interpreter.prefixes.begin(), interpreter.prefixes.end(), prefix) == interpreter.prefixes.end()) {
      interpreter.prefixes.push_back(prefix);
    }
  }
  return interpreter;
}

// A fresh directory for one call, removed with it.
class ScratchDirectory {
 public:
  // `owner`: the uid and gid the program runs as, when not this process's.
  ScratchDirectory(const std::string& root, const std::optional<std::pair<uid_t, gid_t>>& owner) {
    std::string base = root;
    if (base.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string pattern = (std::filesystem::path(base) / "rlcore-python-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw IoError("python tool: cannot create a scratch directory in " + base);
    path_ = std::filesystem::canonical(pattern).string();
    if (owner && ::chown(path_.c_str(), owner->first, owner->second) != 0) {
      throw IoError("python tool: cannot give the scratch directory " + path_ + " to uid " +
                    std::to_string(owner->first));
    }
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
  if (run.memory_exhausted) return "killed: over its memory limit (" + std::to_string(options.memory_mb) + " MiB)";
  if (run.signal == SIGXCPU || run.signal == SIGKILL) return "killed: over its CPU-time limit";
  if (run.signal != 0) return "killed by signal " + std::to_string(run.signal);
  return "exit code " + std::to_string(run.exit_code);
}

SandboxLimits limits_of(const PythonToolOptions& options) {
  SandboxLimits limits;
  limits.cpu_seconds = options.cpu_seconds;
  limits.wall_seconds = options.timeout_s;
  limits.memory_mb = options.memory_mb;
  limits.file_size_mb = options.file_size_mb;
  limits.max_processes = options.max_processes;
  limits.max_open_files = options.max_open_files;
  limits.cpu_cores = options.cpu_cores;
  limits.output_bytes = options.max_output_bytes;
  return limits;
}

}  // namespace

void require_isolation(bool available, const std::string& why, bool allow_unisolated) {
  if (available || allow_unisolated) return;
  throw ConfigError("tools[python]: cannot isolate the code it runs here (" + why +
                    "); it refuses to start. Run rlcore where it can isolate "
                    "(bubblewrap, user namespaces, seccomp and a writable cgroup; docs/agent-loop.md), or set "
                    "tools[python].config.allow_unisolated: true "
                    "to run untrusted code with resource limits only, network and files open to it");
}

PythonTool::PythonTool(PythonToolOptions options) : options_(std::move(options)) {
  const Interpreter interpreter = resolve_python(options_.python);
  python_path_ = interpreter.executable;
  try {
    sandbox_ = Sandbox::isolated({options_.cgroup_parent, interpreter.prefixes});
    check_interpreter_starts();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    require_isolation(false, e.what(), options_.allow_unisolated);
    sandbox_ = Sandbox::limits_only();
    check_interpreter_starts();
  }
}

// Said when the tool starts, not at the model's first call.
void PythonTool::check_interpreter_starts() const {
  const ScratchDirectory scratch(options_.scratch_root, sandbox_.drops_to());
  const SandboxResult probe = sandbox_.run({python_path_, "-I", "-c", "pass"}, scratch.path(), limits_of(options_));
  if (!probe.timed_out && probe.signal == 0 && probe.exit_code == 0) return;
  if (probe.err.rfind("bwrap:", 0) == 0) {
    throw IoError("bubblewrap could not set up the sandbox: " + probe.err.substr(0, probe.err.find('\n')));
  }
  throw ConfigError("tools[python]: the sandbox could not run '" + python_path_ + "'" +
                    (sandbox_.drops_to() ? " as uid " + std::to_string(sandbox_.drops_to()->first) : "") + " (" +
                    how_it_ended(probe, options_) + "): " + probe.err +
                    " Give tools[python].config.python an interpreter that user can read, outside home "
                    "directories (e.g. /usr/bin/python3)");
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
  const ScratchDirectory scratch(options_.scratch_root, sandbox_.drops_to());
  const std::string program = (std::filesystem::path(scratch.path()) / "main.py").string();
  std::ofstream(program) << code->get<std::string>();
  const SandboxResult run = sandbox_.run({python_path_, "-I", "main.py"}, scratch.path(), limits_of(options_));
  const bool failed = run.timed_out || run.signal != 0 || run.exit_code != 0;
  std::string text = run.out;
  if (run.output_truncated) text += "\n...(output cut at " + std::to_string(options_.max_output_bytes) + " bytes)";
  if (failed) {
    if (!run.err.empty()) text += (text.empty() ? "" : "\n") + run.err;
    text += (text.empty() ? "" : "\n") + std::string("error: ") + how_it_ended(run, options_);
    if (run.processes_exhausted) {
      text += " (it reached its limit of " + std::to_string(options_.max_processes) + " processes and threads)";
    }
  }
  return {text, failed, 0.0};
}

}  // namespace rlcore::tools
