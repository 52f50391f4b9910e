// Per-call cgroups (see cgroup.h).
#include "cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  if (!out) {
    const int error = errno;
    throw IoError("python tool: cannot write '" + value + "' to " + path + ": " + std::strerror(error));
  }
}

bool contains_word(const std::string& text, const std::string& word) {
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (w == word) return true;
  }
  return false;
}

// The value after `key` in a flat-keyed file such as memory.events ("oom_kill 3").
int64_t keyed_value(const std::string& path, const std::string& key) {
  std::istringstream lines(read_file(path));
  for (std::string name; lines >> name;) {
    int64_t value = 0;
    lines >> value;
    if (name == key) return value;
  }
  return 0;
}

struct Hierarchies {
  std::map<std::string, std::string> v1;  // controller -> mount point
  std::string v2;                         // the unified mount point, if any
};

Hierarchies read_hierarchies(const std::string& mountinfo) {
  Hierarchies found;
  std::ifstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, device, root, point, type, source, options;
    head >> id >> parent >> device >> root >> point;
    tail >> type >> source >> options;
    if (type == "cgroup2") {
      found.v2 = point;
    } else if (type == "cgroup") {
      std::istringstream list(options);
      for (std::string option; std::getline(list, option, ',');) {
        if (option == "pids" || option == "memory" || option == "cpu") found.v1[option] = point;
      }
    }
  }
  return found;
}

void make_directories(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw IoError("python tool: cannot make the cgroup " + directory.string() + ": " + error.message() +
                  " (give tools[python].config.cgroup_parent a cgroup delegated to this user)");
  }
  if (::access(directory.c_str(), W_OK) != 0) {
    throw IoError("python tool: cannot write to the cgroup " + directory.string() +
                  " (give tools[python].config.cgroup_parent a cgroup delegated to this user)");
  }
}

// Removes the empty call cgroups (call-<pid>-<n>) of processes that are gone: left by a run that was
// killed before its calls could remove theirs.
void remove_stale_calls(const fs::path& directory) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("call-", 0) != 0) continue;
    const pid_t owner = static_cast<pid_t>(std::strtol(name.c_str() + 5, nullptr, 10));
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) ::rmdir(entry.path().c_str());
  }
}

// v2: the controllers reach `relative`'s children only when each cgroup from the mount down enables them
// for its children; one write per level of those not enabled yet.
void enable_controllers(const fs::path& mount, const fs::path& relative, const std::vector<std::string>& controllers) {
  auto enable_at = [&](const fs::path& at) {
    const fs::path control = at / "cgroup.subtree_control";
    const std::string enabled = read_file(control.string());
    std::string missing;
    for (const std::string& controller : controllers) {
      if (!contains_word(enabled, controller)) missing += (missing.empty() ? "+" : " +") + controller;
    }
    if (missing.empty()) return;
    std::ofstream out(control);
    out << missing;
    out.flush();
    if (!out) {
      const int error = errno;
      throw IoError("python tool: cannot enable '" + missing + "' in " + control.string() + ": " +
                    std::strerror(error) +
                    (error == EBUSY ? " (the cgroup holds processes; on cgroup v2 give "
                                      "tools[python].config.cgroup_parent a cgroup without processes of its own)"
                                    : ""));
    }
  };
  fs::path level = mount;
  enable_at(level);
  for (const fs::path& part : relative) {
    level /= part;
    enable_at(level);
  }
}

std::atomic<uint64_t> call_counter{0};

}  // namespace

CgroupParent CgroupParent::find(const std::string& relative_path, const std::string& mountinfo) {
  const fs::path relative = relative_path.empty() ? fs::path("rlcore-sandbox") : fs::path(relative_path);
  if (relative.is_absolute() || relative_path.find("..") != std::string::npos) {
    throw ConfigError("tools[python].config.cgroup_parent: '" + relative_path +
                      "' must be a relative path under the cgroup mount, without '..'");
  }
  const Hierarchies hierarchies = read_hierarchies(mountinfo);
  CgroupParent parent;
  if (hierarchies.v1.count("pids") && hierarchies.v1.count("memory")) {
    for (const char* controller : {"pids", "memory", "cpu"}) {
      const auto mount = hierarchies.v1.find(controller);
      if (mount == hierarchies.v1.end()) continue;
      const fs::path directory = fs::path(mount->second) / relative;
      make_directories(directory);
      remove_stale_calls(directory);
      parent.directories_.push_back({directory.string(), {controller}});
    }
    return parent;
  }
  if (hierarchies.v2.empty()) {
    throw IoError(
        "python tool: no cgroup hierarchy with the pids and memory controllers is mounted (cgroup v1 "
        "hierarchies: " +
        std::to_string(hierarchies.v1.size()) + ", no cgroup2 mount)");
  }
  const std::string available = read_file(hierarchies.v2 + "/cgroup.controllers");
  std::vector<std::string> controllers;
  for (const char* controller : {"pids", "memory", "cpu"}) {
    if (contains_word(available, controller)) {
      controllers.push_back(controller);
    } else if (std::string(controller) != "cpu") {
      throw IoError("python tool: the cgroup v2 hierarchy at " + hierarchies.v2 + " lacks the " + controller +
                    " controller (cgroup.controllers: '" + available + "')");
    }
  }
  parent.unified_ = true;
  const fs::path directory = fs::path(hierarchies.v2) / relative;
  make_directories(directory);
  remove_stale_calls(directory);
  enable_controllers(hierarchies.v2, relative, controllers);
  parent.directories_.push_back({directory.string(), controllers});
  return parent;
}

