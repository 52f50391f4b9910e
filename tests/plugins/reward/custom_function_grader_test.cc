// The custom_function grader against real Python reward files: results, extras,
// reuse of one process, and each way the user's program can fail.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "../../common/reference_python.h"
#include "custom_function_grader.h"
#include "rlcore/error.h"

namespace {

using rlcore::GradeRequest;
using rlcore::GradeResult;
using rlcore::reward::CustomFunctionGrader;
using rlcore::reward::CustomFunctionOptions;
using rlcore_test::error_of;

std::string fixture(const std::string& name) {
  return rlcore_test::reference_script("plugins/reward/fixtures/" + name);
}

CustomFunctionOptions options(const std::string& function, double timeout_s = 60.0) {
  CustomFunctionOptions result;
  result.path = fixture("custom_reward.py");
  result.name = function;
  result.python = rlcore_test::reference_python();
  result.timeout_s = timeout_s;
  return result;
}

struct Batch {
  std::vector<std::string> responses;
  std::vector<std::string> truths;
  nlohmann::json extra = nlohmann::json::object();

  std::vector<GradeResult> grade(const CustomFunctionGrader& grader) const {
    std::vector<GradeRequest> requests;
    for (size_t i = 0; i < responses.size(); ++i) requests.push_back({responses[i], truths[i], "test/source", &extra});
    return grader.grade_batch(requests);
  }
};

std::vector<GradeResult> grade_a(const CustomFunctionGrader& grader) { return Batch{{"a"}, {"a"}}.grade(grader); }
std::vector<GradeResult> grade_ab(const CustomFunctionGrader& grader) {
  return Batch{{"a", "b"}, {"a", "b"}}.grade(grader);
}
std::vector<GradeResult> sleep_30(const CustomFunctionGrader& grader) { return Batch{{"a"}, {"30"}}.grade(grader); }

bool alive(int pid) { return ::kill(pid, 0) == 0; }

}  // namespace

TEST_CASE("custom_function: float scores, one process reused across batches, gone after the grader") {
  int pid = -1;
  {
    const CustomFunctionGrader grader(options("compute_score"));
    CHECK(grader.process_id() == -1);  // started lazily
    const auto results = Batch{{"42", " 7\n", "x"}, {"42", "7", "y"}}.grade(grader);
    REQUIRE(results.size() == 3);
    CHECK(results[0].score == 1.0);
    CHECK(results[1].score == 1.0);
    CHECK(results[2].score == 0.0);
    CHECK(results[0].extras.empty());
    pid = grader.process_id();
    REQUIRE(pid > 0);
    for (int i = 0; i < 3; ++i) CHECK(grade_a(grader)[0].score == 1.0);
    CHECK(grader.process_id() == pid);
    CHECK(grader.grade("1", "1", "s", nlohmann::json::object()).score == 1.0);  // a batch of one
    CHECK(grader.grade_batch({}).empty());
  }
  CHECK_FALSE(alive(pid));
}

TEST_CASE("custom_function: the function's own pid is the grader's process") {
  const CustomFunctionGrader grader(options("process_id"));
  const double pid = grade_a(grader)[0].score;
  CHECK(pid == grader.process_id());
  CHECK(Batch{{"b"}, {"b"}}.grade(grader)[0].score == pid);
}

TEST_CASE("custom_function: dict results give extras; extra_info and reward_kwargs reach the function") {
  CustomFunctionOptions opts = options("with_extras");
  opts.reward_kwargs = {{"bonus", 0.5}};
  const CustomFunctionGrader grader(opts);
  Batch batch{{"right", "wrong"}, {"right", "right"}};
  batch.extra = {{"weight", 2.0}, {"nested", {{"index", 7}}}};
  const auto results = batch.grade(grader);
  REQUIRE(results.size() == 2);
  CHECK(results[0].score == 2.5);
  CHECK(results[1].score == 0.5);
  CHECK(results[0].extras.at("acc") == 1.0);
  CHECK(results[1].extras.at("acc") == 0.0);
  CHECK(results[0].extras.at("source_len") == 11.0);
  CHECK(results[0].extras.at("nested_index") == 7.0);
  CHECK(results[0].extras.count("pred") == 0);  // strings are not metrics
  CHECK(results[0].extras.count("score") == 0);
}

TEST_CASE("custom_function: prints to stdout, even raw writes to fd 1, do not break the protocol") {
  const CustomFunctionGrader grader(options("prints_to_fd"));
  CHECK(grade_ab(grader)[1].score == 0.5);
  CHECK(grade_a(grader)[0].score == 0.5);
}

