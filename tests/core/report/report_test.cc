// `rlcore report`: metrics.jsonl (as metrics::JsonlMetricsSink writes it) -> one
// self-contained HTML page with a plot per metric group that has data.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "rlcore/core/cli/cli.h"
#include "rlcore/core/metrics/metrics.h"
#include "rlcore/core/report/report.h"
#include "rlcore/error.h"

namespace fs = std::filesystem;

namespace {

class RunDir {
 public:
  RunDir()
      : path_(fs::temp_directory_path() /
              ("rlcore_report_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~RunDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  std::string metrics() const { return (path_ / "metrics.jsonl").string(); }
  void write_metrics(const std::string& text) const { std::ofstream(metrics()) << text; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

size_t count(const std::string& text, const std::string& needle) {
  size_t found = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++found;
  return found;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Five steps of a GRPO-like run without a KL term (ppo_kl is NaN -> null).
void log_run(const RunDir& run) {
  rlcore::metrics::JsonlMetricsSink sink(run.path().string());
  for (int64_t step = 1; step <= 5; ++step) {
    rlcore::metrics::Metrics metrics = {{"critic/score/mean", 0.1 * static_cast<double>(step)},
                                        {"actor/entropy", 2.0 - 0.1 * static_cast<double>(step)},
                                        {"actor/ppo_kl", std::nan("")},
                                        {"response_length/mean", 5.0},
                                        {"timing_s/gen", 1.5},
                                        {"timing_s/step", 2.5},
                                        {"actor/pg_loss", -0.01}};
    if (step == 1 || step == 5) metrics["val-core/arithmetic/reward/mean@1"] = 0.2 * static_cast<double>(step);
    if (step == 5) metrics["val/<odd&name>"] = 0.5;
    sink.log(step, metrics);
  }
}

}  // namespace

TEST_CASE("the report has one svg per plot with data and notes the others", "[report]") {
  RunDir run;
  log_run(run);
  const std::string path = rlcore::report::write_report(run.path().string());
  CHECK(path == (run.path() / "report.html").string());
  const std::string html = read(path);
  // Reward, validation, entropy, response length, step time; KL has only nulls.
  CHECK(count(html, "<svg") == 5);
  CHECK(count(html, "</svg>") == 5);
  CHECK(html.find("No data for KL") != std::string::npos);
  CHECK(html.find("No data for Reward") == std::string::npos);
  CHECK(html.find("val-core/arithmetic/reward/mean@1") != std::string::npos);
  CHECK(html.find("val/&lt;odd&amp;name&gt;") != std::string::npos);
  CHECK(html.find("<odd&name>") == std::string::npos);
  // The last step's table.
  CHECK(html.find("Last step (5)") != std::string::npos);
  CHECK(html.find("actor/pg_loss") != std::string::npos);
  // Self-contained: nothing fetched from elsewhere.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
}

TEST_CASE("metric groups are picked by name and prefix; nulls are not data", "[report]") {
  RunDir run;
  log_run(run);
  const rlcore::report::MetricsHistory history = rlcore::report::read_metrics_history(run.metrics());
  CHECK(history.records == 5);
  CHECK(history.series.at("critic/score/mean").size() == 5);
  CHECK(history.series.at("val-core/arithmetic/reward/mean@1") ==
        std::vector<rlcore::report::MetricPoint>{{1, 0.2}, {5, 1.0}});
  CHECK(history.series.count("actor/ppo_kl") == 0);
  const auto& plots = rlcore::report::default_report_plots();
  auto metrics_of = [&](const std::string& title) {
    for (const auto& plot : plots) {
      if (plot.title == title) return rlcore::report::plot_metrics(plot, history);
    }
    FAIL("no plot titled " << title);
    return std::vector<std::string>{};
  };
  CHECK(metrics_of("Validation accuracy") ==
        std::vector<std::string>{"val-core/arithmetic/reward/mean@1", "val/<odd&name>"});
  CHECK(metrics_of("Step time (s)") == std::vector<std::string>{"timing_s/gen", "timing_s/step"});
  CHECK(metrics_of("KL").empty());
}

TEST_CASE("an asynchronous run's staleness and idle shares get plots; a synchronous run gets no note for them",
          "[report]") {
  RunDir run;
  log_run(run);
  CHECK(read(rlcore::report::write_report(run.path().string())).find("Staleness") == std::string::npos);
  {
    std::ofstream more(run.metrics(), std::ios::app);
    for (int step = 6; step <= 7; ++step) {
      more << "{\"step\": " << step << R"(, "async/staleness/mean": 1.0, "async/staleness/max": 2.0, )"
           << R"("trainer/idle_ratio": 0.1, "rollouter/idle_ratio": 0.3})"
           << "\n";
    }
  }
  const std::string html = read(rlcore::report::write_report(run.path().string()));
  CHECK(count(html, "<svg") == 7);
  CHECK(html.find("Staleness (updates)") != std::string::npos);
  CHECK(html.find("Idle share") != std::string::npos);
}

TEST_CASE("bad metrics files are errors naming the file and line", "[report]") {
  RunDir run;
  run.write_metrics("{\"step\": 1, \"a\": 1}\n\n{\"step\": 2, \"a\": \n");
  CHECK_THROWS_WITH(rlcore::report::read_metrics_history(run.metrics()),
                    Catch::Contains(run.metrics() + ":3") && Catch::Contains("bad JSON"));
  run.write_metrics("{\"a\": 1}\n");
  CHECK_THROWS_WITH(rlcore::report::read_metrics_history(run.metrics()),
                    Catch::Contains(run.metrics() + ":1") && Catch::Contains("\"step\""));
  run.write_metrics("{\"step\": 1, \"a\": \"high\"}\n");
  CHECK_THROWS_WITH(rlcore::report::read_metrics_history(run.metrics()), Catch::Contains("\"a\" is not a number"));
  run.write_metrics("");
  CHECK_THROWS_AS(rlcore::report::write_report(run.path().string()), rlcore::ValueError);
  CHECK_THROWS_AS(rlcore::report::read_metrics_history((run.path() / "absent.jsonl").string()), rlcore::IoError);
}

TEST_CASE("rlcore report writes the page where --out says and prints the path", "[report]") {
  RunDir run;
  log_run(run);
  const std::string out_path = (run.path() / "custom.html").string();
  std::istringstream in;
  std::ostringstream out, err;
  const int status = rlcore::cli::run_cli({"report", run.path().string(), "--out", out_path}, in, out, err);
  CHECK(status == 0);
  CHECK(err.str().empty());
  CHECK(out.str() == "wrote " + out_path + "\n");
  CHECK(count(read(out_path), "<svg") == 5);
  CHECK_FALSE(fs::exists(run.path() / "report.html"));

  std::ostringstream missing_out, missing_err;
  CHECK(rlcore::cli::run_cli({"report", (run.path() / "nope").string()}, in, missing_out, missing_err) == 1);
  CHECK_THAT(missing_err.str(), Catch::Contains("metrics.jsonl"));
}
