// RequestDriver over a scripted GeneratesRequests engine: concurrent calls
// share steps, results come back prompt-major, abort_all ends what is in
// flight, and a refused submit or a failing step reaches only its callers.
#include "serve_testing.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <thread>

#include "rlcore/error.h"
#include "serve/request_driver.h"

using rlcore::FinishReason;
using rlcore::GenerationRequest;
using rlcore::RequestOutput;
using rlcore::SamplingParams;
using rlcore::serve::RequestDriver;

namespace {

SamplingParams tokens(int64_t max_tokens, int64_t n = 1) {
  SamplingParams sampling;
  sampling.max_tokens = max_tokens;
  sampling.n = n;
  return sampling;
}

}  // namespace

TEST_CASE("concurrent calls share the engine's steps and get their own answers", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine(/*hold_until_running=*/4);
  RequestDriver driver(engine);
  std::vector<std::future<rlcore::GenerationOutput>> calls;
  for (int32_t c = 0; c < 4; ++c) {
    calls.push_back(
        std::async(std::launch::async, [&driver, c] { return driver.generate({{100 * (c + 1)}}, tokens(3 + c)); }));
  }
  for (int32_t c = 0; c < 4; ++c) {
    const rlcore::GenerationOutput out = calls[c].get();
    REQUIRE(out.token_ids.size() == 1);
    std::vector<int32_t> expected;
    for (int32_t t = 0; t < 3 + c; ++t) expected.push_back(100 * (c + 1) + t);
    CHECK(out.token_ids[0] == expected);
    CHECK(out.logprobs[0] == std::vector<float>(expected.size(), -0.5f));
    CHECK(out.finish_reasons[0] == FinishReason::kLength);
    CHECK(out.weight_version == 3);
  }
  CHECK(engine.most_running() == 4);  // all four in one batch
}

TEST_CASE("n samples of several prompts come back prompt-major", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  const rlcore::GenerationOutput out = driver.generate({{10}, {20}}, tokens(2, 3));
  REQUIRE(out.token_ids.size() == 6);
  for (size_t k = 0; k < 6; ++k) CHECK(out.token_ids[k] == std::vector<int32_t>{k < 3 ? 10 : 20, k < 3 ? 11 : 21});
}