TEST_CASE("custom_function: async functions are awaited") {
  const CustomFunctionGrader grader(options("async_score"));
  CHECK(grade_ab(grader)[1].score == 0.25);
}

TEST_CASE("custom_function: an exception is an error with the traceback; the process stays") {
  const CustomFunctionGrader grader(options("raises"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { grade_a(grader); }),
             Catch::Contains("grader custom_function (") && Catch::Contains("custom_reward.py:raises), batch 0") &&
                 Catch::Contains("RuntimeError: boom in the reward function"));
  const int pid = grader.process_id();
  CHECK(pid > 0);
  CHECK_THROWS_WITH(grade_a(grader), Catch::Contains("batch 1"));
  CHECK(grader.process_id() == pid);
}

TEST_CASE("custom_function: sys.exit() is an error with its status and stderr; the next batch restarts") {
  const CustomFunctionGrader grader(options("exits"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { grade_a(grader); }),
             Catch::Contains("custom_reward.py:exits), batch 0") && Catch::Contains("exited with status 3") &&
                 Catch::Contains("about to exit"));
  CHECK(grader.process_id() == -1);
  CHECK_THROWS_WITH(grade_a(grader), Catch::Contains("batch 1") && Catch::Contains("status 3"));
}

TEST_CASE("custom_function: a batch past timeout_s is killed, not waited for") {
  const CustomFunctionGrader grader(options("sleeps", 0.5));
  CHECK(Batch{{"a"}, {"0"}}.grade(grader)[0].score == 1.0);
  const int pid = grader.process_id();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(error_of<rlcore::ValueError>([&] { sleep_30(grader); }),
             Catch::Contains("custom_reward.py:sleeps), batch 1") && Catch::Contains("no reply within 0.5"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK_FALSE(alive(pid));
  CHECK(Batch{{"a"}, {"0"}}.grade(grader)[0].score == 1.0);  // a fresh process
  CHECK(grader.process_id() != pid);
}

TEST_CASE("custom_function: scores that are not finite numbers and dicts without score are refused") {
  CHECK_THAT(error_of<rlcore::ValueError>([&] { grade_ab(CustomFunctionGrader(options("garbage"))); }),
             Catch::Contains("batch 0, sample 0") && Catch::Contains("not a finite number: 'not a number'"));
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(options("not_finite"))), Catch::Contains("not a finite number: nan"));
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(options("no_score"))),
                    Catch::Contains("returned a dict without \"score\""));
}

TEST_CASE("custom_function: a missing function, a failing import or a missing file are clear errors") {
  CHECK_THROWS_WITH(
      grade_a(CustomFunctionGrader(options("no_such_function"))),
      Catch::Contains("exited with status 1") && Catch::Contains("reward function 'no_such_function' not found in"));
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(options("not_callable"))),
                    Catch::Contains("reward function 'not_callable' not found"));
  CustomFunctionOptions broken = options("compute_score");
  broken.path = fixture("broken_import.py");
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(broken)),
                    Catch::Contains("missing dependency of the reward file") && Catch::Contains("importing"));
  broken.path = fixture("no_such_file.py");
  CHECK_THAT(error_of<rlcore::ValueError>([&] { CustomFunctionGrader{broken}; }),
             Catch::Contains("no_such_file.py' is not a readable file"));
  broken.path = fixture("custom_reward.py");
  broken.python = "/nonexistent/python";
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(broken)), Catch::Contains("/nonexistent/python"));
  CHECK_THROWS_WITH(grade_a(CustomFunctionGrader(CustomFunctionOptions{})),
                    Catch::Contains("needs reward.custom_reward_function.path"));
}

TEST_CASE("custom_function: a reply that is not JSON or has the wrong id is a FormatError") {
  CustomFunctionOptions opts = options("compute_score");
  opts.python = fixture("not_json_program.sh");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { grade_a(CustomFunctionGrader(opts)); }),
             Catch::Contains("batch 0: the reply is not a JSON object: 'this is not json'"));
  opts.python = fixture("wrong_id_program.sh");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { grade_a(CustomFunctionGrader(opts)); }),
             Catch::Contains("the reply has id 99, expected 0"));
}

TEST_CASE("custom_function: responses with invalid UTF-8 and large batches go through") {
  const CustomFunctionGrader grader(options("equals"));
  std::vector<std::string> responses(2000, std::string(2000, 'x'));
  responses[0] = "\xff\xfe bad";
  std::vector<std::string> truths(responses.size(), std::string(2000, 'x'));
  const auto results = Batch{responses, truths}.grade(grader);
  REQUIRE(results.size() == responses.size());
  CHECK(results[0].score == 0.0);
  CHECK(results[1999].score == 1.0);
}
