// infer-native's log-probs beyond the sampled token's (ReportsLogprobs) are
// transformers' log-softmax on the same checkpoint: a prompt's scores, ranks
// and most likely tokens, and the most likely tokens recorded as each token
// is sampled (greedy, and at a temperature, whose distribution they come from).
#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

#include "native_engine.h"
#include "rlcore/capabilities.h"

#include <catch2/catch.hpp>

#include "hf_testing.h"

namespace fs = std::filesystem;

namespace {

constexpr int64_t kTop = 5;
constexpr double kTolerance = 1e-4;  // the engine's KV-cache decode against a full forward, fp32

rlcore::infer_native::NativeEngine make_engine(const fs::path& dir) {
  rlcore::ComponentContext context;
  context.model_path = dir.string();
  return rlcore::infer_native::NativeEngine(rlcore::infer_native::NativeEngineOptions{}, context);
}

// The top entries hold the k most likely tokens of `expected` (a log-prob row), in order.
void check_top(const rlcore::TopLogprobs& top, const at::Tensor& expected) {
  REQUIRE(top.token_ids.size() == static_cast<size_t>(kTop));
  REQUIRE(top.logprobs.size() == static_cast<size_t>(kTop));
  const at::Tensor best = std::get<0>(expected.topk(kTop));
  for (int64_t i = 0; i < kTop; ++i) {
    INFO("entry " << i);
    // Compared by value, so a near tie may order two ids either way.
    CHECK(top.logprobs[i] == Approx(best[i].item<double>()).margin(kTolerance));
    CHECK(top.logprobs[i] == Approx(expected[top.token_ids[i]].item<double>()).margin(kTolerance));
  }
}

// Runs request `id` to its end, one step at a time.
rlcore::RequestOutput run_to_end(rlcore::infer_native::NativeEngine& engine, const std::string& id) {
  for (int step = 0; step < 100; ++step) {
    for (rlcore::RequestOutput& out : engine.step().finished) {
      if (out.id == id) return out;
    }
  }
  FAIL("request " << id << " did not finish");
  return {};
}

const std::vector<int64_t> kPrompt = {5, 17, 33, 8, 61, 12, 90, 44};

// A tiny qwen3 made by transformers, and its logits over kPrompt (made once: each section runs the case again).
const hf_testing::Reference& reference_model(const fs::path& dir) {
  static const hf_testing::Reference reference = hf_testing::make_reference_model(
      "qwen3", {{"head_dim", 32}}, {{kPrompt}, {std::vector<int64_t>(kPrompt.size(), 1)}}, 1, dir);
  return reference;
}

}  // namespace

