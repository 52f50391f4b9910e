// TensorBoard event files, written natively (no TensorFlow, no Python).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rlcore/core/metrics/metrics.h"
#include "rlcore/error.h"
#include "metrics/tensorboard_event.h"

namespace rlcore::metrics {
namespace {

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// events.out.tfevents.<unix time>.<host>.<pid>.<n>, as TensorFlow names them:
// tensorboard picks up every file whose name holds "tfevents".
std::string event_file_name() {
  static std::atomic<int> counter{0};
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  char name[512];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.%d",
                static_cast<long long>(seconds_since_epoch()), host, static_cast<int>(::getpid()), counter++);
  return name;
}

}  // namespace

struct TensorBoardMetricsSink::File {
  std::ofstream stream;
};

TensorBoardMetricsSink::TensorBoardMetricsSink(const std::string& dir) : file_(std::make_unique<File>()) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  path_ = (std::filesystem::path(dir) / event_file_name()).string();
  file_->stream.open(path_, std::ios::binary | std::ios::trunc);
  if (!file_->stream) throw IoError("cannot open TensorBoard event file '" + path_ + "' for writing");
  write(metrics::tensorboard::file_version_event(seconds_since_epoch()));
}

TensorBoardMetricsSink::~TensorBoardMetricsSink() = default;

void TensorBoardMetricsSink::log(int64_t step, const Metrics& metrics) {
  std::vector<std::pair<std::string, float>> scalars;
  scalars.reserve(metrics.size());
  for (const auto& [name, value] : metrics) scalars.emplace_back(name, static_cast<float>(value));
  write(metrics::tensorboard::scalars_event(seconds_since_epoch(), step, scalars));
}

void TensorBoardMetricsSink::flush() { file_->stream.flush(); }

void TensorBoardMetricsSink::write(const std::string& event) {
  file_->stream << metrics::tensorboard::tfrecord(event);
  file_->stream.flush();  // a running TensorBoard sees each step as it lands
  if (!file_->stream) throw IoError("failed writing TensorBoard events to '" + path_ + "'");
}

std::string tensorboard_dir(const std::string& run_dir) {
  const char* configured = std::getenv("TENSORBOARD_DIR");
  if (configured != nullptr && *configured != '\0') return configured;
  return (std::filesystem::path(run_dir) / "tensorboard").string();
}

}  // namespace rlcore::metrics
