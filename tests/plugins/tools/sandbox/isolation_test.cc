// The python tool's isolation under attack (docs/agent-loop.md#the-python-tools-isolation):
// each claim is attacked by the code, as root and as nobody, and each attack
// is also run with the limits only, the control that shows the test can fail.
// The probes are harmless: system calls with invalid arguments, a decoy
// process, a file and listeners of the test's own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../../../common/error_of.h"
#include "sandbox/seccomp_filter.h"
#include "sandbox_testing.h"

extern char** environ;

using namespace sandbox_testing;

namespace isolation_test {

// A process of the test's own, with a secret in its environment.
class Decoy {
 public:
  Decoy() {
    char arg0[] = "/usr/bin/sleep", arg1[] = "60";
    char* argv[] = {arg0, arg1, nullptr};
    char secret[] = "RLCORE_SECRET=decoy-secret-4711";
    char* envp[] = {secret, nullptr};
    REQUIRE(::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv, envp) == 0);
  }
  ~Decoy() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  bool alive() const { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

// A TCP listener on 127.0.0.1 and one on an abstract Unix socket (which is per network namespace).
class Listeners {
 public:
  Listeners() : abstract_name_("rlcore-sandbox-test-" + std::to_string(::getpid())) {
    tcp_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(tcp_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(tcp_, 8) == 0);
    socklen_t length = sizeof address;
    ::getsockname(tcp_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    unix_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un named{};
    named.sun_family = AF_UNIX;
    std::memcpy(named.sun_path + 1, abstract_name_.data(), abstract_name_.size());
    REQUIRE(::bind(unix_, reinterpret_cast<sockaddr*>(&named),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_name_.size())) == 0);
    REQUIRE(::listen(unix_, 8) == 0);
  }
  ~Listeners() {
    ::close(tcp_);
    ::close(unix_);
  }
  int port() const { return port_; }
  const std::string& abstract_name() const { return abstract_name_; }
  int accepted() const {
    int count = 0;
    for (const int fd : {tcp_, unix_}) {
      for (int client; (client = ::accept(fd, nullptr, nullptr)) >= 0; ++count) ::close(client);
    }
    return count;
  }

 private:
  std::string abstract_name_;
  int tcp_ = -1, unix_ = -1, port_ = 0;
};

// Whether a process whose command line holds `token` is running (outside the sandbox's view).
bool process_with(const std::string& token, bool kill_it) {
  bool found = false;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (text.find(token) == std::string::npos || text.find("main.py") != std::string::npos) continue;
    found = true;
    if (kill_it) ::kill(std::stoi(name), SIGKILL);
  }
  return found;
}

}  // namespace isolation_test

using namespace isolation_test;

TEST_CASE("the code keeps no capability and cannot gain one", "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  const std::string code =
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def caps():\n"
      "    status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)\n"
      "    return status['CapEff'].strip(), status['CapBnd'].strip(), status['NoNewPrivs'].strip()\n"
      "print('before', *caps(), 'uid', os.getuid())\n"
      "result = libc.unshare(0x10000000)  # CLONE_NEWUSER: all capabilities in a namespace of its own\n"
      "print('unshare', result, ctypes.get_errno())\n"
      "if result == 0: print('after', *caps())\n";
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    return json{{"sandboxed", sandboxed(code, options)}, {"control", unisolated(code, options)}};
  });
  const std::string inside = text_of(reply["sandboxed"]), control = text_of(reply["control"]);
  INFO("sandboxed:\n" << inside << "control:\n" << control);
  CHECK_THAT(inside, Catch::StartsWith("before 0000000000000000 0000000000000000 1 uid 65534\nunshare -1 1\n"));
  CHECK_THAT(inside, !Catch::Contains("after"));
  // Outside, root holds every capability and anyone gains them all in a user namespace of its own.
  const bool root_caps = control.rfind("before 0000000000000000", 0) != 0;
  const bool gained = control.find("after 000001ffffffffff") != std::string::npos ||
                      control.find("after 000001fffeffffff") != std::string::npos ||
                      control.find("\nafter 0") != std::string::npos;
  CHECK((root_caps || gained));
}