TEST_CASE("infer-native's prompt and top log-probs are transformers' log-softmax", "[hf][logprobs]") {
  static const fs::path dir = hf_testing::scratch_dir("engine_logprobs");
  const hf_testing::Reference& reference = reference_model(dir);
  const std::vector<int64_t>& prompt = kPrompt;
  rlcore::infer_native::NativeEngine engine = make_engine(dir);
  const std::vector<int32_t> prompt32(prompt.begin(), prompt.end());

  SECTION("a prompt's tokens: log-prob, rank and the most likely tokens at each position") {
    const std::vector<rlcore::PositionLogprobs> scores = engine.score_tokens(prompt32, kTop);
    REQUIRE(scores.size() == prompt.size() - 1);
    const at::Tensor expected = at::log_softmax(reference.logits[0].to(at::kFloat), -1);
    for (size_t p = 0; p + 1 < prompt.size(); ++p) {
      INFO("position " << p + 1);
      const at::Tensor row = expected[static_cast<int64_t>(p)];
      const double logprob = row[prompt[p + 1]].item<double>();
      CHECK(scores[p].logprob == Approx(logprob).margin(kTolerance));
      CHECK(scores[p].rank == (row > logprob).sum().item<int64_t>() + 1);
      check_top(scores[p].top, row);
    }
    CHECK(engine.score_tokens({prompt32.front()}, kTop).empty());  // one token: nothing to score
    CHECK_THROWS_AS(engine.score_tokens({}, kTop), rlcore::ValueError);
    CHECK_THROWS_AS(engine.score_tokens({5, 96}, kTop), rlcore::ValueError);  // outside the vocabulary of 96
    CHECK_THROWS_AS(engine.score_tokens(prompt32, 97), rlcore::ValueError);
  }

  SECTION("sampled tokens: the most likely tokens of the distribution each was drawn from") {
    constexpr int64_t kNew = 6;
    struct Case {
      std::string id;
      double temperature;
    };
    const std::vector<Case> cases = {{"greedy", 0.0}, {"warm", 0.8}};
    std::vector<rlcore::RequestOutput> outputs;
    std::vector<std::vector<rlcore::TopLogprobs>> tops;
    for (const Case& c : cases) {
      rlcore::GenerationRequest request;
      request.id = c.id;
      request.prompt_ids = prompt32;
      request.sampling.max_tokens = kNew;
      request.sampling.temperature = c.temperature;
      request.sampling.seed = 3;
      engine.submit_with_top_logprobs(request, kTop);
      outputs.push_back(run_to_end(engine, c.id));
      tops.push_back(engine.take_top_logprobs(c.id));
      CHECK(engine.take_top_logprobs(c.id).empty());  // taken once
    }
    // transformers' logits over each prompt + response.
    hf_testing::Inputs sequences;
    for (const rlcore::RequestOutput& out : outputs) {
      REQUIRE(out.generated.size() == static_cast<size_t>(kNew));
      std::vector<int64_t> row = prompt;
      row.insert(row.end(), out.generated.token_ids.begin(), out.generated.token_ids.end());
      sequences.ids.push_back(row);
      sequences.mask.push_back(std::vector<int64_t>(row.size(), 1));
    }
    const at::Tensor logits = hf_testing::transformers_logits(dir, sequences).to(at::kFloat);
    for (size_t c = 0; c < cases.size(); ++c) {
      INFO(cases[c].id);
      REQUIRE(tops[c].size() == static_cast<size_t>(kNew));
      const double temperature = cases[c].temperature == 0.0 ? 1.0 : cases[c].temperature;
      for (int64_t t = 0; t < kNew; ++t) {
        INFO("token " << t);
        const int64_t position = static_cast<int64_t>(prompt.size()) - 1 + t;
        const at::Tensor row = at::log_softmax(logits[static_cast<int64_t>(c)][position] / temperature, -1);
        check_top(tops[c][static_cast<size_t>(t)], row);
        const int32_t token = outputs[c].generated.token_ids[static_cast<size_t>(t)];
        CHECK(outputs[c].generated.logprobs[static_cast<size_t>(t)] ==
              Approx(row[token].item<double>()).margin(kTolerance));
        if (cases[c].temperature == 0.0) CHECK(token == tops[c][static_cast<size_t>(t)].token_ids[0]);
      }
    }
  }

  SECTION("an aborted request keeps what it recorded until taken; an unknown id has nothing") {
    rlcore::GenerationRequest request;
    request.id = "left";
    request.prompt_ids = prompt32;
    request.sampling.max_tokens = 20;
    request.sampling.temperature = 0.0;
    engine.submit_with_top_logprobs(request, 2);
    engine.step();
    engine.step();
    const auto aborted = engine.abort("left");
    REQUIRE(aborted);
    const std::vector<rlcore::TopLogprobs> top = engine.take_top_logprobs("left");
    CHECK(top.size() == aborted->generated.size());
    for (const auto& entry : top) CHECK(entry.token_ids.size() == 2);
    CHECK(engine.take_top_logprobs("never-submitted").empty());
    request.id = "zero";
    CHECK_THROWS_AS(engine.submit_with_top_logprobs(request, 0), rlcore::ValueError);
  }
}
