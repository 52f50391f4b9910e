// The sandbox_fusion grader against a stand-in SandboxFusion server
// (fixtures/sandbox_server.py, which really runs the submitted Python): verl's
// scores, code extraction and result codes, the request it sends, concurrency,
// and a sandbox that is down, slow, or answers garbage.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "../../common/reference_python.h"
#include "../../common/server_process.h"
#include "rlcore/error.h"
#include "sandbox_fusion_grader.h"

namespace {

using rlcore::GradeRequest;
using rlcore::reward::CaseResult;
using rlcore::reward::classify_sandbox_reply;
using rlcore::reward::extract_code;
using rlcore::reward::SandboxApiErrors;
using rlcore::reward::SandboxFusionGrader;
using rlcore::reward::SandboxFusionOptions;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// One stand-in server for the whole file; GET /calls reports what it saw.
struct Sandbox {
  rlcore_test::ServerProcess process{
      {rlcore_test::reference_python(), rlcore_test::reference_script("plugins/reward/fixtures/sandbox_server.py")}};
  json calls() const {
    httplib::Client client(process.url());
    const auto result = client.Get("/calls");
    REQUIRE(result);
    return json::parse(result->body);
  }
  int count(const std::string& path) const { return calls()["calls"].value(path, 0); }
};

Sandbox& sandbox() {
  static Sandbox instance;
  return instance;
}

SandboxFusionOptions options_for(const std::string& path) {
  SandboxFusionOptions options;
  options.url = sandbox().process.url() + path;
  options.timeout_s = 5;
  options.retry_delay_s = 0.01;
  return options;
}

double score(const SandboxFusionOptions& options, const std::string& response, const json& cases) {
  return SandboxFusionGrader(options).grade(response, cases.dump(), "codecontests", json::object()).score;
}

const std::string kEcho = "```python\nprint(input())\n```";
const std::string kDouble = "Here:\n```python\nn = int(input())\nprint(n * 2)\n```\nDone.";

std::string error_of_grading(const SandboxFusionOptions& options, const std::string& response, const json& cases) {
  return rlcore_test::error_of<rlcore::Error>([&] { score(options, response, cases); });
}

}  // namespace

TEST_CASE("sandbox_fusion scores the fraction of test cases whose output matches") {
  const SandboxFusionOptions options = options_for("/run_code");
  CHECK(score(options, kDouble, {{"inputs", {"1", "2", "5"}}, {"outputs", {"2", "4", "10"}}}) == 1.0);
  CHECK(score(options, kDouble, {{"inputs", {"1", "2", "5", "7"}}, {"outputs", {"2", "4", "11", "0"}}}) == 0.5);
  // Trailing newlines are ignored on both sides, other whitespace is not.
  CHECK(score(options, kEcho, {{"inputs", {"a\n"}}, {"outputs", {"a\n\n\n"}}}) == 1.0);
  CHECK(score(options, kEcho, {{"inputs", {"a"}}, {"outputs", {"a "}}}) == 0.0);
  // A null expected output passes whenever the program finishes cleanly.
  CHECK(score(options, kEcho, {{"inputs", {"x"}}, {"outputs", {nullptr}}}) == 1.0);
  // Non-string inputs and outputs go through Python's str().
  CHECK(score(options, "```python\nprint(int(input()) + 1)\n```", {{"inputs", {41}}, {"outputs", {42}}}) == 1.0);
  CHECK(score(options, "```python\nprint(input())\n```",
              {{"inputs", {json::array({1, "a"})}}, {"outputs", {"[1, 'a']"}}}) == 1.0);
  CHECK(score(options, "```python\nprint(input())\n```", {{"inputs", {true}}, {"outputs", {"True"}}}) == 1.0);
}

