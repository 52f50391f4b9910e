// LocalLauncher: posix_spawn of `rlcore worker` processes with their rank in the
// environment, reaping, and escalating termination.
#include "rlcore/core/runtime/local_launcher.h"

#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/secret.h"
#include "rlcore/error.h"

extern char** environ;

namespace rlcore::runtime {

namespace {

// Variables the launcher sets itself; inherited values would contradict them.
bool is_overridden(const std::string& entry, const std::map<std::string, std::string>& env) {
  const auto equals = entry.find('=');
  return equals != std::string::npos && env.count(entry.substr(0, equals)) > 0;
}

std::vector<std::string> child_environment(const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry; ++entry) {
    if (!is_overridden(*entry, env)) entries.emplace_back(*entry);
  }
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& text : strings) result.push_back(text.data());
  result.push_back(nullptr);
  return result;
}

pid_t spawn(const std::string& executable, std::vector<std::string> argv, std::vector<std::string> env) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  // Only stdin/stdout/stderr cross over: no listening sockets or store fds leak
  // into workers (which would keep ports open after the controller died).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  auto argv_pointers = pointers(argv);
  auto env_pointers = pointers(env);
  pid_t pid = 0;
  const int error =
      posix_spawn(&pid, executable.c_str(), &actions, &attributes, argv_pointers.data(), env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) throw IoError("cannot start worker executable '" + executable + "': " + std::strerror(error));
  return pid;
}

// The cores this process may run on: its affinity mask (taskset, a cgroup's
// cpuset, ctest's PROCESSOR_AFFINITY), which can be fewer than the host's.
int64_t usable_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0) return CPU_COUNT(&mask);
  return static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

std::string default_worker_executable() {
  if (const char* configured = std::getenv("RLCORE_EXECUTABLE"); configured && *configured) return configured;
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) throw IoError(std::string("cannot read /proc/self/exe: ") + std::strerror(errno));
  return std::string(path, static_cast<std::size_t>(length));
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = strsignal(signal);
    return "killed by signal " + std::to_string(signal) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

int64_t threads_for_worker(int64_t threads_per_worker, int64_t nworkers) {
  if (threads_per_worker > 0) return threads_per_worker;
  if (const char* inherited = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long threads = std::strtol(inherited, &end, 10);
    if (end != inherited && *end == '\0' && threads > 0) return threads;
  }
  return std::max<int64_t>(1, usable_cores() / std::max<int64_t>(1, nworkers));
}

struct LocalLauncher::Impl {
  LocalLaunchOptions options;
  mutable std::mutex mutex;
  std::vector<pid_t> pids;
  std::vector<bool> running;
  std::vector<int64_t> restarts;  // per rank

  // Reaps ended workers; with `block`, waits for `rank` specifically.
  std::vector<ExitedWorker> reap() {
    std::vector<ExitedWorker> ended;
    std::lock_guard<std::mutex> lock(mutex);
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      if (!running[rank]) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids[rank], &status, WNOHANG);
      if (done == pids[rank] || (done < 0 && errno == ECHILD)) {
        running[rank] = false;
        ended.push_back(ExitedWorker{static_cast<int64_t>(rank), pids[rank],
                                     done < 0 ? "was reaped elsewhere" : describe_wait_status(status)});
      }
    }
    return ended;
  }

  bool any_running() const {
    std::lock_guard<std::mutex> lock(mutex);
    for (bool alive : running) {
      if (alive) return true;
    }
    return false;
  }

  // Starts rank `rank`'s worker process (its pid replaces the previous one's).
  void spawn_rank(int64_t rank, int64_t threads) {
    std::map<std::string, std::string> env = options.env;
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(options.nworkers);
    env["LOCAL_RANK"] = std::to_string(rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(options.nworkers);
    env["RLCORE_CONTROLLER"] = options.controller;
    env[kSecretEnv] = options.secret;
    env["RLCORE_PARENT_PID"] = std::to_string(::getpid());
    env["RLCORE_NUM_THREADS"] = std::to_string(threads);
    env["OMP_NUM_THREADS"] = std::to_string(threads);
    env["OPENBLAS_NUM_THREADS"] = std::to_string(threads);
    // libgomp's threads otherwise spin between parallel regions, fighting
    // OpenBLAS's own thread pool for the same cores (measured: 5 s -> 0.3 s
    // per SFT step of the tiny model on 2 cores). A user's setting wins.
    if (!std::getenv("OMP_WAIT_POLICY") && !options.env.count("OMP_WAIT_POLICY")) env["OMP_WAIT_POLICY"] = "PASSIVE";
    {
      std::lock_guard<std::mutex> lock(mutex);
      // rlcore/fault_point.h: a replacement is `<rank>.<k>` to fault injection.
      env["RLCORE_INCARNATION"] = std::to_string(rank < static_cast<int64_t>(restarts.size()) ? restarts[rank] : 0);
    }
    std::vector<std::string> argv = {options.executable};
    argv.insert(argv.end(), options.args.begin(), options.args.end());
    const pid_t pid = spawn(options.executable, std::move(argv), child_environment(env));
    std::lock_guard<std::mutex> lock(mutex);
    if (rank == static_cast<int64_t>(pids.size())) {
      pids.push_back(pid);
      running.push_back(true);
      restarts.push_back(0);
    } else {
      pids[rank] = pid;
      running[rank] = true;
    }
    spdlog::debug("local launcher: started worker rank {} as pid {}", rank, pid);
  }

  void signal_running(int signal) {
    std::lock_guard<std::mutex> lock(mutex);
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      if (running[rank]) ::kill(pids[rank], signal);
    }
  }
};

