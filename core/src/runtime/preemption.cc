// The signal handlers of a preempted run and the controller's deadline.
#include "rlcore/core/runtime/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "rlcore/error.h"

namespace rlcore::runtime {
namespace {

std::atomic<int> g_requested{0};
// The line a worker's first signal writes (set before its handler is installed).
char g_worker_line[256] = {0};
std::size_t g_worker_line_size = 0;

void write_stderr(const char* text, std::size_t size) { (void)!::write(STDERR_FILENO, text, size); }

// Async-signal-safe: an atomic exchange, write(2) and _exit(2).
void on_controller_signal(int signal) {
  if (g_requested.exchange(signal) != 0) {
    static const char kAgain[] = "rlcore: second termination signal: exiting now\n";
    write_stderr(kAgain, sizeof(kAgain) - 1);
    ::_exit(128 + signal);
  }
}

void on_worker_signal(int signal) {
  if (g_requested.exchange(signal) != 0) ::_exit(128 + signal);
  write_stderr(g_worker_line, g_worker_line_size);
}

void install(void (*handler)(int), struct sigaction* previous_term, struct sigaction* previous_int) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, previous_term);
  ::sigaction(SIGINT, &action, previous_int);
}

}  // namespace

OnPreempt on_preempt_from_name(const std::string& name) {
  if (name == "checkpoint") return OnPreempt::kCheckpoint;
  if (name == "exit") return OnPreempt::kExit;
  throw ConfigError("trainer.on_preempt must be checkpoint or exit, got '" + name + "'");
}

struct PreemptionWatch::Impl {
  OnPreempt on_preempt;
  std::chrono::milliseconds grace;
  struct sigaction previous_term {};
  struct sigaction previous_int {};
  std::mutex mutex;
  std::condition_variable stopping;
  bool stop = false;
  std::thread watchdog;

  // Waits for a signal, then for the deadline; the run ends by itself first
  // (the destructor) unless it overruns it.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop && g_requested.load() == 0) stopping.wait_for(lock, std::chrono::milliseconds(50));
    if (stop) return;
    const std::string name = requested_name();
    if (on_preempt == OnPreempt::kExit) {
      spdlog::warn("rlcore: {}: trainer.on_preempt is exit: abandoning the run now, exit status {}", name,
                   kExitPreempted);
      spdlog::default_logger()->flush();
      std::_Exit(kExitPreempted);
    }
    spdlog::warn("rlcore: {}: finishing the current step, then a checkpoint (trainer.preempt_grace_s {:.1f})", name,
                 grace.count() / 1000.0);
    if (stopping.wait_for(lock, grace, [this] { return stop; })) return;
    spdlog::error(
        "rlcore: the preemption checkpoint was not done within trainer.preempt_grace_s ({:.1f} s); exiting with "
        "status {} without it (the previous checkpoint, if any, resumes)",
        grace.count() / 1000.0, kExitPreempted);
    spdlog::default_logger()->flush();
    std::_Exit(kExitPreempted);
  }
};

PreemptionWatch::PreemptionWatch(OnPreempt on_preempt, std::chrono::milliseconds grace)
    : impl_(std::make_unique<Impl>()) {
  impl_->on_preempt = on_preempt;
  impl_->grace = grace;
  g_requested.store(0);
  install(on_controller_signal, &impl_->previous_term, &impl_->previous_int);
  impl_->watchdog = std::thread([impl = impl_.get()] { impl->watch(); });
}

PreemptionWatch::~PreemptionWatch() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->stopping.notify_all();
  impl_->watchdog.join();
  ::sigaction(SIGTERM, &impl_->previous_term, nullptr);
  ::sigaction(SIGINT, &impl_->previous_int, nullptr);
}

int PreemptionWatch::requested() { return g_requested.load(); }

std::string PreemptionWatch::requested_name() {
  switch (g_requested.load()) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "";
  }
}

void ignore_first_termination_signal(const std::string& who) {
  const std::string line = who + ": termination signal: waiting for the controller's word (a second one exits now)\n";
  g_worker_line_size = std::min(line.size(), sizeof(g_worker_line));
  std::memcpy(g_worker_line, line.data(), g_worker_line_size);
  g_requested.store(0);
  install(on_worker_signal, nullptr, nullptr);
}

}  // namespace rlcore::runtime
