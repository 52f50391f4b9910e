// The bubblewrap command line (see bubblewrap.h).
#include "bubblewrap.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace rlcore::tools {
namespace {

namespace fs = std::filesystem;

// The top-level directories that hold programs and libraries: on a merged-/usr system
// (Debian 12, Ubuntu, Fedora) links into /usr, elsewhere directories of their own.
void add_system_directories(std::vector<std::string>& argv) {
  argv.insert(argv.end(), {"--ro-bind", "/usr", "/usr"});
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code error;
    const fs::file_status status = fs::symlink_status(top, error);
    if (error || !fs::exists(status)) continue;
    if (fs::is_symlink(status)) {
      argv.insert(argv.end(), {"--symlink", fs::read_symlink(top, error).string(), top});
    } else if (fs::is_directory(status)) {
      argv.insert(argv.end(), {"--ro-bind", top, top});
    }
  }
  // What the dynamic loader and the C library read; not /etc as a whole (shadow, keys, hosts).
  for (const char* file : {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"}) {
    argv.insert(argv.end(), {"--ro-bind-try", file, file});
  }
}

}  // namespace

std::vector<std::string> bubblewrap_argv(const BubblewrapPlan& plan) {
  std::vector<std::string> argv = {
      plan.bubblewrap,     "--unshare-user",       "--unshare-pid",    "--unshare-net", "--unshare-ipc",
      "--unshare-uts",     "--unshare-cgroup-try", "--disable-userns", "--cap-drop",    "ALL",
      "--die-with-parent", "--new-session",        "--hostname",       "sandbox"};
  add_system_directories(argv);
  for (const std::string& path : plan.read_only) argv.insert(argv.end(), {"--ro-bind", path, path});
  argv.insert(argv.end(), {"--proc", "/proc", "--dev", "/dev"});
  argv.insert(argv.end(), {"--size", std::to_string(plan.shm_bytes), "--tmpfs", "/dev/shm"});
  argv.insert(argv.end(), {"--size", std::to_string(plan.scratch_bytes), "--tmpfs", plan.scratch});
  for (const std::string& name : plan.scratch_files) {
    const std::string file = plan.scratch + "/" + name;
    argv.insert(argv.end(), {"--ro-bind", file, file});
  }
  argv.insert(argv.end(), {"--chdir", plan.scratch});
  argv.insert(argv.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
  if (plan.seccomp_fd >= 0) argv.insert(argv.end(), {"--seccomp", std::to_string(plan.seccomp_fd)});
  argv.push_back("--");
  argv.insert(argv.end(), plan.command.begin(), plan.command.end());
  return argv;
}

std::string find_bubblewrap() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(std::string(path ? path : "") + ":/usr/bin:/bin:/usr/local/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "bwrap";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

}  // namespace rlcore::tools