TEST_CASE("the code neither sees nor signals a process outside its own tree", "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    json results;
    for (const bool isolated : {true, false}) {
      const Decoy decoy;
      const std::string pid = std::to_string(decoy.pid());
      const std::string code =
          "import os, signal\n"
          "print('processes', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
          "try:\n"
          "    print('environ', 'decoy-secret-4711' in open('/proc/" +
          pid +
          "/environ', 'rb').read().decode())\n"
          "except OSError as e:\n"
          "    print('environ refused', e.errno)\n"
          "try:\n"
          "    os.kill(" +
          pid +
          ", signal.SIGTERM)\n"
          "    print('signalled')\n"
          "except OSError as e:\n"
          "    print('kill refused', e.errno)\n";
      json result = isolated ? sandboxed(code, options) : unisolated(code, options);
      ::usleep(100000);
      result["decoy_alive"] = decoy.alive();
      results[isolated ? "sandboxed" : "control"] = result;
    }
    return results;
  });
  const std::string inside = text_of(reply["sandboxed"]), control = text_of(reply["control"]);
  INFO("sandboxed:\n" << inside << "control:\n" << control);
  CHECK_THAT(inside,
             Catch::Contains("environ refused") && Catch::Contains("kill refused") && !Catch::Contains("signalled"));
  CHECK(reply["sandboxed"]["decoy_alive"] == true);
  // Its own /proc: bubblewrap's init and the interpreter.
  CHECK_THAT(inside, Catch::StartsWith("processes 2\n"));
  CHECK_THAT(control, Catch::Contains("environ True") && Catch::Contains("signalled"));
  CHECK(reply["control"]["decoy_alive"] == false);
}

TEST_CASE("the code reads no file outside a read-only view of the system and writes only its scratch directory",
          "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  // A secret anyone may read and a directory anyone may write, outside the scratch directory.
  const fs::path secret = "/tmp/rlcore-sandbox-secret-" + std::to_string(::getpid());
  const fs::path open_dir = "/tmp/rlcore-sandbox-open-" + std::to_string(::getpid());
  std::ofstream(secret) << "secret-0815";
  fs::create_directories(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  const std::string code =
      "import os\n"
      "for path in ['" +
      secret.string() +
      "', '/etc/shadow', '/etc/passwd', '/root/.bashrc']:\n"
      "    try:\n"
      "        print('read', path, len(open(path).read()))\n"
      "    except OSError as e:\n"
      "        print('unreadable', e.errno)\n"
      "print('tmp shows the secret', '" +
      secret.filename().string() +
      "' in os.listdir('/tmp'))\n"
      "for path in ['/root', '/home']:\n"
      "    try:\n"
      "        print('listed', path, os.listdir(path))\n"
      "    except OSError as e:\n"
      "        print('unlistable', e.errno)\n"
      "for path in ['" +
      (open_dir / "escaped").string() +
      "', '/usr/escaped', '/dev/escaped', '/escaped']:\n"
      "    try:\n"
      "        open(path, 'w').write('x')\n"
      "        print('wrote', path)\n"
      "    except OSError as e:\n"
      "        print('unwritable', e.errno)\n"
      "open('mine', 'w').write('ok')\n"
      "open('/dev/shm/mine', 'w').write('ok')\n"
      "print('scratch', open('mine').read(), open('/dev/shm/mine').read())\n";
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    json results{{"sandboxed", sandboxed(code, options)}};
    results["escaped_inside"] = fs::exists(open_dir / "escaped");
    results["control"] = unisolated(code, options);
    return results;
  });
  const bool escaped_in_control = fs::exists(open_dir / "escaped");
  fs::remove(secret);
  fs::remove_all(open_dir);
  const std::string inside = text_of(reply["sandboxed"]), control = text_of(reply["control"]);
  INFO("sandboxed:\n" << inside << "control:\n" << control);
  CHECK_THAT(inside, !Catch::Contains("read /") && !Catch::Contains("listed") && !Catch::Contains("wrote"));
  CHECK_THAT(inside, Catch::EndsWith("scratch ok ok\n"));
  CHECK(reply["escaped_inside"] == false);
  CHECK(reply["sandboxed"]["error"] == false);
  CHECK_THAT(inside, Catch::Contains("tmp shows the secret False"));
  CHECK_THAT(control,
             Catch::Contains("read " + secret.string() + " 11") && Catch::Contains("tmp shows the secret True"));
  CHECK(escaped_in_control);
}

