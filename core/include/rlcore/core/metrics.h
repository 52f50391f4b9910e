// Metrics sinks: one record of named scalars per step, written to the console
// (one compact line) and/or metrics.jsonl (one JSON object per line), chosen by
// trainer.logger.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore {

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

// Fans out to several sinks.
class RLCORE_API MetricsLogger {
 public:
  void add(std::unique_ptr<MetricsSink> sink);
  void log(int64_t step, const Metrics& metrics);
  void flush();

 private:
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// Builds the sinks named by trainer.logger ("console", "jsonl").
RLCORE_API MetricsLogger make_metrics_logger(const std::vector<std::string>& loggers, const std::string& run_dir,
                                             std::ostream& console);

}  // namespace rlcore
