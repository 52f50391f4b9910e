// The `python` tool: runs the model's code with a Python interpreter in the
// sandbox (sandbox/sandbox.h): an unprivileged uid without capabilities, its own
// PID, network and mount namespaces, a seccomp filter, a cgroup per call, nothing
// writable but a fresh scratch directory, killed with all it started at its
// wall-clock timeout. What it printed is the result.
#pragma once

#include <string>

#include "rlcore/tool.h"
#include "sandbox/sandbox.h"

namespace rlcore::tools {

struct PythonToolOptions {
  std::string python = "/usr/bin/python3";  // looked up in PATH when not absolute
  double timeout_s = 10.0;                  // wall clock
  double cpu_seconds = 5.0;
  int64_t memory_mb = 512;
  int64_t file_size_mb = 16;
  int64_t max_processes = 16;
  int64_t max_open_files = 256;
  double cpu_cores = 1.0;
  int64_t max_output_bytes = 16384;
  std::string scratch_root;   // where the per-call directories go; empty: $TMPDIR or /tmp
  std::string cgroup_parent;  // under each cgroup mount; empty: rlcore-sandbox
  // Where the isolation cannot be set up the tool refuses to start; true runs
  // the code with the resource limits only (network and the filesystem open to
  // it). Spelled out so it is a choice.
  bool allow_unisolated = false;
};

// The refusal (a ConfigError naming tools[python].config.allow_unisolated)
// unless the sandbox is available or unisolated runs are allowed.
void require_isolation(bool available, const std::string& why, bool allow_unisolated);

class PythonTool : public Tool {
 public:
  // Throws ConfigError (isolation refused, python not found or not runnable in the sandbox).
  explicit PythonTool(PythonToolOptions options);
  ToolSchema schema() const override;
  std::chrono::milliseconds timeout() const override;
  // {"code": "..."}: stdout, and stderr and how it ended when it failed.
  ToolResult call(const nlohmann::json& arguments, const ToolCallContext& context) const override;

 private:
  void check_interpreter_starts() const;

  PythonToolOptions options_;
  std::string python_path_;
  Sandbox sandbox_;
};

}  // namespace rlcore::tools
