// trainer.logger's tensorboard sink writes event files the tensorboard package
// reads back with the same scalars (float32), steps and wall times.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rlcore/core/metrics/metrics.h"
#include "rlcore/error.h"

#include <catch2/catch.hpp>

#include "../../common/reference_python.h"
#include "../../common/test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "tensorboard_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

json read_back(const fs::path& logdir) {
  return json::parse(rlcore_test::run_reference(
      rlcore_test::reference_script("core/metrics/reference/tensorboard_reference.py"), {logdir.string()}));
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("tensorboard reads back every scalar the sink wrote", "[metrics][tensorboard]") {
  const fs::path dir = scratch("scalars");
  std::vector<rlcore::metrics::Metrics> steps;
  for (int64_t step = 1; step <= 5; ++step) {
    rlcore::metrics::Metrics metrics;
    for (int tag = 0; tag < 40; ++tag) metrics["actor/metric_" + std::to_string(tag)] = 0.37 * step - tag * 1.25;
    metrics["critic/score/mean"] = step / 3.0;
    metrics["timing_s/step"] = 1e-9 * step;
    metrics["perf/tokens \u00e9\u4e2d"] = 12345678.9;  // a tag beyond ASCII
    steps.push_back(metrics);
  }
  steps[2]["actor/pg_loss"] = std::numeric_limits<double>::quiet_NaN();
  steps[3]["actor/pg_loss"] = std::numeric_limits<double>::infinity();
  steps[4]["actor/pg_loss"] = -std::numeric_limits<double>::infinity();
  const double before = seconds_now();
  {
    rlcore::metrics::TensorBoardMetricsSink sink(dir.string());
    CHECK(fs::path(sink.path()).filename().string().rfind("events.out.tfevents.", 0) == 0);
    for (size_t i = 0; i < steps.size(); ++i) sink.log(static_cast<int64_t>(i + 1), steps[i]);
  }
  const double after = seconds_now();

  const json read = read_back(dir);
  CHECK(read["files"] == 1);
  CHECK(read["file_version"] == 2.0);  // EventAccumulator parses "brain.Event:2"
  const json& scalars = read["scalars"];
  size_t expected_tags = 0;
  for (const auto& metrics : steps) expected_tags = std::max(expected_tags, metrics.size());
  CHECK(scalars.size() == expected_tags);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (const auto& [tag, value] : steps[i]) {
      INFO("step " << i + 1 << ", tag " << tag);
      REQUIRE(scalars.contains(tag));
      const json* found = nullptr;
      for (const json& point : scalars[tag]) {
        if (point[0] == static_cast<int64_t>(i + 1)) found = &point;
      }
      REQUIRE(found != nullptr);
      const float expected = static_cast<float>(value);
      if (std::isnan(expected)) {
        CHECK((*found)[1] == "nan");
      } else if (std::isinf(expected)) {
        CHECK((*found)[1] == (expected > 0 ? "inf" : "-inf"));
      } else {
        CHECK((*found)[1].get<double>() == static_cast<double>(expected));  // float32 exactly
      }
      const double wall_time = (*found)[2].get<double>();
      CHECK(wall_time >= before - 1e-3);
      CHECK(wall_time <= after + 1e-3);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("a running TensorBoard sees each step as soon as it is logged", "[metrics][tensorboard]") {
  const fs::path dir = scratch("live");
  rlcore::metrics::TensorBoardMetricsSink sink(dir.string());
  for (int64_t step = 1; step <= 2; ++step) {
    sink.log(step, {{"actor/pg_loss", 0.25 * static_cast<double>(step)}});
    const json points = read_back(dir)["scalars"]["actor/pg_loss"];  // the sink still open
    REQUIRE(points.size() == static_cast<size_t>(step));
    CHECK(points.back()[0] == step);
    CHECK(points.back()[1] == 0.25 * static_cast<double>(step));
  }
  fs::remove_all(dir);
}

TEST_CASE("trainer.logger builds the tensorboard sink in $TENSORBOARD_DIR or the run directory",
          "[metrics][tensorboard]") {
  const fs::path run_dir = scratch("run");
  ::unsetenv("TENSORBOARD_DIR");
  CHECK(rlcore::metrics::tensorboard_dir(run_dir.string()) == (run_dir / "tensorboard").string());
  std::ostringstream console;
  {
    rlcore::metrics::MetricsLogger logger =
        rlcore::metrics::make_metrics_logger({"console", "jsonl", "tensorboard"}, run_dir.string(), console);
    logger.log(1, {{"critic/score/mean", 0.5}});
  }
  CHECK(fs::exists(run_dir / "metrics.jsonl"));
  CHECK(read_back(run_dir / "tensorboard")["scalars"]["critic/score/mean"][0][1] == 0.5);
  CHECK_THAT(console.str(), Catch::Contains("critic/score/mean 0.5"));

  const fs::path elsewhere = scratch("elsewhere");
  ::setenv("TENSORBOARD_DIR", elsewhere.string().c_str(), 1);
  CHECK(rlcore::metrics::tensorboard_dir(run_dir.string()) == elsewhere.string());
  ::unsetenv("TENSORBOARD_DIR");

  CHECK_THROWS_WITH(rlcore::metrics::make_metrics_logger({"wandb"}, run_dir.string(), console),
                    Catch::Contains("'wandb'") && Catch::Contains("console, jsonl, tensorboard"));
  fs::remove_all(run_dir);
  fs::remove_all(elsewhere);
}
