// InferenceEngine checks: greedy tokens against the reference engine (native),
// log-probs against teacher forcing with the SDK's Transformer, the sampling
// parameters, and the weight-swap surface (load_weights, sleep / wake_up, weight_meta).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "conformance/conformance.h"
#include "conformance/tiny_model.h"
#include "rlcore/error.h"
#include "rlcore/inference_engine.h"

namespace rlcore::conformance {
namespace {

namespace fs = std::filesystem;
using Tokens = std::vector<std::vector<int32_t>>;

// Cached decoding vs a full fp32 forward: rounding only.
constexpr double kLogprobTolerance = 2e-5;
constexpr int64_t kMaxTokens = 8;

std::shared_ptr<InferenceEngine> make_inference_candidate(CheckEnv& env, const fs::path& model) {
  return make_inference_engine(env.candidate, env.candidate_options, model);
}

const Tokens& prompts() { return test_prompts(); }

SamplingParams sampled(int64_t seed, int64_t n = 1, double temperature = 1.0) {
  SamplingParams sampling;
  sampling.temperature = temperature;
  sampling.seed = seed;
  sampling.n = n;
  sampling.max_tokens = kMaxTokens;
  return sampling;
}

// "" when every row agrees, else the first row that differs.
std::string compare_tokens(const Tokens& got, const Tokens& want, const std::string& expected_what) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " outputs, " + expected_what + " has " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i])
      return "output " + std::to_string(i) + " is " + show_tokens(got[i]) + ", " + expected_what + " " +
             show_tokens(want[i]);
  }
  return "";
}

// Checks the output's shape against the request: one entry per sample, a
// log-prob per token, at most max_tokens tokens.
std::string check_shape(const GenerationOutput& out, size_t prompt_count, const SamplingParams& sampling) {
  const size_t expected = prompt_count * static_cast<size_t>(sampling.n);
  if (out.token_ids.size() != expected || out.logprobs.size() != expected || out.finish_reasons.size() != expected) {
    return "expected " + std::to_string(expected) + " outputs (prompts x n), got " +
           std::to_string(out.token_ids.size()) + " token lists, " + std::to_string(out.logprobs.size()) +
           " log-prob lists, " + std::to_string(out.finish_reasons.size()) + " finish reasons";
  }
  for (size_t i = 0; i < expected; ++i) {
    if (out.logprobs[i].size() != out.token_ids[i].size()) {
      return "output " + std::to_string(i) + " has " + std::to_string(out.token_ids[i].size()) + " tokens but " +
             std::to_string(out.logprobs[i].size()) + " log-probs";
    }
    if (static_cast<int64_t>(out.token_ids[i].size()) > sampling.max_tokens) {
      return "output " + std::to_string(i) + " has " + std::to_string(out.token_ids[i].size()) +
             " tokens, max_tokens is " + std::to_string(sampling.max_tokens);
    }
  }
  return "";
}

GenerationOutput generate_checked(InferenceEngine& engine, const SamplingParams& sampling) {
  GenerationOutput out = engine.generate(prompts(), sampling);
  const std::string problem = check_shape(out, prompts().size(), sampling);
  if (!problem.empty()) throw ValueError(problem);
  return out;
}

// The largest log-prob difference between two generations of the same prompts, and where.
Worst worst_logprob_difference(const GenerationOutput& got, const GenerationOutput& want) {
  Worst worst;
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    worst.add("log-prob of output " + std::to_string(i),
              max_abs_diff(at::tensor(got.logprobs[i]), at::tensor(want.logprobs[i])));
  }
  return worst;
}

// Weights named as the engine's weight_meta() lists them, from an HF weight list;
// empty when weight_meta() does not use HF names and shapes (with `why` set).
NamedTensorList weights_for(const InferenceEngine& engine, const model::NamedTensors& hf, std::string& why) {
  std::map<std::string, at::Tensor> by_name(hf.begin(), hf.end());
  NamedTensorList out;
  for (const WeightMeta& meta : engine.weight_meta()) {
    auto it = by_name.find(meta.name);
    if (it == by_name.end() || it->second.sizes() != at::IntArrayRef(meta.shape)) {
      why = "weight_meta() entry '" + meta.name +
            "' is not an HF parameter of the same shape; loading HF weights into "
            "this layout needs its WeightAdaptor";
      return {};
    }
    out.emplace_back(meta.name, it->second.to(meta.dtype));
  }
  return out;
}

