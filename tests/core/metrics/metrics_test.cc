// metrics::Metrics sinks: the console line and metrics.jsonl records.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "rlcore/core/metrics/metrics.h"
#include "rlcore/error.h"

TEST_CASE("console sink prints one line per step in the requested order", "[metrics]") {
  std::ostringstream out;
  rlcore::metrics::ConsoleMetricsSink sink(out, {"b", "a"});
  sink.log(3, {{"a", 1.5}, {"b", 0.25}, {"c", 9}});
  CHECK(out.str() == "step 3 | b 0.25 | a 1.5\n");
}

TEST_CASE("jsonl sink appends one object per step; non-finite values become null", "[metrics]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rlcore_metrics_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    std::ostringstream console;
    auto logger = rlcore::metrics::make_metrics_logger({"console", "jsonl"}, dir.string(), console);
    logger.log(1, {{"critic/score/mean", 0.5}});
    logger.log(2, {{"critic/score/mean", 0.75}, {"actor/pg_loss", std::nan("")}});
    CHECK_THAT(console.str(), Catch::Contains("step 2 | actor/pg_loss nan | critic/score/mean 0.75"));
  }
  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  REQUIRE(records.size() == 2);
  CHECK(records[0]["step"] == 1);
  CHECK(records[1]["critic/score/mean"] == 0.75);
  CHECK(records[1]["actor/pg_loss"].is_null());
  std::filesystem::remove_all(dir);
}

TEST_CASE("an unknown logger name is a config error naming the sinks", "[metrics]") {
  std::ostringstream console;
  CHECK_THROWS_WITH(rlcore::metrics::make_metrics_logger({"wandb"}, "/tmp", console),
                    Catch::Contains("unknown sink 'wandb'") && Catch::Contains("console, jsonl"));
}

TEST_CASE("a fresh run sets an earlier run's metrics.jsonl aside instead of appending to it", "[metrics]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rlcore_metrics_aside_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ostringstream out;
  rlcore::metrics::set_aside_earlier_metrics({"console", "jsonl"}, dir.string(), out);  // nothing there yet
  CHECK(out.str().empty());
  std::ofstream(dir / "metrics.jsonl") << "{\"step\": 1}\n";
  std::ofstream(dir / "metrics.1.jsonl") << "{\"step\": 7}\n";                 // an older one still: kept as it is
  rlcore::metrics::set_aside_earlier_metrics({"console"}, dir.string(), out);  // no jsonl sink: not its file to move
  CHECK(std::filesystem::exists(dir / "metrics.jsonl"));
  rlcore::metrics::set_aside_earlier_metrics({"console", "jsonl"}, dir.string(), out);
  CHECK_FALSE(std::filesystem::exists(dir / "metrics.jsonl"));
  std::ifstream kept(dir / "metrics.2.jsonl");
  std::string line;
  std::getline(kept, line);
  CHECK(line == "{\"step\": 1}");
  CHECK_THAT(out.str(), Catch::Contains("metrics.2.jsonl"));
  std::filesystem::remove_all(dir);
}