TEST_CASE("dangerous system calls are refused by the seccomp filter", "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  // Each with arguments the kernel rejects (or, for root, that do nothing): name, number, arguments, and
  // whether the kernel checks those arguments before the caller's privilege (then an unprivileged
  // control sees the argument's error too, not EPERM).
  struct Probe {
    const char* name;
    long number;
    const char* arguments;
    bool arguments_first;
  };
  const Probe probes[] = {
      {"mount", SYS_mount, "b'none', b'/rlcore-no-such-dir', b'bogusfs', 0, None", true},
      {"umount2", SYS_umount2, "b'/rlcore-no-such-dir', 0xffff", true},
      {"pivot_root", SYS_pivot_root, "b'/rlcore-no-such-dir', b'/rlcore-no-such-dir'", false},
      {"setns", SYS_setns, "-1, 0", true},
      {"unshare", SYS_unshare, "1", true},
      {"clone(CLONE_NEWUSER|CLONE_FS)", SYS_clone, "0x10000200, 0, 0, 0, 0", true},
      {"ptrace", SYS_ptrace, "16, 0x3fffffff, 0, 0", true},
      {"process_vm_readv", SYS_process_vm_readv, "0x3fffffff, None, 1, None, 1, 0", true},
      {"finit_module", SYS_finit_module, "-1, b'', 0", false},
      {"delete_module", SYS_delete_module, "b'rlcore_no_such_module', 0o4000", false},
      {"bpf", SYS_bpf, "-1, None, 0", false},
      {"perf_event_open", SYS_perf_event_open, "None, 0, -1, -1, 0", true},
      {"keyctl", SYS_keyctl, "-1, 0, 0, 0, 0", true},
      {"reboot", SYS_reboot, "0, 0, 0, None", false},
      {"io_uring_setup", SYS_io_uring_setup, "0, None", true},
      {"ioctl(TIOCSTI)", SYS_ioctl, "0, 0x5412, None", true},
  };
  std::string code =
      "import ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "libc.syscall.restype = ctypes.c_long\n"
      "def call(number, *args):\n"
      "    ctypes.set_errno(0)\n"
      "    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]\n"
      "    return 0 if libc.syscall(ctypes.c_long(number), *args) != -1 else ctypes.get_errno()\n";
  for (const Probe& probe : probes) {
    code += "print('" + std::string(probe.name) + "', call(" + std::to_string(probe.number) + ", " + probe.arguments +
            "))\n";
  }
  code += "print('clone3', call(" + std::to_string(SYS_clone3) + ", None, 0))\n";
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    return json{{"sandboxed", sandboxed(code, options)}, {"control", unisolated(code, options)}};
  });
  const std::string inside = text_of(reply["sandboxed"]), control = text_of(reply["control"]);
  INFO("sandboxed:\n" << inside << "control:\n" << control);
  for (const Probe& probe : probes) {
    INFO(probe.name);
    CHECK_THAT(inside, Catch::Contains(std::string("\n") + probe.name + " 1\n") ||
                           Catch::StartsWith(std::string(probe.name) + " 1\n"));
    if (user == User::root || probe.arguments_first) {
      CHECK_THAT(control, !Catch::Contains(std::string(probe.name) + " 1\n") &&
                              !Catch::Contains(std::string(probe.name) + " 0\n"));
    }
  }
  // clone3 answers ENOSYS, so that the C library falls back to clone, which the filter can read.
  CHECK_THAT(inside, Catch::Contains("clone3 38\n"));
  CHECK_THAT(control, !Catch::Contains("clone3 38\n"));
}

TEST_CASE("the code reaches no network, not the host's loopback nor its abstract sockets", "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  const Listeners listeners;
  const std::string code =
      "import socket\n"
      "try:\n"
      "    socket.create_connection(('127.0.0.1', " +
      std::to_string(listeners.port()) +
      "), timeout=2)\n"
      "    print('tcp connected')\n"
      "except OSError as e:\n"
      "    print('tcp refused', e.errno)\n"
      "try:\n"
      "    s = socket.socket(socket.AF_UNIX)\n"
      "    s.connect('\\0" +
      listeners.abstract_name() +
      "')\n"
      "    print('unix connected')\n"
      "except OSError as e:\n"
      "    print('unix refused', e.errno)\n"
      "try:\n"
      "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
      "    print('internet connected')\n"
      "except OSError as e:\n"
      "    print('internet refused', e.errno)\n"
      "print('interfaces', sorted(name for _, name in socket.if_nameindex()))\n";
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    json results{{"sandboxed", sandboxed(code, options)}};
    results["accepted_inside"] = listeners.accepted();
    results["control"] = unisolated(code, options);
    return results;
  });
  const std::string inside = text_of(reply["sandboxed"]), control = text_of(reply["control"]);
  INFO("sandboxed:\n" << inside << "control:\n" << control);
  CHECK_THAT(inside, !Catch::Contains("connected"));
  CHECK_THAT(inside, Catch::Contains("interfaces ['lo']"));
  CHECK(reply["accepted_inside"] == 0);
  CHECK_THAT(control, Catch::Contains("tcp connected") && Catch::Contains("unix connected"));
  CHECK(listeners.accepted() == 2);
}

