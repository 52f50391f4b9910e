// Parsing and checking algorithm.rollout_correction the way verl's
// rollout_corr_helper.py parses it, so a config verl would refuse mid-training
// fails at start instead.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "rlcore/error.h"
#include "rlcore/string_join.h"
#include "rollout_correction_internal.h"

namespace rlcore {
namespace rollout_correction_internal {
namespace {

const std::vector<std::string>& rejection_option_names() {
  static const std::vector<std::string> names = {"seq_max_k2",  "seq_max_k3", "seq_mean_k1", "seq_mean_k2",
                                                 "seq_mean_k3", "seq_sum_k1", "seq_sum_k2",  "seq_sum_k3",
                                                 "token_k1",    "token_k2",   "token_k3"};
  return names;  // sorted, as verl lists them in its error
}

std::string strip(const std::string& text) {
  const auto first = std::find_if_not(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); });
  const auto last = std::find_if_not(text.rbegin(), text.rend(), [](unsigned char c) { return std::isspace(c); });
  return first < last.base() ? std::string(first, last.base()) : std::string();
}

std::string lower_case(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Python's float(str): surrounding whitespace, an optional sign, decimal or
// exponent notation with '_' allowed between digits, inf/infinity/nan.
std::optional<double> python_float(const std::string& raw) {
  std::string text = strip(raw);
  if (text.empty()) return std::nullopt;
  const std::string unsigned_text = lower_case(text[0] == '+' || text[0] == '-' ? text.substr(1) : text);
  const double sign = text[0] == '-' ? -1.0 : 1.0;
  if (unsigned_text == "inf" || unsigned_text == "infinity") return sign * HUGE_VAL;
  if (unsigned_text == "nan") return std::nan("");
  std::string digits;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      const bool between_digits = i > 0 && i + 1 < text.size() &&
                                  std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                                  std::isdigit(static_cast<unsigned char>(text[i + 1]));
      if (!between_digits) return std::nullopt;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
      return std::nullopt;  // also keeps strtod's hex and nan(...) forms out
    }
    digits += c;
  }
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (end == digits.c_str() || *end != '\0') return std::nullopt;
  return value;
}

class KeyErrors {
 public:
  explicit KeyErrors(std::string prefix) : prefix_(std::move(prefix)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw ConfigError((prefix_.empty() ? key : prefix_ + "." + key) + ": " + message);
  }

 private:
  std::string prefix_;
};

IsThreshold parse_is_threshold(const std::string& raw, const KeyErrors& errors) {
  const char* key = "rollout_is_threshold";
  const std::string spec = strip(raw);
  if (spec.empty()) errors.fail(key, "must not be empty (\"upper\" for TIS or \"lower_upper\" for IcePop)");
  IsThreshold threshold;
  const size_t underscore = spec.find('_');
  const std::optional<double> upper =
      python_float(underscore == std::string::npos ? spec : spec.substr(underscore + 1));
  std::optional<double> lower;
  if (underscore != std::string::npos) lower = python_float(spec.substr(0, underscore));
  if (!upper || (underscore != std::string::npos && !lower)) {
    errors.fail(key, "invalid threshold '" + raw + "' (\"upper\" for TIS or \"lower_upper\" for IcePop)");
  }
  if (std::isnan(*upper) || (lower && std::isnan(*lower))) errors.fail(key, "'" + raw + "' is NaN");
  if (*upper <= 0) errors.fail(key, "upper bound must be positive, got '" + raw + "'");
  if (lower) {
    if (*lower <= 0) errors.fail(key, "lower bound must be positive, got '" + raw + "'");
    if (*lower > *upper) errors.fail(key, "lower bound must be <= upper bound, got '" + raw + "'");
  }
  threshold.upper = *upper;
  threshold.lower = lower;
  return threshold;
}

