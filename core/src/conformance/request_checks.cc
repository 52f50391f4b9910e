// GeneratesRequests checks (SDK 5.1), for inference engines that declare the
// capability: requests joining a busy batch give generate()'s results, abort
// returns a prefix, and a seeded request samples the same alone and in company.
#include <algorithm>
#include <map>
#include <string>

#include "conformance/conformance.h"
#include "rlcore/capabilities.h"
#include "rlcore/error.h"

namespace rlcore::conformance {
namespace {

// Steps are rounding only apart from generate()'s (the same tolerance as the batch checks).
constexpr double kRequestLogprobTolerance = 2e-5;
constexpr int64_t kRequestMaxTokens = 8;
constexpr int64_t kStepLimit = 10000;  // far beyond what the test requests need: a hang guard

struct Candidate {
  std::shared_ptr<InferenceEngine> engine;
  GeneratesRequests* requests = nullptr;
};

Candidate make_candidate(CheckEnv& env) {
  Candidate c;
  c.engine = make_inference_engine(env.candidate, env.candidate_options, env.tiny_model);
  c.requests = capability<GeneratesRequests>(*c.engine);
  return c;
}

GenerationRequest request(const std::string& id, const std::vector<int32_t>& prompt, const SamplingParams& sampling) {
  GenerationRequest r;
  r.id = id;
  r.prompt_ids = prompt;
  r.sampling = sampling;
  return r;
}

SamplingParams seeded(int64_t seed) {
  SamplingParams sampling;
  sampling.temperature = 1.0;
  sampling.max_tokens = kRequestMaxTokens;
  sampling.seed = seed;
  return sampling;
}

// Submits `requests`, `per_step` before each step, and steps until every one has finished.
std::map<std::string, RequestOutput> run_requests(GeneratesRequests& engine,
                                                  const std::vector<GenerationRequest>& requests, size_t per_step) {
  std::map<std::string, RequestOutput> done;
  size_t next = 0;
  for (int64_t step = 0; step < kStepLimit && done.size() < requests.size(); ++step) {
    for (size_t k = 0; k < per_step && next < requests.size(); ++k) engine.submit(requests[next++]);
    for (RequestOutput& out : engine.step().finished) done.emplace(out.id, std::move(out));
  }
  if (done.size() < requests.size()) {
    throw Error(std::to_string(requests.size() - done.size()) + " request(s) unfinished after " +
                std::to_string(kStepLimit) + " steps");
  }
  return done;
}

Outcome no_capability() {
  return Outcome::not_applicable(std::string("the engine does not declare '") + GeneratesRequests::kName + "'");
}

// Greedy and seeded requests, one joining per step, against generate() on each prompt alone.
Outcome check_requests_vs_batch(CheckEnv& env) {
  Candidate c = make_candidate(env);
  if (!c.requests) return no_capability();
  double worst = 0;
  std::string worst_what = "log-prob";
  for (const SamplingParams& sampling : {greedy(kRequestMaxTokens), seeded(11)}) {
    std::vector<GenerationRequest> requests;
    for (size_t i = 0; i < test_prompts().size(); ++i) {
      requests.push_back(request("p" + std::to_string(i), test_prompts()[i], sampling));
    }
    const auto done = run_requests(*c.requests, requests, 1);
    for (const GenerationRequest& r : requests) {
      const GenerationOutput alone = c.engine->generate({r.prompt_ids}, r.sampling);
      const RequestOutput& got = done.at(r.id);
      const std::string which = "request " + r.id + " at temperature " + std::to_string(sampling.temperature);
      if (got.generated.token_ids != alone.token_ids.at(0)) {
        return Outcome::fail(which + " gave " + show_tokens(got.generated.token_ids) + ", generate() on its prompt " +
                             show_tokens(alone.token_ids.at(0)));
      }
      if (got.generated.logprobs.size() != got.generated.size() ||
          got.generated.weight_versions.size() != got.generated.size()) {
        return Outcome::fail(which + ": " + std::to_string(got.generated.size()) + " tokens but " +
                             std::to_string(got.generated.logprobs.size()) + " log-probs and " +
                             std::to_string(got.generated.weight_versions.size()) + " weight versions");
      }
      for (size_t t = 0; t < got.generated.size(); ++t) {
        const double diff = std::abs(static_cast<double>(got.generated.logprobs[t]) - alone.logprobs[0][t]);
        if (!(diff <= worst)) {
          worst = diff;
          worst_what = "log-prob of " + which + " token " + std::to_string(t);
        }
      }
    }
  }
  return Outcome::measured(worst, kRequestLogprobTolerance, worst_what + " vs generate()");
}

// An abort returns the tokens generated so far (a prefix of the whole
// response) with finish reason abort; aborting an unknown or finished id is a no-op.
Outcome check_requests_abort(CheckEnv& env) {
  Candidate c = make_candidate(env);
  if (!c.requests) return no_capability();
  const std::vector<int32_t>& prompt = test_prompts()[1];
  const GenerationOutput whole = c.engine->generate({prompt}, greedy(kRequestMaxTokens));
  c.requests->submit(request("aborted", prompt, greedy(kRequestMaxTokens)));
  c.requests->submit(request("kept", test_prompts()[0], greedy(kRequestMaxTokens)));
  for (int i = 0; i < 3; ++i) c.requests->step();
  const std::optional<RequestOutput> partial = c.requests->abort("aborted");
  if (!partial) return Outcome::fail("abort() of a running request returned nothing");
  if (partial->finish_reason != FinishReason::kAbort) {
    return Outcome::fail(std::string("abort() returned finish reason '") + finish_reason_name(partial->finish_reason) +
                         "', expected 'abort'");
  }
  const auto& got = partial->generated.token_ids;
  const auto& want = whole.token_ids.at(0);
  if (got.size() > want.size() || !std::equal(got.begin(), got.end(), want.begin())) {
    return Outcome::fail("abort() returned " + show_tokens(got) + ", not a prefix of the whole response " +
                         show_tokens(want));
  }
  if (c.requests->abort("aborted")) return Outcome::fail("a second abort() of the same id returned a response");
  if (c.requests->abort("never-submitted")) return Outcome::fail("abort() of an unknown id returned a response");
  for (int64_t step = 0; step < kStepLimit; ++step) {
    const GenerationLoad load = c.requests->load();
    if (load.running + load.waiting == 0) break;
    c.requests->step();
  }
  const GenerationLoad load = c.requests->load();
  if (load.running + load.waiting != 0) return Outcome::fail("the other request did not finish after the abort");
  return Outcome::pass(std::to_string(got.size()) + " of " + std::to_string(want.size()) + " tokens before the abort");
}

// A seeded request samples the same tokens twice alone and once among others.
Outcome check_requests_seed_reproducible(CheckEnv& env) {
  Candidate c = make_candidate(env);
  if (!c.requests) return no_capability();
  const GenerationRequest probe = request("probe", test_prompts()[2], seeded(29));
  const auto first = run_requests(*c.requests, {probe}, 1).at("probe").generated.token_ids;
  const auto second = run_requests(*c.requests, {probe}, 1).at("probe").generated.token_ids;
  if (first != second)
    return Outcome::fail("the same seeded request gave " + show_tokens(first) + " then " + show_tokens(second));
  std::vector<GenerationRequest> busy;
  for (int i = 0; i < 6; ++i) busy.push_back(request("other" + std::to_string(i), test_prompts()[i % 3], seeded(i)));
  busy.insert(busy.begin() + 3, probe);
  const auto crowded = run_requests(*c.requests, busy, 2).at("probe").generated.token_ids;
  if (crowded != first) {
    return Outcome::fail("the seeded request gave " + show_tokens(first) + " alone, " + show_tokens(crowded) +
                         " among others");
  }
  return Outcome::pass();
}

}  // namespace

std::vector<Check> request_checks() {
  return {
      {"requests_vs_batch", check_requests_vs_batch},
      {"requests_abort", check_requests_abort},
      {"requests_seed_reproducible", check_requests_seed_reproducible},
  };
}

}  // namespace rlcore::conformance
