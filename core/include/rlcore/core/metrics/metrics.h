// Metrics sinks: one record of named scalars per step, written to the console
// (one compact line), metrics.jsonl (one JSON object per line) and/or
// TensorBoard event files, chosen by trainer.logger.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore::metrics {

using Metrics = std::map<std::string, double>;

class RLCORE_API MetricsSink {
 public:
  virtual ~MetricsSink();
  virtual void log(int64_t step, const Metrics& metrics) = 0;
  virtual void flush() {}
};

// Prints "step 12 | critic/score/mean 0.531 | timing_s/step 1.92 | ..." per step.
// `keys` picks and orders the metrics shown (all, sorted, when empty).
class RLCORE_API ConsoleMetricsSink : public MetricsSink {
 public:
  explicit ConsoleMetricsSink(std::ostream& out, std::vector<std::string> keys = {});
  void log(int64_t step, const Metrics& metrics) override;

 private:
  std::ostream& out_;
  std::vector<std::string> keys_;
};

// Appends {"step": N, "<name>": value, ...} lines to <dir>/metrics.jsonl,
// creating the directory. Non-finite values are written as null.
class RLCORE_API JsonlMetricsSink : public MetricsSink {
 public:
  explicit JsonlMetricsSink(const std::string& run_dir);
  ~JsonlMetricsSink() override;
  void log(int64_t step, const Metrics& metrics) override;
  void flush() override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  struct File;
  std::unique_ptr<File> file_;
};

// Writes each step's metrics as TensorBoard scalars (tag = metric name, float32)
// to a new event file in `dir` (created), flushed after every step.
class RLCORE_API TensorBoardMetricsSink : public MetricsSink {
 public:
  explicit TensorBoardMetricsSink(const std::string& dir);
  ~TensorBoardMetricsSink() override;
  void log(int64_t step, const Metrics& metrics) override;
  void flush() override;
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);

  std::string path_;
  struct File;
  std::unique_ptr<File> file_;
};

// Where the tensorboard sink writes: $TENSORBOARD_DIR when set (as verl), else <run_dir>/tensorboard.
RLCORE_API std::string tensorboard_dir(const std::string& run_dir);

// The sink names trainer.logger accepts.
RLCORE_API const std::vector<std::string>& metrics_sink_names();

// Fans out to several sinks.
class RLCORE_API MetricsLogger {
 public:
  void add(std::unique_ptr<MetricsSink> sink);
  void log(int64_t step, const Metrics& metrics);
  void flush();

 private:
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// Adds the file sinks named in trainer.logger ("jsonl", "tensorboard") for a
// run writing to `run_dir`; "console" is the trainer's own (it picks the keys).
RLCORE_API void add_file_sinks(MetricsLogger& logger, const std::vector<std::string>& loggers,
                               const std::string& run_dir);

// For a run starting at step 0 in `run_dir` that logs to "jsonl": an earlier
// run's non-empty metrics.jsonl there is renamed metrics.<k>.jsonl (the first
// k from 1 that is free) and `out` told so, so that the new run's file holds
// its own steps only and nothing is lost. A resumed run appends instead.
RLCORE_API void set_aside_earlier_metrics(const std::vector<std::string>& loggers, const std::string& run_dir,
                                          std::ostream& out);

// Builds every sink named by trainer.logger, the console showing all metrics.
// ConfigError listing the sinks for an unknown name.
RLCORE_API MetricsLogger make_metrics_logger(const std::vector<std::string>& loggers, const std::string& run_dir,
                                             std::ostream& console);

}  // namespace rlcore::metrics
