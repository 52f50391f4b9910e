// The cgroup files a call writes, on a v1 and a v2 layout laid out in a
// temporary directory (this machine's kernel mounts v1 controllers, so the
// isolation tests exercise v1 for real; clusters mostly run v2): which
// hierarchy each limit goes to, the controllers v2 must enable from the mount
// down, the refusal where a controller is missing, and the clean-up of what
// killed runs left.
#include <catch2/catch.hpp>

#include "../../../common/error_of.h"
#include "sandbox_testing.h"

using namespace sandbox_testing;
using rlcore::tools::CallCgroup;
using rlcore::tools::CgroupLimits;
using rlcore::tools::CgroupParent;

namespace cgroup_test {

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A temporary directory that stands for /sys/fs/cgroup, and a mountinfo that mounts it.
class FakeCgroupFs {
 public:
  FakeCgroupFs() : root_(fs::temp_directory_path() / ("rlcore-fake-cgroup-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeCgroupFs() { fs::remove_all(root_); }
  const fs::path& root() const { return root_; }
  // One mountinfo line per (mount point, fstype, super options).
  std::string mountinfo(const std::vector<std::array<std::string, 3>>& mounts) const {
    const fs::path file = root_ / "mountinfo";
    std::ofstream out(file);
    int id = 30;
    for (const auto& [point, type, options] : mounts) {
      out << id++ << " 25 0:" << id << " / " << point << " rw,nosuid - " << type << " " << type << " " << options
          << "\n";
    }
    return file.string();
  }

 private:
  fs::path root_;
};

}  // namespace cgroup_test

using namespace cgroup_test;

TEST_CASE("cgroup v2: controllers enabled from the mount down, the limits in the call's one directory",
          "[sandbox][cgroup]") {
  const FakeCgroupFs cgroupfs;
  const fs::path mount = cgroupfs.root() / "unified";
  fs::create_directories(mount);
  std::ofstream(mount / "cgroup.controllers") << "cpuset cpu io memory hugetlb pids rdma misc\n";
  std::ofstream(mount / "cgroup.subtree_control") << "memory\n";  // one of them enabled already
  const std::string mountinfo = cgroupfs.mountinfo({{mount.string(), "cgroup2", "rw,nsdelegate"}});

  const CgroupParent parent = CgroupParent::find("jobs/rlcore", mountinfo);
  CHECK(parent.unified());
  REQUIRE(parent.directories().size() == 1);
  CHECK(parent.directories()[0].path == (mount / "jobs/rlcore").string());
  CHECK(parent.directories()[0].controllers == std::vector<std::string>{"pids", "memory", "cpu"});
  CHECK(contents(mount / "cgroup.subtree_control") == "+pids +cpu");
  CHECK(contents(mount / "jobs/cgroup.subtree_control") == "+pids +memory +cpu");
  CHECK(contents(mount / "jobs/rlcore/cgroup.subtree_control") == "+pids +memory +cpu");

  const CallCgroup call(parent, CgroupLimits{12, 300 << 20, 0.5});
  REQUIRE(call.procs_files().size() == 1);
  const fs::path directory = fs::path(call.procs_files()[0]).parent_path();
  CHECK(directory.parent_path() == mount / "jobs/rlcore");
  CHECK(contents(directory / "pids.max") == "12");
  CHECK(contents(directory / "memory.max") == std::to_string(300 << 20));
  CHECK(contents(directory / "cpu.max") == "50000 100000");
  std::ofstream(directory / "memory.events") << "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n";
  std::ofstream(directory / "pids.events") << "max 0\n";
  CHECK(call.memory_exhausted());
  CHECK_FALSE(call.pids_exhausted());
}

TEST_CASE("cgroup v1: each limit in its controller's hierarchy", "[sandbox][cgroup]") {
  const FakeCgroupFs cgroupfs;
  for (const char* controller : {"pids", "memory", "cpu,cpuacct"}) fs::create_directories(cgroupfs.root() / controller);
  const std::string mountinfo =
      cgroupfs.mountinfo({{(cgroupfs.root() / "pids").string(), "cgroup", "rw,pids"},
                          {(cgroupfs.root() / "memory").string(), "cgroup", "rw,memory"},
                          {(cgroupfs.root() / "cpu,cpuacct").string(), "cgroup", "rw,cpu,cpuacct"},
                          {(cgroupfs.root() / "unified").string(), "cgroup2", "rw"}});
  // Left by runs that were killed: an empty call cgroup of a process that is gone, one of a live process.
  const fs::path stale = cgroupfs.root() / "pids/rlcore-sandbox/call-999999999-0";
  const fs::path live = cgroupfs.root() / ("pids/rlcore-sandbox/call-" + std::to_string(::getpid()) + "-99");
  fs::create_directories(stale);
  fs::create_directories(live);
  const CgroupParent parent = CgroupParent::find("", mountinfo);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK_FALSE(parent.unified());
  REQUIRE(parent.directories().size() == 3);
  const CallCgroup call(parent, CgroupLimits{20, 64 << 20, 2.0});
  REQUIRE(call.procs_files().size() == 3);
  const fs::path pids = fs::path(call.procs_files()[0]).parent_path();
  const fs::path memory = fs::path(call.procs_files()[1]).parent_path();
  const fs::path cpu = fs::path(call.procs_files()[2]).parent_path();
  CHECK(pids.parent_path() == cgroupfs.root() / "pids/rlcore-sandbox");
  CHECK(contents(pids / "pids.max") == "20");
  CHECK(contents(memory / "memory.limit_in_bytes") == std::to_string(64 << 20));
  CHECK_FALSE(fs::exists(memory / "pids.max"));
  CHECK(contents(cpu / "cpu.cfs_quota_us") == "200000");
  CHECK(contents(cpu / "cpu.cfs_period_us") == "100000");
}

TEST_CASE("no pids or memory controller: an error naming what is there", "[sandbox][cgroup]") {
  const FakeCgroupFs cgroupfs;
  const fs::path mount = cgroupfs.root() / "unified";
  fs::create_directories(mount);
  std::ofstream(mount / "cgroup.controllers") << "cpu io\n";
  const std::string v2_only = cgroupfs.mountinfo({{mount.string(), "cgroup2", "rw"}});
  CHECK_THAT(rlcore_test::error_of<rlcore::IoError>([&] { CgroupParent::find("", v2_only); }),
             Catch::Contains("lacks the pids controller") && Catch::Contains("cpu io"));
  const std::string none = cgroupfs.mountinfo({});
  CHECK_THAT(rlcore_test::error_of<rlcore::IoError>([&] { CgroupParent::find("", none); }),
             Catch::Contains("no cgroup hierarchy with the pids and memory controllers"));
}
