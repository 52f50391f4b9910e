// Console and JSONL metrics sinks, and building trainer.logger's sinks.
#include "rlcore/core/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::metrics {

MetricsSink::~MetricsSink() = default;

ConsoleMetricsSink::ConsoleMetricsSink(std::ostream& out, std::vector<std::string> keys)
    : out_(out), keys_(std::move(keys)) {}

void ConsoleMetricsSink::log(int64_t step, const Metrics& metrics) {
  std::ostringstream line;
  line << "step " << step;
  auto print = [&](const std::string& name, double value) {
    line << " | " << name << " " << std::setprecision(4) << value;
  };
  if (keys_.empty()) {
    for (const auto& [name, value] : metrics) print(name, value);
  } else {
    for (const auto& name : keys_) {
      if (auto it = metrics.find(name); it != metrics.end()) print(name, it->second);
    }
  }
  out_ << line.str() << std::endl;
}

struct JsonlMetricsSink::File {
  std::ofstream stream;
};

JsonlMetricsSink::JsonlMetricsSink(const std::string& run_dir) : file_(std::make_unique<File>()) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  path_ = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  file_->stream.open(path_, std::ios::app);
  if (!file_->stream) throw IoError("cannot open metrics file '" + path_ + "' for writing");
}

JsonlMetricsSink::~JsonlMetricsSink() = default;

void JsonlMetricsSink::log(int64_t step, const Metrics& metrics) {
  nlohmann::json record = {{"step", step}};
  for (const auto& [name, value] : metrics) {
    record[name] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  file_->stream << record.dump() << '\n';
  file_->stream.flush();
  if (!file_->stream) throw IoError("failed writing metrics to '" + path_ + "'");
}

void JsonlMetricsSink::flush() { file_->stream.flush(); }

void MetricsLogger::add(std::unique_ptr<MetricsSink> sink) { sinks_.push_back(std::move(sink)); }

void MetricsLogger::log(int64_t step, const Metrics& metrics) {
  for (auto& sink : sinks_) sink->log(step, metrics);
}

void MetricsLogger::flush() {
  for (auto& sink : sinks_) sink->flush();
}

const std::vector<std::string>& metrics_sink_names() {
  static const std::vector<std::string> names = {"console", "jsonl", "tensorboard"};
  return names;
}

namespace {

void check_sink_name(const std::string& name) {
  const auto& names = metrics_sink_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  throw ConfigError("trainer.logger: unknown sink '" + name + "'; sinks are: " + join(names));
}

}  // namespace

void add_file_sinks(MetricsLogger& logger, const std::vector<std::string>& loggers, const std::string& run_dir) {
  for (const auto& name : loggers) {
    check_sink_name(name);
    if (name == "jsonl") logger.add(std::make_unique<JsonlMetricsSink>(run_dir));
    if (name == "tensorboard") logger.add(std::make_unique<TensorBoardMetricsSink>(tensorboard_dir(run_dir)));
  }
}

void set_aside_earlier_metrics(const std::vector<std::string>& loggers, const std::string& run_dir, std::ostream& out) {
  if (std::find(loggers.begin(), loggers.end(), "jsonl") == loggers.end()) return;
  const std::filesystem::path dir(run_dir);
  const std::filesystem::path current = dir / "metrics.jsonl";
  std::error_code error;
  const auto size = std::filesystem::file_size(current, error);
  if (error || size == 0) return;
  int k = 1;
  while (std::filesystem::exists(dir / ("metrics." + std::to_string(k) + ".jsonl"))) ++k;
  const std::filesystem::path kept = dir / ("metrics." + std::to_string(k) + ".jsonl");
  std::filesystem::rename(current, kept, error);
  if (error) {
    throw IoError("cannot set the earlier run's '" + current.string() + "' aside as '" + kept.string() +
                  "': " + error.message());
  }
  out << "rlcore: " << current.string() << " held an earlier run's metrics; they are now in " << kept.string() << "\n";
}

MetricsLogger make_metrics_logger(const std::vector<std::string>& loggers, const std::string& run_dir,
                                  std::ostream& console) {
  MetricsLogger logger;
  if (std::find(loggers.begin(), loggers.end(), "console") != loggers.end()) {
    logger.add(std::make_unique<ConsoleMetricsSink>(console));
  }
  add_file_sinks(logger, loggers, run_dir);
  return logger;
}

}  // namespace rlcore::metrics