// Sends `weights` to load_weights() in three buckets, as the hybrid engine does.
void load_in_buckets(InferenceEngine& engine, const NamedTensorList& weights, int64_t version) {
  const size_t bucket = (weights.size() + 2) / 3;
  for (size_t start = 0; start < weights.size(); start += bucket) {
    const size_t end = std::min(weights.size(), start + bucket);
    engine.load_weights(NamedTensorList(weights.begin() + start, weights.begin() + end), version);
  }
}

Outcome check_inference_create(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  if (engine->weight_meta().empty()) return Outcome::fail("weight_meta() is empty");
  return Outcome::pass();
}

Outcome check_greedy_vs_reference(CheckEnv& env) {
  if (!env.reference) {
    return Outcome::skipped("reference inference_engine '" + env.reference_name +
                            "' is not loaded (add its plugin with --plugins)");
  }
  auto candidate = make_inference_candidate(env, env.tiny_model);
  auto reference = make_inference_engine(*env.reference, ConfigNode(), env.tiny_model);
  const std::string problem = compare_tokens(generate_checked(*candidate, greedy()).token_ids,
                                             reference->generate(prompts(), greedy()).token_ids, "the reference's is");
  if (!problem.empty()) return Outcome::fail(problem);
  return Outcome::pass("identical tokens");
}

// Reported log-probs of sampled tokens vs log_softmax(logits / T) of a full forward.
Outcome check_logprobs_teacher_forcing(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  model::Transformer transformer(tiny_model_config());
  transformer.load(tiny_model_weights(1));
  at::NoGradGuard no_grad;
  Worst worst;
  for (double temperature : {1.0, 0.7}) {
    const SamplingParams sampling = sampled(3, 2, temperature);
    const GenerationOutput out = generate_checked(*engine, sampling);
    for (size_t k = 0; k < out.token_ids.size(); ++k) {
      const std::vector<int32_t>& prompt = prompts()[k / static_cast<size_t>(sampling.n)];
      std::vector<int64_t> ids(prompt.begin(), prompt.end());
      ids.insert(ids.end(), out.token_ids[k].begin(), out.token_ids[k].end());
      if (out.token_ids[k].empty()) continue;
      const at::Tensor logits = transformer.forward(at::tensor(ids, at::kLong).unsqueeze(0)).select(0, 0);
      const at::Tensor logp = at::log_softmax(logits.to(at::kFloat) / temperature, -1);
      for (size_t t = 0; t < out.token_ids[k].size(); ++t) {
        const double want = logp[static_cast<int64_t>(prompt.size() + t) - 1][out.token_ids[k][t]].item<double>();
        std::ostringstream what;
        what << "log-prob of output " << k << " token " << t << " at temperature " << temperature;
        worst.add(what.str(), std::abs(static_cast<double>(out.logprobs[k][t]) - want));
      }
    }
  }
  return Outcome::measured(worst.error, kLogprobTolerance, worst.what + " vs teacher forcing");
}

// n samples per prompt, prompt-major; greedy samples of one prompt agree, sampled ones do not all.
Outcome check_sampling_n(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  SamplingParams two_greedy = greedy();
  two_greedy.n = 2;
  const GenerationOutput g = generate_checked(*engine, two_greedy);
  const GenerationOutput single = generate_checked(*engine, greedy());
  for (size_t i = 0; i < prompts().size(); ++i) {
    for (size_t j = 0; j < 2; ++j) {
      if (g.token_ids[i * 2 + j] != single.token_ids[i]) {
        return Outcome::fail("greedy n=2: sample " + std::to_string(j) + " of prompt " + std::to_string(i) + " is " +
                             show_tokens(g.token_ids[i * 2 + j]) + ", n=1 gave " + show_tokens(single.token_ids[i]) +
                             " (outputs must be prompt-major)");
      }
    }
  }
  const GenerationOutput s = generate_checked(*engine, sampled(5, 3));
  for (size_t i = 0; i < prompts().size(); ++i) {
    if (s.token_ids[i * 3] == s.token_ids[i * 3 + 1] && s.token_ids[i * 3] == s.token_ids[i * 3 + 2]) {
      return Outcome::fail("n=3 at temperature 1: the 3 samples of prompt " + std::to_string(i) + " are identical");
    }
  }
  return Outcome::pass();
}

