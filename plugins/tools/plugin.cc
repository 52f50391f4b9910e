// The `tools` plugin: the built-in tools of the agent loop (docs/agent-loop.md).
#include "rlcore/plugin.h"

#include "calculator.h"
#include "python_function_tool.h"
#include "python_tool.h"
#include "sandbox_fusion_tool.h"

namespace rlcore::tools {
namespace {

void register_tools(PluginRegistrar& registrar) {
  registrar.add<Tool>(
      "calculator", "Exact integer and decimal arithmetic: {\"expression\": \"1234 * 5678\"} -> \"7006652\"",
      OptionsSchema<CalculatorOptions>()
          .key("max_expression_chars", &CalculatorOptions::max_expression_chars,
               "Longer expressions are an error result.", at_least(1))
          .key("max_result_digits", &CalculatorOptions::max_result_digits,
               "Numbers and results with more digits are an error result.", at_least(1))
          .key("decimal_places", &CalculatorOptions::decimal_places,
               "A quotient that does not terminate is rounded to this many places.", at_least(0))
          .key("timeout_s", &CalculatorOptions::timeout_s, "Seconds one call may take.", greater_than(0)),
      [](const CalculatorOptions& options) { return std::make_unique<CalculatorTool>(options); });

  registrar.add<Tool>(
      "python",
      "Runs the model's Python code in a sandbox (bubblewrap: an unprivileged uid without capabilities, its own PID, "
      "network and mount namespaces, a seccomp filter, a cgroup per call): only a fresh scratch directory writable, "
      "CPU, memory, process, file-size and open-file limits; the result is what it printed",
      OptionsSchema<PythonToolOptions>()
          .key("python", &PythonToolOptions::python,
               "The interpreter (looked up in PATH); its prefix is shown read-only in the sandbox, so it must be "
               "readable by the uid the code runs as (nobody when rlcore is root).")
          .key("timeout_s", &PythonToolOptions::timeout_s,
               "Wall-clock seconds a program may run; then it is killed with everything it started.", greater_than(0))
          .key("cpu_seconds", &PythonToolOptions::cpu_seconds, "CPU seconds each process may use (RLIMIT_CPU).",
               greater_than(0))
          .key("memory_mb", &PythonToolOptions::memory_mb,
               "Memory of the call, MiB: each process's address space (RLIMIT_AS) and, isolated, the call's cgroup.",
               at_least(16))
          .key("file_size_mb", &PythonToolOptions::file_size_mb, "Largest file it may write, MiB (RLIMIT_FSIZE).",
               at_least(0))
          .key("max_processes", &PythonToolOptions::max_processes,
               "Processes and threads of the call, bubblewrap's two included (its cgroup's pids.max; RLIMIT_NPROC when "
               "unisolated).",
               at_least(4))
          .key("max_open_files", &PythonToolOptions::max_open_files, "Open files of each process (RLIMIT_NOFILE).",
               at_least(16))
          .key("cpu_cores", &PythonToolOptions::cpu_cores,
               "CPU bandwidth of the call in cores (its cgroup's CPU quota); 0: unbounded.", at_least(0.0))
          .key("max_output_bytes", &PythonToolOptions::max_output_bytes,
               "Bytes of stdout (and of stderr) kept; the rest is read and dropped.", at_least(1))
          .key("scratch_root", &PythonToolOptions::scratch_root,
               "Directory for the per-call scratch directories; empty: $TMPDIR or /tmp.")
          .key("cgroup_parent", &PythonToolOptions::cgroup_parent,
               "Where the per-call cgroups go, relative to each cgroup mount (v1: pids, memory, cpu; v2: the unified "
               "one); empty: rlcore-sandbox. Not root: a cgroup delegated to rlcore's user.")
          .key("allow_unisolated", &PythonToolOptions::allow_unisolated,
               "Where the isolation cannot be set up (no bubblewrap, user namespaces, seccomp or writable cgroup): "
               "true runs code with the limits only (network and files open to it); false (default) refuses to "
               "start."),
      [](const PythonToolOptions& options) { return std::make_unique<PythonTool>(options); });

  registrar.add<Tool>(
      "code_interpreter",
      "verl's SandboxFusionTool: the model's code run by a SandboxFusion server; the result is what it printed",
      OptionsSchema<SandboxFusionToolOptions>()
          .key("url", &SandboxFusionToolOptions::url,
               "The sandbox's run_code endpoint, e.g. http://localhost:8080/run_code (verl's sandbox_fusion_url); "
               "required.")
          .key("language", &SandboxFusionToolOptions::language, "The language the sandbox runs the code as.")
          .key("timeout_s", &SandboxFusionToolOptions::timeout_s,
               "compile_timeout and run_timeout of each call; a call may take twice this plus 10 s.", greater_than(0))
          .key("memory_limit_mb", &SandboxFusionToolOptions::memory_limit_mb, "memory_limit_MB of each run.",
               at_least(1)),
      [](const SandboxFusionToolOptions& options) { return std::make_unique<SandboxFusionTool>(options); });

  registrar.add<Tool>(
      "python_function",
      "A Python function from a file as a tool (verl's function_tool_path: the agent loop makes one per public "
      "function), its schema from its signature and docstring, run in a long-lived subprocess",
      OptionsSchema<PythonFunctionOptions>()
          .key("path", &PythonFunctionOptions::path, "The Python file.")
          .key("function", &PythonFunctionOptions::function, "The function's name in it.")
          .key("python", &PythonFunctionOptions::python, "Interpreter that runs it (looked up in PATH).")
          .key("timeout_s", &PythonFunctionOptions::timeout_s,
               "Seconds one call may take; past it the subprocess is killed (a fresh one serves the next call).",
               greater_than(0)),
      [](const PythonFunctionOptions& options) { return std::make_unique<PythonFunctionTool>(options); });
}

}  // namespace
}  // namespace rlcore::tools

RLCORE_PLUGIN("tools", "0.1.0", rlcore::tools::register_tools)