TEST_CASE("abort_all ends the calls in flight with finish reason abort", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  auto call = std::async(std::launch::async, [&] { return driver.generate({{1}, {2}}, tokens(1000000)); });
  for (int wait = 0; wait < 30000 && engine.load().running < 2; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(engine.load().running == 2);
  driver.abort_all();
  const rlcore::GenerationOutput out = call.get();
  REQUIRE(out.finish_reasons.size() == 2);
  CHECK(out.finish_reasons[0] == FinishReason::kAbort);
  CHECK(out.finish_reasons[1] == FinishReason::kAbort);
  CHECK(out.token_ids[0].size() < 1000000);
}

TEST_CASE("a refused submit fails its call alone and leaves nothing running", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  CHECK_THROWS_AS(driver.generate({{1}, {}}, tokens(2)), rlcore::ValueError);
  CHECK_THROWS_AS(driver.generate({{1}, {999}}, tokens(2)), rlcore::OverloadedError);
  CHECK(engine.load().running == 0);
  CHECK(driver.generate({{7}}, tokens(2)).token_ids[0] == std::vector<int32_t>{7, 8});
}

TEST_CASE("a failing step fails the calls in flight with its message", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  engine.fail_steps();
  RequestDriver driver(engine);
  CHECK_THAT(rlcore_test::error_of<rlcore::Error>([&] { driver.generate({{1}}, tokens(2)); }),
             Catch::Contains("device lost"));
}

TEST_CASE("every sample of a seeded call gets a seed of its own, reproducibly", "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  SamplingParams seeded = tokens(1, 3);
  seeded.seed = 5;
  driver.generate({{1}, {2}}, seeded);
  driver.generate({{1}, {2}}, seeded);
  seeded.seed = 6;  // a client's next call: no stream of the first may come back
  driver.generate({{1}, {2}}, seeded);
  const std::vector<int64_t> seeds = engine.seeds();
  REQUIRE(seeds.size() == 18);
  const std::vector<int64_t> first(seeds.begin(), seeds.begin() + 6);
  CHECK(std::vector<int64_t>(seeds.begin() + 6, seeds.begin() + 12) == first);
  std::set<int64_t> distinct(first.begin(), first.end());
  CHECK(distinct.size() == 6);  // no two samples, of one prompt or of two, share a stream
  for (size_t k = 12; k < 18; ++k) {
    CHECK(seeds[k] >= 0);
    CHECK(distinct.count(seeds[k]) == 0);
  }
}

TEST_CASE("streamed tokens reach the caller as they come; a caller that stops listening aborts its requests",
          "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  std::vector<std::pair<size_t, int32_t>> seen;
  const rlcore::GenerationOutput out = driver.generate({{10}, {20}}, tokens(3), [&](const RequestDriver::Token& token) {
    seen.emplace_back(token.sample, token.id);
    CHECK(token.finish.has_value() == (token.id % 10 == 2));  // the third token is each sample's last
    return true;
  });
  std::vector<int32_t> first, second;
  for (const auto& [sample, id] : seen) (sample == 0 ? first : second).push_back(id);
  CHECK(first == std::vector<int32_t>{10, 11, 12});
  CHECK(second == std::vector<int32_t>{20, 21, 22});
  CHECK(out.token_ids[1] == second);

  // A client that disconnects after three tokens: its endless requests stop.
  size_t heard = 0;
  const rlcore::GenerationOutput cut =
      driver.generate({{1}, {2}}, tokens(1000000), [&](const RequestDriver::Token&) { return ++heard < 3; });
  CHECK(heard == 3);
  REQUIRE(cut.finish_reasons.size() == 2);
  CHECK(cut.finish_reasons[0] == FinishReason::kAbort);
  CHECK(cut.finish_reasons[1] == FinishReason::kAbort);
  CHECK(cut.token_ids[0].size() < 1000000);
  CHECK(engine.load().running == 0);
}

TEST_CASE("engine tasks run on the stepping thread, one at a time with the steps; what they throw comes back",
          "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  CHECK(driver.generate({{7}}, tokens(2)).token_ids[0] == std::vector<int32_t>{7, 8});
  const std::thread::id stepping = engine.step_thread();
  REQUIRE(stepping != std::thread::id());
  CHECK(stepping != std::this_thread::get_id());

  std::thread::id ran_on;
  driver.run_on_stepping_thread([&] { ran_on = std::this_thread::get_id(); });
  CHECK(ran_on == stepping);

  CHECK_THAT(rlcore_test::error_of<rlcore::ValueError>(
                 [&] { driver.run_on_stepping_thread([] { throw rlcore::ValueError("no weights in /nowhere"); }); }),
             Catch::Contains("no weights in /nowhere"));
  // The driver still steps afterwards.
  CHECK(driver.generate({{20}}, tokens(3)).token_ids[0] == std::vector<int32_t>{20, 21, 22});
}

TEST_CASE("frozen, the driver takes no step but still runs tasks; thawed, the requests finish where they were",
          "[serve][driver]") {
  for (bool recompute : {false, true}) {
    INFO("recompute_cache " << recompute);
    rlcore_test::ScriptedRequests engine;
    engine.block_at_step(3);  // the request has 3 tokens when the step after them is frozen out
    RequestDriver driver(engine);
    auto call = std::async(std::launch::async, [&] { return driver.generate({{40}}, tokens(6)); });
    REQUIRE(engine.wait_blocked());
    auto freezing = std::async(std::launch::async, [&] { driver.freeze(); });
    CHECK(freezing.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);  // the step in progress
    engine.release_step();
    freezing.get();
    CHECK(driver.frozen());
    const size_t steps = engine.token_steps();
    bool ran = false;
    driver.run_on_stepping_thread([&] { ran = true; });  // a reload would run here
    CHECK(ran);
    CHECK(call.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
    CHECK(engine.token_steps() == steps);  // no step while frozen

    driver.thaw(recompute);
    const rlcore::GenerationOutput out = call.get();
    CHECK(out.token_ids[0] == std::vector<int32_t>{40, 41, 42, 43, 44, 45});
    CHECK(out.finish_reasons[0] == FinishReason::kLength);
    CHECK_FALSE(driver.frozen());
    // Recomputing restarts the request from its 3 tokens (an abort, then a resubmission resuming them).
    CHECK(engine.resumed_sizes() == (recompute ? std::vector<size_t>{0, 3} : std::vector<size_t>{0}));
  }
}

TEST_CASE("start() returns at once; tokens, then the answer, reach the listener with no thread waiting",
          "[serve][driver]") {
  rlcore_test::ScriptedRequests engine;
  RequestDriver driver(engine);
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int32_t> tokens_heard;
  std::optional<rlcore::GenerationOutput> answer;
  bool errored = false;
  RequestDriver::Listener listener;
  listener.on_token = [&](const RequestDriver::Token& token) {
    std::lock_guard<std::mutex> lock(mutex);
    tokens_heard.push_back(token.id);
  };
  listener.on_done = [&](RequestDriver::CallOutput output) {
    std::lock_guard<std::mutex> lock(mutex);
    CHECK(tokens_heard.size() == 4);  // every token before the answer
    answer = std::move(output.generation);
    changed.notify_all();
  };
  listener.on_error = [&](const std::string&) { errored = true; };
  driver.start({{30}}, tokens(4), listener, "cmpl-a");
  {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return answer.has_value(); }));
  }
  CHECK(tokens_heard == std::vector<int32_t>{30, 31, 32, 33});
  CHECK(answer->token_ids[0] == tokens_heard);
  CHECK_FALSE(errored);

  // A refused submit throws from start() and calls nothing.
  bool called = false;
  RequestDriver::Listener refused;
  refused.on_done = [&](RequestDriver::CallOutput) { called = true; };
  refused.on_error = [&](const std::string&) { called = true; };
  CHECK_THROWS_AS(driver.start({{999}}, tokens(2), refused, "cmpl-b"), rlcore::OverloadedError);
  CHECK_FALSE(called);

  // abort_tag() ends a started call: its answer arrives with finish reason abort.
  std::promise<rlcore::GenerationOutput> aborted;
  RequestDriver::Listener endless;
  endless.on_done = [&](RequestDriver::CallOutput output) { aborted.set_value(std::move(output.generation)); };
  endless.on_error = [&](const std::string&) {};
  driver.start({{1}}, tokens(100000000), endless, "cmpl-c");
  CHECK(driver.abort_tag("cmpl-c") == 1);
  auto done = aborted.get_future();
  REQUIRE(done.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(done.get().finish_reasons[0] == FinishReason::kAbort);
  CHECK(engine.load().running == 0);
}