TEST_CASE("nothing the code started outlives the call: setsid'd, double-forked and stopped processes included",
          "[sandbox][isolation]") {
  const User user = GENERATE(User::root, User::nobody);
  const bool times_out = GENERATE(false, true);
  INFO("as " << name_of(user) << (times_out ? ", the call killed at its deadline" : ", the call ending by itself"));
  const std::string token = "rlcore-outlive-" + std::to_string(::getpid()) + (times_out ? "-t" : "-e");
  const std::string code =
      "import os, signal, sys, time\n"
      "sleeper = 'import time; time.sleep(60)'\n"
      "def quiet():  # not holding the output open, which would keep the control's call to its deadline\n"
      "    null = os.open('/dev/null', os.O_WRONLY)\n"
      "    os.dup2(null, 1)\n"
      "    os.dup2(null, 2)\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    if os.fork() == 0:\n"
      "        quiet()\n"
      "        os.execv(sys.executable, [sys.executable, '-c', sleeper, '" +
      token +
      "-daemon'])\n"
      "    os._exit(0)\n"
      "if os.fork() == 0:\n"
      "    quiet()\n"
      "    os.execv(sys.executable, [sys.executable, '-c', 'import os, signal, time; "
      "os.kill(os.getpid(), signal.SIGSTOP); time.sleep(60)', '" +
      token +
      "-stopped'])\n"
      "time.sleep(0.5)\n"
      "print('started', flush=True)\n" +
      std::string(times_out ? "time.sleep(60)\n" : "");
  const json reply = as_user(user, [&](PythonToolOptions options) {
    options.timeout_s = 1;
    json results{{"sandboxed", sandboxed(code, options)}};
    results["left_inside"] = process_with(token, true);
    results["control"] = unisolated(code, options);
    ::usleep(200000);
    results["left_in_control"] = process_with(token, true);
    return results;
  });
  INFO("sandboxed:\n" << text_of(reply["sandboxed"]) << "control:\n" << text_of(reply["control"]));
  CHECK_THAT(text_of(reply["sandboxed"]), Catch::StartsWith("started"));
  CHECK(reply["sandboxed"]["error"] == times_out);
  CHECK(reply["left_inside"] == false);
  // Outside a PID namespace and a cgroup, the setsid'd grandchild escapes the process-group kill.
  CHECK(reply["left_in_control"] == true);
}

TEST_CASE("where the isolation cannot be set up the tool refuses to start and names what is missing",
          "[sandbox][isolation]") {
  // nobody without a delegated cgroup: the default parent is root's.
  const json reply = as_user(User::nobody, [](PythonToolOptions options) {
    options.cgroup_parent = "";
    json results;
    try {
      const PythonTool tool(options);
      results["refusal"] = "";
    } catch (const rlcore::ConfigError& e) {
      results["refusal"] = e.what();
    }
    options.allow_unisolated = true;
    results["unisolated"] = sandboxed("import os\nprint(os.getuid() != 0)", options);
    return results;
  });
  const std::string refusal = reply["refusal"];
  CHECK_THAT(refusal, Catch::Contains("refuses to start") && Catch::Contains("rlcore-sandbox") &&
                          Catch::Contains("cgroup_parent") && Catch::Contains("allow_unisolated"));
  CHECK(reply["unisolated"]["text"] == "True\n");
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([] {
               PythonToolOptions options = base_options();
               options.cgroup_parent = "../escape";
               PythonTool tool(options);
             }),
             Catch::Contains("cgroup_parent") && Catch::Contains("../escape"));
}

TEST_CASE("every call of the deny list is refused, whatever its arguments", "[sandbox][isolation]") {
  // Inside only: the probes above are the control that the filter, not the kernel, refuses them. Each
  // call gets -1 for every argument, which even unfiltered does nothing in the sandbox (bad pointers,
  // descriptors and flags; no capability of the host's), while personality(-1) and settimeofday(NULL)
  // would succeed unfiltered.
  const User user = GENERATE(User::root, User::nobody);
  INFO("as " << name_of(user));
  std::string code =
      "import ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "libc.syscall.restype = ctypes.c_long\n"
      "calls = {";
  const auto denied = rlcore::tools::denied_system_calls();
  REQUIRE(denied.size() >= 50);
  for (const auto& call : denied) code += "'" + call.name + "': " + std::to_string(call.number) + ", ";
  code +=
      "}\n"
      "for name, number in calls.items():\n"
      "    ctypes.set_errno(0)\n"
      "    arguments = [ctypes.c_long(-1)] * 6\n"
      "    if name == 'settimeofday': arguments = [None, None]\n"
      "    result = libc.syscall(ctypes.c_long(number), *arguments)\n"
      "    if result != -1 or ctypes.get_errno() != 1: print('not refused', name, result, ctypes.get_errno())\n"
      "print('checked', len(calls))\n";
  const json reply = as_user(user, [&](const PythonToolOptions& options) {
    return json{{"sandboxed", sandboxed(code, options)}};
  });
  CHECK(text_of(reply["sandboxed"]) == "checked " + std::to_string(denied.size()) + "\n");
}
