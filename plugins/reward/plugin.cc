// The `reward` plugin: registers the rule-based graders with their config keys
// and the data_source values verl's default_compute_score routes to them.
#include "rlcore/plugin.h"

#include "arithmetic_grader.h"
#include "exact_match_grader.h"
#include "gsm8k_grader.h"
#include "math_grader.h"

namespace rlcore::reward {
namespace {

// gsm8k's method is an enum in the grader; the config spells it as verl does.
struct Gsm8kConfig {
  std::string method = "strict";
  double format_score = 0.0;
  double score = 1.0;
};

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
}

}  // namespace
}  // namespace rlcore::reward

RLCORE_PLUGIN("reward", "0.1.0", rlcore::reward::register_graders)