Outcome check_max_tokens(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  for (int64_t max_tokens : {1, 5}) {
    const GenerationOutput out = generate_checked(*engine, greedy(max_tokens));
    for (size_t i = 0; i < out.token_ids.size(); ++i) {
      if (static_cast<int64_t>(out.token_ids[i].size()) != max_tokens ||
          out.finish_reasons[i] != FinishReason::kLength) {
        return Outcome::fail("max_tokens " + std::to_string(max_tokens) + " without stop tokens: output " +
                             std::to_string(i) + " has " + std::to_string(out.token_ids[i].size()) +
                             " tokens, finish reason '" + finish_reason_name(out.finish_reasons[i]) +
                             "' (expected exactly max_tokens, 'length')");
      }
    }
  }
  return Outcome::pass();
}

// A stop token ends a response after its first occurrence (included), with finish reason "stop".
Outcome check_stop_tokens(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  const GenerationOutput free_run = generate_checked(*engine, greedy());
  const int32_t stop = free_run.token_ids[0].at(2);
  SamplingParams sampling = greedy();
  sampling.stop_token_ids = {stop};
  const GenerationOutput out = generate_checked(*engine, sampling);
  for (size_t i = 0; i < out.token_ids.size(); ++i) {
    std::vector<int32_t> want = free_run.token_ids[i];
    auto at = std::find(want.begin(), want.end(), stop);
    const bool stops = at != want.end();
    if (stops) want.erase(at + 1, want.end());
    const FinishReason reason = stops ? FinishReason::kStop : FinishReason::kLength;
    if (out.token_ids[i] != want || out.finish_reasons[i] != reason) {
      return Outcome::fail("stop token " + std::to_string(stop) + ": output " + std::to_string(i) + " is " +
                           show_tokens(out.token_ids[i]) + " (" + finish_reason_name(out.finish_reasons[i]) +
                           "), expected " + show_tokens(want) + " (" + finish_reason_name(reason) + ")");
    }
  }
  return Outcome::pass();
}

// The same seed gives the same samples; another seed gives others.
Outcome check_seed_reproducible(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  const GenerationOutput a = generate_checked(*engine, sampled(11, 2));
  const GenerationOutput b = generate_checked(*engine, sampled(11, 2));
  std::string problem = compare_tokens(b.token_ids, a.token_ids, "the first run with seed 11 gave");
  if (!problem.empty()) return Outcome::fail("seed 11 twice: " + problem);
  if (b.logprobs != a.logprobs) return Outcome::fail("seed 11 twice: same tokens but different log-probs");
  // A fresh engine must agree too: the seed, not the engine's history, decides.
  auto fresh = make_inference_candidate(env, env.tiny_model);
  problem = compare_tokens(generate_checked(*fresh, sampled(11, 2)).token_ids, a.token_ids, "the first engine gave");
  if (!problem.empty()) return Outcome::fail("seed 11 on a fresh engine: " + problem);
  if (generate_checked(*engine, sampled(12, 2)).token_ids == a.token_ids) {
    return Outcome::fail("seeds 11 and 12 gave identical samples: the seed is ignored");
  }
  return Outcome::pass();
}

// Weights loaded in buckets replace the old ones exactly: the outputs become those
// of an engine made from the new checkpoint, and the version is reported.
Outcome check_load_weights(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  std::string why;
  const NamedTensorList weights = weights_for(*engine, tiny_model_weights(2), why);
  if (weights.empty()) return Outcome::not_applicable(why);
  const GenerationOutput old_out = generate_checked(*engine, greedy());
  load_in_buckets(*engine, weights, 7);
  if (engine->weight_version() != 7) {
    return Outcome::fail("weight_version() is " + std::to_string(engine->weight_version()) +
                         " after load_weights(..., 7)");
  }
  const GenerationOutput out = generate_checked(*engine, greedy());
  if (out.weight_version != 7) {
    return Outcome::fail("generate() reports weight_version " + std::to_string(out.weight_version) + ", loaded 7");
  }
  auto fresh = make_inference_candidate(env, env.tiny_model_alt);
  const GenerationOutput want = generate_checked(*fresh, greedy());
  if (want.token_ids == old_out.token_ids) throw ValueError("the suite's two tiny models generate the same tokens");
  const std::string problem =
      compare_tokens(out.token_ids, want.token_ids, "an engine made from the new weights gives");
  if (!problem.empty()) return Outcome::fail("after load_weights: " + problem);
  const Worst worst = worst_logprob_difference(out, want);
  Outcome outcome = Outcome::measured(worst.error, 0, worst.what + " vs an engine made from the new weights");
  if (outcome.status == Status::kPass) outcome.detail = "bit-exact";
  return outcome;
}

