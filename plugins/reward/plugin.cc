// The `reward` plugin: registers the rule-based graders with their config keys
// and the data_source values verl's default_compute_score routes to them, and
// the custom_function grader that runs a user's Python reward function.
#include "rlcore/plugin.h"

#include <nlohmann/json.hpp>

#include "arithmetic_grader.h"
#include "custom_function_grader.h"
#include "exact_match_grader.h"
#include "gsm8k_grader.h"
#include "math_dapo_grader.h"
#include "math_grader.h"
#include "prime_math_grader.h"
#include "rlcore/error.h"
#include "sandbox_fusion_grader.h"
#include "search_r1_grader.h"

namespace rlcore::reward {
namespace {

// gsm8k's method is an enum in the grader; the config spells it as verl does.
struct Gsm8kConfig {
  std::string method = "strict";
  double format_score = 0.0;
  double score = 1.0;
};

// verl's custom_reward_function keys; reward_kwargs stays a tree until built.
struct CustomFunctionConfig {
  std::string path;
  std::string name = "compute_score";
  std::string python = "python3";
  double timeout_s = 300.0;
  ConfigNode reward_kwargs;
};

// A YAML tree as JSON for Python: maps and lists as such, scalars as the JSON
// number, bool or null they spell, else as strings.
nlohmann::json to_json(const ConfigNode& node) {
  if (!node.defined() || node.is_null()) return nullptr;
  if (node.is_map()) {
    nlohmann::json object = nlohmann::json::object();
    for (const std::string& key : node.keys()) object[key] = to_json(node[key]);
    return object;
  }
  if (node.is_sequence()) {
    nlohmann::json array = nlohmann::json::array();
    for (const ConfigNode& item : node.items()) array.push_back(to_json(item));
    return array;
  }
  const std::string text = node.as<std::string>();
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  if (!value.is_discarded() && (value.is_number() || value.is_boolean() || value.is_null())) return value;
  if (text == "True" || text == "False") return text == "True";  // YAML 1.1 spellings
  return text;
}

// verl's reward_model.sandbox_fusion keys, plus rlcore's; api_errors is an enum in the grader.
struct SandboxFusionConfig {
  std::string url;
  int64_t max_concurrent = 64;
  int64_t memory_limit_mb = 1024;
  double timeout_s = 10;
  bool continuous = true;
  std::string api_errors = "raise";
};

std::unique_ptr<Grader> make_sandbox_fusion_grader(const SandboxFusionConfig& config) {
  SandboxFusionOptions options;
  options.url = config.url;
  options.max_concurrent = config.max_concurrent;
  options.memory_limit_mb = config.memory_limit_mb;
  options.timeout_s = config.timeout_s;
  options.continuous = config.continuous;
  options.api_errors = config.api_errors == "raise" ? SandboxApiErrors::kRaise : SandboxApiErrors::kFailCase;
  return std::make_unique<SandboxFusionGrader>(std::move(options));
}

std::unique_ptr<Grader> make_custom_function_grader(const CustomFunctionConfig& config) {
  nlohmann::json kwargs = to_json(config.reward_kwargs);
  if (kwargs.is_null()) kwargs = nlohmann::json::object();
  if (!kwargs.is_object()) {
    throw ConfigError("key " + config.reward_kwargs.describe() + " must be a map of keyword arguments");
  }
  return std::make_unique<CustomFunctionGrader>(
      CustomFunctionOptions{config.path, config.name, config.python, config.timeout_s, std::move(kwargs)});
}

void register_graders(PluginRegistrar& registrar) {
  registrar.add<Grader>(
      "gsm8k", "GSM8K: the number after '####' (strict) or the last number (flexible), verl's gsm8k.py",
      OptionsSchema<Gsm8kConfig>()
          .key("method", &Gsm8kConfig::method, "strict: the last '#### <number>'; flexible: the last number anywhere.",
               one_of({"strict", "flexible"}))
          .key("format_score", &Gsm8kConfig::format_score, "Score when an answer is found but wrong.")
          .key("score", &Gsm8kConfig::score, "Score when the answer equals the ground truth."),
      [](const Gsm8kConfig& config) {
        return std::make_unique<Gsm8kGrader>(
            Gsm8kOptions{*parse_gsm8k_method(config.method), config.format_score, config.score});
      },
      {"openai/gsm8k"});

  registrar.add<Grader>(
      "math", "Hendrycks MATH: the last \\boxed{} answer, compared after verl's strip_string normalisation",
      OptionsSchema<MathOptions>()
          .key("score", &MathOptions::score, "Score when the boxed answer is equivalent to the ground truth.")
          .key("format_score", &MathOptions::format_score, "Score when a boxed answer is found but not equivalent."),
      [](const MathOptions& options) { return std::make_unique<MathGrader>(options); },
      {"lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"});

  registrar.add<Grader>(
      "math_dapo",
      "DAPO math (verl's math_dapo.py): the last 'Answer:' line, normalised, else the last \\boxed{}; "
      "1.0 right, -1.0 wrong; extras acc, pred",
      OptionsSchema<MathDapoOptions>().key(
          "strict_box_verify", &MathDapoOptions::strict_box_verify,
          "Only the last \\boxed{} of the response's last 100 characters, equal to the ground truth as written."),
      [](const MathDapoOptions& options) { return std::make_unique<MathDapoGrader>(options); },
      {"math_dapo", "math", "math_dapo_reasoning", "aime*"});

  registrar.add<Grader>(
      "prime_math",
      "PRIME math (verl's prime_math): the answer after 'answer is' / the last \\boxed{} / the last 'is' or '=', "
      "equal after normalisation, as a number (1e-4, or as a percentage) or element-wise; without verl's sympy "
      "steps (docs/algorithms.md)",
      OptionsSchema<PrimeMathOptions>(), [](const PrimeMathOptions&) { return std::make_unique<PrimeMathGrader>(); },
      {"numina_aops_forum", "numina_synthetic_math", "numina_amc_aime", "numina_synthetic_amc", "numina_cn_k12",
       "numina_olympiads"});

  registrar.add<Grader>(
      "search_r1_like_qa_em",
      "Search-R1 QA (verl's search_r1_like_qa_em.py): the last <answer>...</answer>, SQuAD-normalised, equal to "
      "one of the ground truth's targets",
      OptionsSchema<SearchR1Options>()
          .key("score", &SearchR1Options::score,
               "Score when the answer matches a target (a quarter of it with more than 10 answer tags).")
          .key("format_score", &SearchR1Options::format_score, "Score when an answer is found but matches no target."),
      [](const SearchR1Options& options) { return std::make_unique<SearchR1Grader>(options); },
      {"searchR1_nq", "searchR1_triviaqa", "searchR1_popqa", "searchR1_hotpotqa", "searchR1_2wikimultihopqa",
       "searchR1_musique", "searchR1_bamboogle"});

  registrar.add<Grader>(
      "exact_match", "The whole response equals the ground truth",
      OptionsSchema<ExactMatchOptions>()
          .key("strip", &ExactMatchOptions::strip, "Trim ASCII whitespace from both ends of both strings first.")
          .key("case_sensitive", &ExactMatchOptions::case_sensitive, "When false, ASCII letters match either case.")
          .key("score", &ExactMatchOptions::score, "Score on a match; a mismatch scores 0."),
      [](const ExactMatchOptions& options) { return std::make_unique<ExactMatchGrader>(options); });

  registrar.add<Grader>(
      "arithmetic", "rlcore's built-in arithmetic task: the integer after '####'",
      OptionsSchema<ArithmeticOptions>()
          .key("score", &ArithmeticOptions::score, "Score when the answer equals the ground truth as an integer.")
          .key("format_score", &ArithmeticOptions::format_score, "Score when an answer is found but wrong."),
      [](const ArithmeticOptions& options) { return std::make_unique<ArithmeticGrader>(options); },
      {"arithmetic", "rlcore/arithmetic"});

  registrar.add<Grader>(
      "sandbox_fusion",
      "Code (verl's sandbox_fusion): the response's code block run on the ground truth's test cases by a "
      "SandboxFusion server; score: the fraction passed",
      OptionsSchema<SandboxFusionConfig>()
          .key("url", &SandboxFusionConfig::url,
               "The sandbox's run_code endpoint, e.g. http://localhost:8080/run_code (verl's "
               "reward_model.sandbox_fusion.url); required to grade.")
          .key("max_concurrent", &SandboxFusionConfig::max_concurrent,
               "Requests in flight at once, over the whole batch (verl's reward_model.sandbox_fusion.max_concurrent).",
               at_least(1))
          .key("memory_limit_mb", &SandboxFusionConfig::memory_limit_mb,
               "memory_limit_MB of each run (verl's reward_model.sandbox_fusion.memory_limit_mb).", at_least(1))
          .key("timeout_s", &SandboxFusionConfig::timeout_s,
               "compile_timeout and run_timeout of each test case; a request may take twice this plus 10 s.",
               greater_than(0))
          .key("continuous", &SandboxFusionConfig::continuous,
               "Score the first 10 test cases only, as verl's default_compute_score does; false: all of them.")
          .key("api_errors", &SandboxFusionConfig::api_errors,
               "A sandbox that cannot be asked (down, HTTP error, no reply in time, a body not a JSON object): "
               "raise stops the step naming the URL; fail_case counts the test case as failed, as verl does.",
               one_of({"raise", "fail_case"})),
      make_sandbox_fusion_grader, {"codecontests", "apps", "codeforces", "taco"});

  registrar.add<Grader>(
      "custom_function",
      "verl's custom_reward_function: a Python function run in a long-lived subprocess, one JSON line per batch "
      "(docs/custom-rewards.md)",
      OptionsSchema<CustomFunctionConfig>()
          .key("path", &CustomFunctionConfig::path,
               "Python file defining the reward function; set: it scores every sample instead of reward.grader.")
          .key("name", &CustomFunctionConfig::name,
               "The function: name(data_source, solution_str, ground_truth, extra_info, **reward_kwargs) -> float "
               "or dict with 'score'.")
          .key("python", &CustomFunctionConfig::python, "Interpreter that runs it (looked up in PATH).")
          .key("timeout_s", &CustomFunctionConfig::timeout_s,
               "Seconds one batch may take, the interpreter's start included; past it the process is killed.",
               greater_than(0))
          .subtree("reward_kwargs", &CustomFunctionConfig::reward_kwargs,
                   "Extra keyword arguments of every call (verl's reward_kwargs)."),
      make_custom_function_grader);
}

}  // namespace
}  // namespace rlcore::reward

RLCORE_PLUGIN("reward", "0.1.0", rlcore::reward::register_graders)
