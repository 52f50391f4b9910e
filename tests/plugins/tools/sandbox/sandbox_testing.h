// The isolation tests' harness: each attack runs as root and again as an
// unprivileged user (nobody, in a child process that dropped to its uid, with a
// cgroup delegated to it as systemd or an administrator would), inside the
// sandbox and, as the control that shows the test can fail, with the limits
// only. Include after catch.hpp.
#pragma once

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "python_tool.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"

namespace sandbox_testing {

namespace fs = std::filesystem;
using nlohmann::json;
using rlcore::tools::PythonTool;
using rlcore::tools::PythonToolOptions;

enum class User { root, nobody };

inline const char* name_of(User user) { return user == User::root ? "root" : "nobody"; }

inline std::pair<uid_t, gid_t> nobody_ids() {
  const struct passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  return {nobody->pw_uid, nobody->pw_gid};
}

// The options of every test: the system's interpreter, /tmp for scratch directories.
inline PythonToolOptions base_options() {
  PythonToolOptions options;
  options.python = "/usr/bin/python3";
  options.scratch_root = "/tmp";
  return options;
}

// A cgroup parent made by root and handed to nobody (directory and files), removed with its children.
class DelegatedCgroup {
 public:
  DelegatedCgroup() : relative_("rlcore-test-nobody-" + std::to_string(::getpid())) {
    const auto parent = rlcore::tools::CgroupParent::find(relative_);
    for (const auto& directory : parent.directories()) directories_.push_back(directory.path);
    const auto [uid, gid] = nobody_ids();
    for (const auto& directory : directories_) {
      REQUIRE(::chown(directory.c_str(), uid, gid) == 0);
      for (const auto& file : fs::directory_iterator(directory)) ::chown(file.path().c_str(), uid, gid);
    }
  }
  ~DelegatedCgroup() {
    for (const auto& directory : directories_) {
      for (const auto& child : fs::directory_iterator(directory)) {
        if (child.is_directory()) ::rmdir(child.path().c_str());
      }
      ::rmdir(directory.c_str());
    }
  }
  const std::string& relative() const { return relative_; }

 private:
  std::string relative_;
  std::vector<std::string> directories_;
};

// Runs probe(options) as `user` and returns its JSON: root in this process, nobody in a child that
// dropped its groups, gid and uid first (rlcore started by an unprivileged user).
inline json as_user(User user, const std::function<json(const PythonToolOptions&)>& probe) {
  if (::geteuid() != 0) FAIL("the sandbox tests run as root (as CI does): they attack it as root and as nobody");
  PythonToolOptions options = base_options();
  if (user == User::root) return probe(options);

  const DelegatedCgroup cgroup;
  options.cgroup_parent = cgroup.relative();
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    json reply;
    try {
      const auto [uid, gid] = nobody_ids();
      if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) {
        throw std::runtime_error("could not become nobody");
      }
      reply = probe(options);
    } catch (const std::exception& e) {
      reply = {{"exception", e.what()}};
    }
    const std::string text = reply.dump();
    for (size_t done = 0; done < text.size();) {
      const ssize_t wrote = ::write(pipe_fds[1], text.data() + done, text.size() - done);
      if (wrote <= 0) break;
      done += static_cast<size_t>(wrote);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, got);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO("the probe as nobody said: " << text);
  REQUIRE(!text.empty());
  json reply = json::parse(text);
  if (reply.contains("exception")) FAIL("as nobody: " << reply["exception"].get<std::string>());
  return reply;
}

inline std::string text_of(const json& result) { return result.at("text").get<std::string>(); }

inline json as_json(const rlcore::ToolResult& result) { return {{"text", result.text}, {"error", result.error}}; }

// The code run by the python tool, isolated.
inline json sandboxed(const std::string& code, const PythonToolOptions& options) {
  const PythonTool tool(options);
  return as_json(tool.call({{"code", code}}, rlcore::ToolCallContext{}));
}

// The control: the same code with the limits only (the tool with allow_unisolated and no isolation).
inline json unisolated(const std::string& code, const PythonToolOptions& options) {
  char pattern[] = "/tmp/rlcore-control-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::string scratch = pattern;
  std::ofstream(scratch + "/main.py") << code;
  rlcore::tools::SandboxLimits limits;
  limits.wall_seconds = options.timeout_s;
  limits.memory_mb = options.memory_mb;
  // No process limit: RLIMIT_NPROC counts every process of the user, which tests running beside as nobody share.
  limits.max_processes = 1 << 20;
  limits.max_open_files = options.max_open_files;
  limits.file_size_mb = options.file_size_mb;
  const auto run = rlcore::tools::Sandbox::limits_only().run({options.python, "-I", "main.py"}, scratch, limits);
  fs::remove_all(scratch);
  return {{"text", run.out + run.err}, {"error", run.exit_code != 0}};
}

}  // namespace sandbox_testing