LocalLauncher::LocalLauncher(LocalLaunchOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.nworkers < 1)
    throw ValueError("LocalLauncher needs nworkers >= 1, got " + std::to_string(options.nworkers));
  if (options.executable.empty()) options.executable = default_worker_executable();
  impl_->options = std::move(options);
  const LocalLaunchOptions& o = impl_->options;
  const int64_t threads = threads_for_worker(o.threads_per_worker, o.nworkers);
  for (int64_t rank = 0; rank < o.nworkers; ++rank) {
    try {
      impl_->spawn_rank(rank, threads);
    } catch (...) {
      terminate(std::chrono::milliseconds(1000));
      throw;
    }
  }
}

LocalLauncher::~LocalLauncher() { terminate(std::chrono::milliseconds(2000)); }

std::vector<pid_t> LocalLauncher::pids() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->pids;
}

std::vector<ExitedWorker> LocalLauncher::poll() { return impl_->reap(); }

bool LocalLauncher::wait_all(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    impl_->reap();
    if (!impl_->any_running()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void LocalLauncher::kill(int64_t rank) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // Not yet reaped, so the pid is still this worker's (a zombie at worst).
  if (rank >= 0 && rank < static_cast<int64_t>(impl_->pids.size()) && impl_->running[rank]) {
    ::kill(impl_->pids[rank], SIGKILL);
  }
}

void LocalLauncher::restart(int64_t rank) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (rank < 0 || rank >= static_cast<int64_t>(impl_->pids.size())) {
      throw ValueError("LocalLauncher::restart: no worker rank " + std::to_string(rank));
    }
    if (impl_->running[rank]) {
      // Reaped here, so that poll() never reports the old process after its replacement started.
      ::kill(impl_->pids[rank], SIGKILL);
      int status = 0;
      ::waitpid(impl_->pids[rank], &status, 0);
      impl_->running[rank] = false;
    }
    ++impl_->restarts[rank];
  }
  const LocalLaunchOptions& o = impl_->options;
  impl_->spawn_rank(rank, threads_for_worker(o.threads_per_worker, o.nworkers));
}

void LocalLauncher::terminate(std::chrono::milliseconds grace) {
  impl_->reap();
  if (!impl_->any_running()) return;
  // A worker notes its first SIGTERM and waits for the controller
  // (runtime/preemption.h); the second ends it.
  impl_->signal_running(SIGTERM);
  impl_->signal_running(SIGCONT);  // a stopped worker handles SIGTERM only once continued
  const auto noted = std::min(grace, std::chrono::milliseconds(100));
  if (wait_all(noted)) return;
  impl_->signal_running(SIGTERM);
  if (wait_all(grace - noted)) return;
  spdlog::warn("local launcher: workers still running {} ms after SIGTERM; sending SIGKILL", grace.count());
  impl_->signal_running(SIGKILL);
  // SIGKILL cannot be ignored; the bound only guards against a kernel stuck in D state.
  if (!wait_all(std::chrono::milliseconds(10000))) spdlog::error("local launcher: workers survived SIGKILL");
}

}  // namespace rlcore::runtime