TEST_CASE("sandbox_fusion: crashes, time limits and missing code score as verl's") {
  SandboxFusionOptions options = options_for("/run_code");
  const json one = {{"inputs", {"1"}}, {"outputs", {"2"}}};
  CHECK(score(options, "```python\nraise SystemExit(3)\n```", one) == 0.0);
  CHECK(score(options, "```python\nthis is not python\n```", one) == 0.0);
  options.timeout_s = 1;
  const auto start = std::chrono::steady_clock::now();
  CHECK(score(options, "```python\nimport time\ntime.sleep(30)\n```", one) == 0.0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));

  const int before = sandbox().count("/run_code");
  CHECK(score(options, "n = int(input())\nprint(n * 2)", one) == 0.0);  // no ``` block: no request at all
  CHECK(score(options, kDouble, json("not test cases")) == 0.0);
  CHECK(SandboxFusionGrader(options).grade(kDouble, "{not json", "", json::object()).score == 0.0);
  CHECK(score(options, kDouble, {{"inputs", {"1"}}}) == 0.0);  // no outputs
  CHECK(score(options, kDouble, {{"inputs", json::array()}, {"outputs", json::array()}}) == 0.0);
  CHECK(score(options, kDouble, {{"inputs", {"1", "2"}}, {"outputs", {"2"}}}) == 0.0);  // count mismatch
  CHECK(sandbox().count("/run_code") == before);
}

TEST_CASE("sandbox_fusion: continuous scores the first 10 test cases, as default_compute_score does") {
  json cases = {{"inputs", json::array()}, {"outputs", json::array()}};
  for (int i = 0; i < 12; ++i) {
    cases["inputs"].push_back(std::to_string(i));
    cases["outputs"].push_back(std::to_string(i < 10 ? 2 * i : -1));
  }
  SandboxFusionOptions options = options_for("/run_code");
  const int before = sandbox().count("/run_code");
  CHECK(score(options, kDouble, cases) == 1.0);
  CHECK(sandbox().count("/run_code") == before + 10);
  options.continuous = false;
  CHECK(score(options, kDouble, cases) == Approx(10.0 / 12.0));
}

TEST_CASE("sandbox_fusion: assert_case and fn_name test cases run verl's code") {
  const SandboxFusionOptions options = options_for("/run_code");
  const std::string add = "```python\ndef add(a, b):\n    return a + b\n```";
  CHECK(score(options, add, {{"assert_case", {"assert add(1, 2) == 3", "assert add(2, 2) == 5"}}}) == 0.5);
  CHECK(score(options, add, {{"inputs", {"1\n2", "[1]\n[2]"}}, {"outputs", {"3", "[1, 2]"}}, {"fn_name", "add"}}) ==
        1.0);
  const std::string solution = "```python\nclass Solution:\n    def twice(self, x):\n        return [x, x]\n```";
  CHECK(score(options, solution, {{"inputs", {"7"}}, {"outputs", {"[7, 7]"}}, {"fn_name", "twice"}}) == 1.0);
  CHECK(score(options, solution, {{"inputs", {"7"}}, {"outputs", {"[7, 7]"}}, {"fn_name", "missing"}}) == 0.0);
}

TEST_CASE("sandbox_fusion sends verl's request") {
  SandboxFusionOptions options = options_for("/run_code");
  options.memory_limit_mb = 77;
  options.timeout_s = 3;
  CHECK(score(options, kEcho, {{"inputs", {"hi"}}, {"outputs", {"hi"}}}) == 1.0);
  const json request = sandbox().calls()["last_request"];
  CHECK(request["code"] == "\nprint(input())\n\n\n");
  CHECK(request["stdin"] == "hi");
  CHECK(request["memory_limit_MB"] == 77);
  CHECK(request["compile_timeout"] == 3);
  CHECK(request["run_timeout"] == 3);
  CHECK(request["language"] == "python");
  CHECK(request["files"] == json::object());
  CHECK(request["fetch_files"] == json::array());
  // assert_case alone: inputs "" and outputs None.
  CHECK(score(options, "```python\nprint('ok')\n```", {{"assert_case", {"assert 1"}}}) == 1.0);
  CHECK(sandbox().calls()["last_request"]["code"] == "\nprint('ok')\n\n\nassert 1");
  CHECK(sandbox().calls()["last_request"]["stdin"] == "");
}

