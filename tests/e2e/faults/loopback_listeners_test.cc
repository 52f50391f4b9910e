// A run on one machine listens and connects on loopback only: the control
// plane, the rendezvous (a file store, no port at all) and Gloo's pairs (Gloo
// in libtorch 2.x also keeps one listener per device in each worker; it binds
// the address the worker gives it, loopback). Checked on a live run, held in
// the middle of a step by a hung worker.
#include "../e2e_testing.h"
#include "faults_testing.h"

#include <sys/prctl.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace {

// Socket inodes the process holds ("socket:[12345]" links in /proc/<pid>/fd).
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code error;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = fs::read_symlink(fd.path(), error).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

struct TcpSocket {
  std::string address;  // the local end, as /proc/net/tcp{,6} writes it (hex)
  bool listening;
  bool loopback;
};

// The TCP sockets among `inodes`, in any state.
std::vector<TcpSocket> tcp_sockets(const std::set<std::string>& inodes) {
  std::vector<TcpSocket> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (inodes.count(inode) == 0) continue;
      const std::string host = local.substr(0, local.find(':'));
      const bool loopback = host == "0100007F" ||                          // 127.0.0.1
                            host == "00000000000000000000000001000000" ||  // ::1
                            host == "0000000000000000FFFF00000100007F";    // ::ffff:127.0.0.1
      found.push_back({local, state == "0A", loopback});                   // 0A: LISTEN
    }
  }
  return found;
}

}  // namespace

TEST_CASE("every socket of a single-machine run is on loopback, and only the control plane listens",
          "[faults][exposure]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("listeners", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  for (const char* transport : {"tcp", "ipc"}) {
    INFO("runtime.transport=" << transport);
    {
      faults::RlcoreProcess run(
          {"--config", config, std::string("runtime.transport=") + transport, "runtime.heartbeat_timeout_s=60"},
          {"RLCORE_FAULT=actor.update_actor:hang@0"});
      const bool held = run.wait_for_output("rlcore fault injection", std::chrono::seconds(60));
      INFO(run.output());
      REQUIRE(held);
      const pid_t controller = run.pid();
      const std::vector<TcpSocket> controller_sockets = tcp_sockets(socket_inodes(controller));
      const std::vector<pid_t> workers = faults::running_children_of(controller);
      CHECK(workers.size() == 2);
      std::set<std::string> worker_inodes;
      for (pid_t worker : workers) {
        const std::set<std::string> held_by_worker = socket_inodes(worker);
        worker_inodes.insert(held_by_worker.begin(), held_by_worker.end());
      }
      const std::vector<TcpSocket> worker_sockets = tcp_sockets(worker_inodes);
      std::size_t controller_listening = 0;
      std::size_t worker_connected = 0;
      for (const TcpSocket& socket : controller_sockets) {
        INFO("controller " << (socket.listening ? "listening on " : "connected from ") << socket.address);
        CHECK(socket.loopback);
        controller_listening += socket.listening ? 1 : 0;
      }
      for (const TcpSocket& socket : worker_sockets) {
        INFO("worker " << (socket.listening ? "listening on " : "connected from ") << socket.address);
        CHECK(socket.loopback);
        worker_connected += socket.listening ? 0 : 1;
      }
      // The controller listens for the control plane only, and only over tcp:
      // the rendezvous is a file store. Gloo's pairs between the workers are up.
      CHECK(controller_listening == (std::string(transport) == "tcp" ? 1 : 0));
      CHECK(worker_connected >= 2);
    }  // SIGKILL to rlcore: its workers follow it (PR_SET_PDEATHSIG)
    CHECK(faults::children_left_after(std::chrono::seconds(10)).empty());
  }
  fs::remove_all(ws);
}
