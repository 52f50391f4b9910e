// One cgroup per sandboxed call, so that its process count, memory and CPU are
// bounded as root too, and so that every process it started can be found and
// killed. Works on cgroup v1 (one directory per controller hierarchy) and v2
// (one unified directory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rlcore::tools {

struct CgroupLimits {
  int64_t max_pids = 16;             // processes and threads
  int64_t memory_bytes = 512 << 20;  // resident memory, page cache and tmpfs of the call
  double cpu_cores = 1.0;            // CPU bandwidth; 0: unbounded (or no cpu controller)
};

// Where per-call cgroups are made: found once, when the tool starts.
class CgroupParent {
 public:
  // `relative` (a path under each hierarchy's mount; empty: "rlcore-sandbox") is
  // made where missing. Throws rlcore::IoError naming what is missing: no pids or
  // memory controller, or a directory this process may not write.
  static CgroupParent find(const std::string& relative, const std::string& mountinfo = "/proc/self/mountinfo");

  bool unified() const { return unified_; }
  // A directory of the parent and the controllers whose limits are written there: one per
  // controller hierarchy on v1 (pids, memory and, where mounted, cpu), one with all of them on v2.
  struct Directory {
    std::string path;
    std::vector<std::string> controllers;
  };
  const std::vector<Directory>& directories() const { return directories_; }

 private:
  bool unified_ = false;
  std::vector<Directory> directories_;
};

// A call's cgroup: made with its limits, emptied (every process killed) and
// removed by its destructor.
class CallCgroup {
 public:
  // Throws rlcore::IoError naming the file it could not write.
  CallCgroup(const CgroupParent& parent, const CgroupLimits& limits);
  ~CallCgroup();
  CallCgroup(const CallCgroup&) = delete;
  CallCgroup& operator=(const CallCgroup&) = delete;

  // The cgroup.procs files that a process joins by writing "0" to each (prepared
  // before fork: the child only opens and writes).
  const std::vector<std::string>& procs_files() const { return procs_files_; }
  // SIGKILLs every process in it until none is left (processes that fork while it runs included).
  void kill_all() const;
  // Whether the kernel's out-of-memory killer killed a process of the call.
  bool memory_exhausted() const;
  // Whether a fork was refused at max_pids.
  bool pids_exhausted() const;

 private:
  bool unified_ = false;
  std::vector<std::string> directories_;
  std::vector<std::string> procs_files_;
  std::vector<std::string> event_files_;  // memory.events or memory.oom_control, pids.events
};

}  // namespace rlcore::tools
