// RLCORE_FAULT's parser and the actions of a fault point (see fault_point.h).
#include "rlcore/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "rlcore/error.h"

namespace rlcore {
namespace {

enum class FaultAction { kKill, kSegv, kExit3, kHang, kStall, kBrokenPipe, kTerm, kTermGroup };

struct FaultSpec {
  std::string point;
  std::string action_name;
  FaultAction action = FaultAction::kKill;
  std::optional<std::string> who;  // a rank or "controller"
  int64_t hit = 1;
};

FaultAction parse_action(const std::string& text, const std::string& spec) {
  if (text == "kill") return FaultAction::kKill;
  if (text == "segv") return FaultAction::kSegv;
  if (text == "exit3") return FaultAction::kExit3;
  if (text == "hang") return FaultAction::kHang;
  if (text == "stall") return FaultAction::kStall;
  if (text == "pipe") return FaultAction::kBrokenPipe;
  if (text == "term") return FaultAction::kTerm;
  if (text == "term_group") return FaultAction::kTermGroup;
  throw ConfigError("RLCORE_FAULT='" + spec + "': unknown action '" + text +
                    "' (kill, segv, exit3, hang, stall, pipe, term or term_group)");
}

FaultSpec parse_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0) {
    throw ConfigError("RLCORE_FAULT='" + spec + "': expected <point>:<action>[@<rank>|@controller][#<hit>]");
  }
  FaultSpec parsed;
  parsed.point = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  if (const auto hash = rest.find('#'); hash != std::string::npos) {
    const std::string hit = rest.substr(hash + 1);
    char* end = nullptr;
    parsed.hit = std::strtoll(hit.c_str(), &end, 10);
    if (hit.empty() || *end != '\0' || parsed.hit < 1) {
      throw ConfigError("RLCORE_FAULT='" + spec + "': '#" + hit + "' is not a hit count >= 1");
    }
    rest.resize(hash);
  }
  if (const auto at = rest.find('@'); at != std::string::npos) {
    parsed.who = rest.substr(at + 1);
    rest.resize(at);
  }
  parsed.action_name = rest;
  parsed.action = parse_action(rest, spec);
  return parsed;
}

// Workers are started with RLCORE_CONTROLLER (the address to dial) and RANK;
// the local launcher's replacements of a lost worker also with RLCORE_INCARNATION.
std::string this_process() {
  if (std::getenv("RLCORE_CONTROLLER") == nullptr) return "controller";
  const char* rank = std::getenv("RANK");
  const char* incarnation = std::getenv("RLCORE_INCARNATION");
  const std::string name = rank ? rank : "?";
  return incarnation && *incarnation && std::string(incarnation) != "0" ? name + "." + incarnation : name;
}

// Ends or stops the process, except for the signals a process may handle (term, term_group).
void act(const FaultSpec& spec) {
  const std::string line = "rlcore fault injection: " + spec.action_name + " at " + spec.point + " on " +
                           (this_process() == "controller" ? "the controller" : "rank " + this_process()) + " (pid " +
                           std::to_string(::getpid()) + ")\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  switch (spec.action) {
    case FaultAction::kKill:
      ::raise(SIGKILL);
      break;
    case FaultAction::kSegv:
      ::signal(SIGSEGV, SIG_DFL);
      ::raise(SIGSEGV);
      break;
    case FaultAction::kExit3:
      std::_Exit(3);
    case FaultAction::kHang:
      for (;;) ::raise(SIGSTOP);
    case FaultAction::kStall:
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    case FaultAction::kTerm:
      ::raise(SIGTERM);
      return;
    case FaultAction::kTermGroup:
      ::kill(0, SIGTERM);
      return;
    case FaultAction::kBrokenPipe: {
      int ends[2];
      if (::pipe(ends) != 0) throw IoError("fault injection: pipe() failed: " + std::string(std::strerror(errno)));
      ::close(ends[0]);
      const char byte = 0;
      const bool written = ::write(ends[1], &byte, 1) == 1;  // SIGPIPE here unless ignored
      const int error = errno;
      ::close(ends[1]);
      throw IoError("fault injection: write to a pipe whose reader is gone: " +
                    std::string(written ? "succeeded" : std::strerror(error)));
    }
  }
  std::abort();
}

}  // namespace

void fault_point(std::string_view point) {
  // Parsed once per process; the environment of a run does not change.
  static const std::optional<FaultSpec> spec = []() -> std::optional<FaultSpec> {
    const char* text = std::getenv("RLCORE_FAULT");
    if (text == nullptr || *text == '\0') return std::nullopt;
    return parse_spec(text);
  }();
  static std::atomic<int64_t> hits{0};
  if (!spec || point != spec->point) return;
  if (spec->who && *spec->who != this_process()) return;
  if (hits.fetch_add(1) + 1 == spec->hit) act(*spec);
}

}  // namespace rlcore