// sleep(), wake_up(), load_weights(): generation is as before.
Outcome check_sleep_wake_up(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  std::string why;
  const NamedTensorList weights = weights_for(*engine, tiny_model_weights(1), why);
  if (weights.empty()) return Outcome::not_applicable(why);
  // Loaded first: a remote engine's server may still hold what an earlier check loaded.
  load_in_buckets(*engine, weights, 1);
  const GenerationOutput before = generate_checked(*engine, greedy());
  engine->sleep();
  engine->wake_up();
  load_in_buckets(*engine, weights, 2);
  const GenerationOutput after = generate_checked(*engine, greedy());
  const std::string problem = compare_tokens(after.token_ids, before.token_ids, "before sleep() it was");
  if (!problem.empty()) return Outcome::fail("after sleep / wake_up / load_weights: " + problem);
  // Bit for bit: the same weights in the same engine. An engine that reallocates its weights apart
  // after sleep() may run fused projections as separate GEMMs, which round differently.
  const Worst worst = worst_logprob_difference(after, before);
  Outcome outcome = Outcome::measured(worst.error, 0, worst.what + " after sleep / wake_up / load_weights vs before");
  if (outcome.status == Status::kPass) outcome.detail = "bit-exact";
  return outcome;
}

// weight_meta() lists unique names, and load_weights() accepts exactly those
// names, shapes and dtypes (the engine's own weights back: nothing changes).
Outcome check_weight_meta(CheckEnv& env) {
  auto engine = make_inference_candidate(env, env.tiny_model);
  std::set<std::string> names;
  for (const WeightMeta& meta : engine->weight_meta()) {
    if (!names.insert(meta.name).second) return Outcome::fail("weight_meta() lists '" + meta.name + "' twice");
  }
  std::string why;
  const NamedTensorList weights = weights_for(*engine, tiny_model_weights(1), why);
  if (weights.empty()) return Outcome::not_applicable(why);
  if (weights.size() != tiny_model_weights(1).size()) {
    return Outcome::fail("weight_meta() lists " + std::to_string(weights.size()) + " of the model's " +
                         std::to_string(tiny_model_weights(1).size()) + " parameters");
  }
  const GenerationOutput before = generate_checked(*engine, greedy());
  engine->load_weights(weights, 2);
  const GenerationOutput after = generate_checked(*engine, greedy());
  if (after.token_ids != before.token_ids || after.logprobs != before.logprobs) {
    return Outcome::fail("reloading the engine's own weights as weight_meta() describes them changed its outputs");
  }
  return Outcome::pass();
}

}  // namespace

std::shared_ptr<InferenceEngine> make_inference_engine(const ComponentEntry& entry, const ConfigNode& options,
                                                       const fs::path& model) {
  ComponentContext context;
  context.model_path = model.string();
  auto made = std::static_pointer_cast<InferenceEngine>(entry.factory(options, context));
  if (!made) throw ValueError("the factory of " + entry.kind + " '" + entry.name + "' returned null");
  return made;
}

std::string show_tokens(const std::vector<int32_t>& tokens) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < tokens.size(); ++i) out << (i ? " " : "") << tokens[i];
  out << "]";
  return out.str();
}

const std::vector<std::vector<int32_t>>& test_prompts() {
  static const Tokens prompts = {{5, 17, 42}, {100, 7, 250, 33, 9, 61, 2}, {12, 220, 13, 14, 300, 15, 81, 16}};
  return prompts;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams sampling;
  sampling.temperature = 0;
  sampling.max_tokens = max_tokens;
  return sampling;
}

std::vector<Check> inference_engine_checks() {
  std::vector<Check> checks = {
      {"create", check_inference_create},
      {"greedy_vs_reference", check_greedy_vs_reference},
      {"logprobs_teacher_forcing", check_logprobs_teacher_forcing},
      {"sampling_n", check_sampling_n},
      {"max_tokens", check_max_tokens},
      {"stop_tokens", check_stop_tokens},
      {"seed_reproducible", check_seed_reproducible},
      {"load_weights", check_load_weights},
      {"sleep_wake_up", check_sleep_wake_up},
      {"weight_meta", check_weight_meta},
  };
  for (Check& check : request_checks()) checks.push_back(std::move(check));
  return checks;
}

}  // namespace rlcore::conformance