namespace {

// The limits of `controller` in a call's directory `at`.
void write_limits(const std::string& at, const std::string& controller, bool unified, const CgroupLimits& limits) {
  if (controller == "pids") {
    write_file(at + "/pids.max", std::to_string(limits.max_pids));
  } else if (controller == "memory" && unified) {
    write_file(at + "/memory.max", std::to_string(limits.memory_bytes));
    if (fs::exists(at + "/memory.swap.max")) write_file(at + "/memory.swap.max", "0");
  } else if (controller == "memory") {
    write_file(at + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
    // Memory and swap together, where the kernel accounts swap.
    if (fs::exists(at + "/memory.memsw.limit_in_bytes"))
      write_file(at + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
  } else if (controller == "cpu" && limits.cpu_cores > 0) {
    const int64_t period_us = 100000;
    const auto quota_us = std::max<int64_t>(std::llround(limits.cpu_cores * static_cast<double>(period_us)), 1000);
    if (unified) {
      write_file(at + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us));
    } else {
      write_file(at + "/cpu.cfs_period_us", std::to_string(period_us));
      write_file(at + "/cpu.cfs_quota_us", std::to_string(quota_us));
    }
  }
}

}  // namespace

CallCgroup::CallCgroup(const CgroupParent& parent, const CgroupLimits& limits) : unified_(parent.unified()) {
  const std::string name = "call-" + std::to_string(::getpid()) + "-" + std::to_string(call_counter.fetch_add(1));
  try {
    for (const CgroupParent::Directory& parent_directory : parent.directories()) {
      const std::string directory = parent_directory.path + "/" + name;
      if (::mkdir(directory.c_str(), 0755) != 0) {
        throw IoError("python tool: cannot make the cgroup " + directory + ": " + std::strerror(errno));
      }
      directories_.push_back(directory);
      procs_files_.push_back(directory + "/cgroup.procs");
      for (const std::string& controller : parent_directory.controllers) {
        write_limits(directory, controller, unified_, limits);
        if (controller == "pids") event_files_.push_back(directory + "/pids.events");
        if (controller == "memory")
          event_files_.push_back(directory + (unified_ ? "/memory.events" : "/memory.oom_control"));
      }
    }
  } catch (...) {
    for (const auto& made : directories_) ::rmdir(made.c_str());
    throw;
  }
}

void CallCgroup::kill_all() const {
  if (unified_ && !directories_.empty() && fs::exists(directories_[0] + "/cgroup.kill")) {
    std::ofstream(directories_[0] + "/cgroup.kill") << "1";
  }
  // A process may fork between the read and the kill: read again until nothing is left.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto pause = std::chrono::microseconds(100); std::chrono::steady_clock::now() < give_up;
       pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
    bool any = false;
    for (const std::string& procs : procs_files_) {
      std::istringstream pids(read_file(procs));
      for (pid_t pid = 0; pids >> pid;) {
        any = true;
        ::kill(pid, SIGKILL);
      }
    }
    if (!any) return;
    std::this_thread::sleep_for(pause);
  }
}

bool CallCgroup::memory_exhausted() const {
  for (const std::string& events : event_files_) {
    if (events.find("/memory.") != std::string::npos && keyed_value(events, "oom_kill") > 0) return true;
  }
  return false;
}

bool CallCgroup::pids_exhausted() const {
  for (const std::string& events : event_files_) {
    if (events.find("/pids.") != std::string::npos && keyed_value(events, "max") > 0) return true;
  }
  return false;
}

CallCgroup::~CallCgroup() {
  kill_all();
  // A killed process leaves its cgroup when it has exited: removal waits for that, briefly.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const std::string& directory : directories_) {
    while (::rmdir(directory.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace rlcore::tools