TEST_CASE("sandbox_fusion runs a batch's test cases at most max_concurrent at a time") {
  const std::string slow = "```python\nimport time\ntime.sleep(0.5)\nprint(input())\n```";
  json cases = {{"inputs", {"a", "b", "c", "d"}}, {"outputs", {"a", "b", "c", "d"}}};
  SandboxFusionOptions options = options_for("/run_code");
  options.max_concurrent = 2;
  const SandboxFusionGrader grader(options);
  const std::string truth = cases.dump();
  const json extra = json::object();
  std::vector<GradeRequest> requests;
  for (int i = 0; i < 3; ++i) requests.push_back({slow, truth, "apps", &extra});
  requests.push_back({"no code", truth, "apps", &extra});
  sandbox().calls();  // resets the server's high-water mark
  const auto results = grader.grade_batch(requests);
  REQUIRE(results.size() == 4);
  CHECK(results[0].score == 1.0);
  CHECK(results[2].score == 1.0);
  CHECK(results[3].score == 0.0);
  const int limited = sandbox().calls()["max_in_flight"];
  CHECK(limited <= 2);
  options.max_concurrent = 8;
  sandbox().calls();
  CHECK(SandboxFusionGrader(options).grade_batch(requests)[1].score == 1.0);
  CHECK(sandbox().calls()["max_in_flight"].get<int>() > 2);
}

TEST_CASE("sandbox_fusion: a sandbox that cannot be asked is an error naming the URL") {
  const json one = {{"inputs", {"1"}}, {"outputs", {"2"}}};
  SECTION("down") {
    SandboxFusionOptions options;
    options.url = "http://127.0.0.1:9/run_code";
    const std::string error = error_of_grading(options, kDouble, one);
    CHECK_THAT(error, Catch::Contains("http://127.0.0.1:9/run_code") && Catch::Contains("cannot connect") &&
                          Catch::Contains("api_errors"));
    options.api_errors = SandboxApiErrors::kFailCase;  // verl: the case fails, the score is 0
    CHECK(score(options, kDouble, one) == 0.0);
  }
  SECTION("a body that is not JSON, or not an object") {
    for (const char* path : {"/garbage", "/list", "/nested", "/huge"}) {
      INFO(path);
      const SandboxFusionOptions options = options_for(path);
      const std::string error = error_of_grading(options, kDouble, one);
      CHECK_THAT(error, Catch::Contains(options.url));
      CHECK(error.size() < 2000);
    }
    CHECK_THAT(error_of_grading(options_for("/garbage"), kDouble, one),
               Catch::Contains("not JSON") && Catch::Contains("<html>definitely not json"));
    CHECK_THAT(error_of_grading(options_for("/list"), kDouble, one), Catch::Contains("not an object"));
    SandboxFusionOptions lenient = options_for("/garbage");
    lenient.api_errors = SandboxApiErrors::kFailCase;
    CHECK(score(lenient, kDouble, one) == 0.0);
  }
  SECTION("an HTTP error; a 504 is retried twice, as verl does") {
    CHECK_THAT(error_of_grading(options_for("/status/500"), kDouble, one),
               Catch::Contains("HTTP 500") && Catch::Contains("sandbox says no") && Catch::Contains("/status/500"));
    const int before = sandbox().count("/status/504");
    CHECK_THAT(error_of_grading(options_for("/status/504"), kDouble, one),
               Catch::Contains("HTTP 504") && Catch::Contains("after 3 attempts"));
    CHECK(sandbox().count("/status/504") == before + 3);
    const int before_500 = sandbox().count("/status/500");
    error_of_grading(options_for("/status/500"), kDouble, one);
    CHECK(sandbox().count("/status/500") == before_500 + 1);
  }
  SECTION("no reply in time: an error, never a hang") {
    SandboxFusionOptions options = options_for("/slow");
    options.timeout_s = 0.25;
    options.api_timeout_s = 0.5;
    const auto start = std::chrono::steady_clock::now();
    CHECK_THAT(error_of_grading(options, kDouble, one), Catch::Contains("/slow") && Catch::Contains("1.0"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  }
  SECTION("the sandbox's own error fails the case without stopping the batch") {
    CHECK(score(options_for("/sandbox_error"), kDouble, one) == 0.0);
  }
}

TEST_CASE("sandbox_fusion needs a valid url") {
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>(
                 [] { SandboxFusionGrader(SandboxFusionOptions()).grade(kDouble, "{}", "", json::object()); }),
             Catch::Contains("reward.graders.sandbox_fusion.url"));
  SandboxFusionOptions bad;
  bad.url = "localhost:8080/run_code";
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([&] { SandboxFusionGrader grader(bad); }),
             Catch::Contains("localhost:8080"));
}