std::vector<std::string> split_stripped(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    const std::string part = strip(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (!part.empty()) parts.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

// The options in order of first mention, duplicates dropped (verl).
std::vector<std::string> parse_rejection_names(const std::string& raw, const KeyErrors& errors) {
  const std::vector<std::string> mentioned = split_stripped(raw, ',');
  if (mentioned.empty())
    errors.fail("rollout_rs", "must name at least one option, one of " + join(rejection_option_names()));
  std::vector<std::string> names;
  for (const std::string& name : mentioned) {
    const auto& known = rejection_option_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      errors.fail("rollout_rs", "invalid option '" + name + "'; must be one of " + join(known));
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

RejectionOption parse_rejection_threshold(const std::string& name, const std::string& spec, const KeyErrors& errors) {
  const char* key = "rollout_rs_threshold";
  const std::string where = " for option '" + name + "'";
  RejectionOption option{name};
  const bool k1 = name.size() >= 2 && name.compare(name.size() - 2, 2, "k1") == 0;
  const size_t underscore = spec.find('_');
  if (!k1) {
    if (underscore != std::string::npos) {
      errors.fail(key, "'" + spec + "'" + where + " must be a single upper bound without '_'");
    }
    const std::optional<double> upper = python_float(spec);
    if (!upper) errors.fail(key, "invalid number '" + spec + "'" + where);
    if (std::isnan(*upper)) errors.fail(key, "'" + spec + "'" + where + " is NaN");
    if (*upper <= 0) errors.fail(key, "'" + spec + "'" + where + " must be positive");
    option.upper = *upper;
    return option;
  }
  std::optional<double> upper = python_float(underscore == std::string::npos ? spec : spec.substr(underscore + 1));
  std::optional<double> lower;
  if (underscore != std::string::npos) {
    lower = python_float(spec.substr(0, underscore));
  } else if (upper) {
    if (*upper == 0) errors.fail(key, "'" + spec + "'" + where + " must be positive");
    lower = 1.0 / *upper;  // verl: float(str(1.0 / upper)), which round-trips exactly
  }
  if (!upper || !lower) errors.fail(key, "invalid number '" + spec + "'" + where + " (\"lower_upper\" or \"upper\")");
  if (std::isnan(*upper) || std::isnan(*lower)) errors.fail(key, "'" + spec + "'" + where + " is NaN");
  if (*lower <= 0 || *upper <= 0) errors.fail(key, "'" + spec + "'" + where + " must be positive (lower and upper)");
  if (*lower > *upper) errors.fail(key, "'" + spec + "'" + where + " must have lower <= upper");
  option.upper = *upper;
  option.lower = *lower;
  return option;
}

std::vector<RejectionOption> parse_rejection(const RolloutCorrectionConfig& config, const KeyErrors& errors) {
  const std::vector<std::string> names = parse_rejection_names(config.rollout_rs, errors);
  std::vector<std::string> specs = split_stripped(config.rollout_rs_threshold, ',');
  if (specs.empty()) {
    errors.fail("rollout_rs_threshold", "must be set when rollout_rs is enabled (one threshold, or one per option)");
  }
  if (specs.size() != 1 && specs.size() != names.size()) {
    errors.fail("rollout_rs_threshold",
                "has " + std::to_string(specs.size()) + " thresholds; expected one shared by all options or exactly " +
                    std::to_string(names.size()) + " (one per option of rollout_rs '" + config.rollout_rs + "')");
  }
  if (specs.size() == 1) specs.resize(names.size(), specs[0]);
  std::vector<RejectionOption> options;
  for (size_t i = 0; i < names.size(); ++i) options.push_back(parse_rejection_threshold(names[i], specs[i], errors));
  return options;
}

}  // namespace

ParsedConfig parse_config(const RolloutCorrectionConfig& config, const std::string& key_prefix) {
  const KeyErrors errors(key_prefix);
  ParsedConfig parsed;
  if (!config.rollout_is.empty()) {
    if (config.rollout_is != "token" && config.rollout_is != "sequence") {
      errors.fail("rollout_is", "invalid level '" + config.rollout_is + "'; must be token or sequence (or unset)");
    }
    parsed.is_level = config.rollout_is;
    parsed.is_threshold = parse_is_threshold(config.rollout_is_threshold, errors);
    parsed.is_batch_normalize = config.rollout_is_batch_normalize;
  }
  if (!config.rollout_rs.empty()) parsed.rejection = parse_rejection(config, errors);
  return parsed;
}

}  // namespace rollout_correction_internal

void validate_rollout_correction_config(const RolloutCorrectionConfig& config, const std::string& key_prefix) {
  rollout_correction_internal::parse_config(config, key_prefix);
}

}  // namespace rlcore