TEST_CASE("sandbox_fusion extracts code as verl's compute_score does") {
  CHECK(extract_code("```python\na = 1\n```") == std::optional<std::string>("\na = 1\n"));
  CHECK(extract_code("```python\nfirst\n``` ```python\nsecond\n```") == std::optional<std::string>("\nsecond\n"));
  CHECK(extract_code("```cpp\nint main() {}\n```") == std::optional<std::string>("int main() {}\n"));
  CHECK(extract_code("```\nx = 1\n```") == std::optional<std::string>("\nx = 1\n"));  // "" is no language
  CHECK(extract_code("``` c++\nx\n```") == std::optional<std::string>(" c++\nx\n"));  // not alphabetic: kept
  CHECK(extract_code("```x = 1") == std::optional<std::string>("x = 1"));
  CHECK(extract_code("``````") == std::optional<std::string>(""));
  CHECK_FALSE(extract_code("print(1)").has_value());
}

TEST_CASE("sandbox_fusion classifies replies with verl's result codes") {
  const ordered_json expected = "42";
  const auto run = [](const char* status, json return_code, json stdout_text = "42\n") {
    return json{{"status", status}, {"return_code", return_code}, {"stdout", stdout_text}};
  };
  CHECK(classify_sandbox_reply({{"status", "Success"}, {"run_result", run("Finished", 0)}}, expected) ==
        CaseResult::kPassed);
  CHECK(classify_sandbox_reply({{"status", "Success"}, {"run_result", run("Finished", 0, "41")}}, expected) ==
        CaseResult::kWrongAnswer);
  CHECK(classify_sandbox_reply({{"status", "Success"}, {"run_result", run("Finished", 0, 42)}}, expected) ==
        CaseResult::kPassed);
  CHECK(classify_sandbox_reply({{"status", "Success"}, {"run_result", run("Error", 0)}}, expected) ==
        CaseResult::kApiError);
  CHECK(classify_sandbox_reply({{"status", "Failed"}, {"run_result", run("TimeLimitExceeded", nullptr)}}, expected) ==
        CaseResult::kTimeLimit);
  CHECK(classify_sandbox_reply({{"status", "Failed"}, {"run_result", run("Finished", 1)}}, expected) ==
        CaseResult::kRuntimeError);
  CHECK(classify_sandbox_reply({{"status", "Failed"}, {"run_result", run("Finished", 0)}}, expected) ==
        CaseResult::kApiError);
  CHECK(classify_sandbox_reply({{"status", "Failed"}, {"compile_result", {{"status", "Error"}}}}, expected) ==
        CaseResult::kCompileError);
  CHECK(classify_sandbox_reply(
            {{"status", "Failed"}, {"compile_result", {{"status", "Finished"}}}, {"run_result", run("Finished", 1)}},
            expected) == CaseResult::kCompileError);  // no return_code: None != 0
  CHECK(classify_sandbox_reply({{"status", "Failed"},
                                {"compile_result", {{"status", "Finished"}, {"return_code", 0}}},
                                {"run_result", run("Finished", 1)}},
                               expected) == CaseResult::kRuntimeError);
  CHECK(classify_sandbox_reply({{"status", "Success"}, {"compile_result", "oops"}, {"run_result", run("Finished", 0)}},
                               expected) == CaseResult::kApiError);
  CHECK(classify_sandbox_reply({{"status", "SandboxError"}}, expected) == CaseResult::kApiError);
  CHECK(classify_sandbox_reply({{"status", 7}}, expected) == CaseResult::kApiError);
  CHECK(classify_sandbox_reply(json::object(), expected) == CaseResult::kApiError);
}
