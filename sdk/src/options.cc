// Value formatting, constraint checks and unknown-key detection for OptionsSchema.
#include "rlcore/options.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {

std::string Check::describe() const {
  std::ostringstream out;
  if (!choices.empty()) {
    return "one of: " + join(choices, ", ", [](const auto& choice) { return detail::format_value(choice); });
  }
  if (min && max) {
    out << "in [" << detail::format_value(*min) << ", " << detail::format_value(*max) << "]";
  } else if (min) {
    out << (min_exclusive ? "> " : ">= ") << detail::format_value(*min);
  } else if (max) {
    out << "<= " << detail::format_value(*max);
  }
  return out.str();
}

namespace detail {

std::string format_value(bool value) { return value ? "true" : "false"; }
std::string format_value(int64_t value) { return std::to_string(value); }
std::string format_value(int value) { return std::to_string(value); }
std::string format_value(double value) {
  std::ostringstream out;
  out << value;
  std::string text = out.str();
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
std::string format_value(const std::string& value) { return value.empty() ? "\"\"" : value; }

template <class T>
std::string format_list(const std::vector<T>& values) {
  return "[" + join(values, ", ", [](const T& value) { return format_value(value); }) + "]";
}
std::string format_value(const std::vector<int64_t>& value) { return format_list(value); }
std::string format_value(const std::vector<double>& value) { return format_list(value); }
std::string format_value(const std::vector<std::string>& value) { return format_list(value); }

void enforce(const ConfigNode& node, double value, const Check& check) {
  const bool below = check.min && (check.min_exclusive ? value <= *check.min : value < *check.min);
  const bool above = check.max && value > *check.max;
  if (below || above || std::isnan(value)) {
    throw ConfigError("key " + node.describe() + ": value " + format_value(value) + " is out of range (must be " +
                      check.describe() + ")");
  }
}

void enforce(const ConfigNode& node, const std::string& value, const Check& check) {
  if (check.choices.empty()) return;
  if (std::find(check.choices.begin(), check.choices.end(), value) == check.choices.end()) {
    throw ConfigError("key " + node.describe() + ": '" + value + "' is not allowed (" + check.describe() + ")");
  }
}

void enforce(const ConfigNode&, bool, const Check&) {}

void enforce(const ConfigNode& node, const std::vector<std::string>& value, const Check& check) {
  const auto items = node.items();
  for (std::size_t i = 0; i < value.size() && i < items.size(); ++i) enforce(items[i], value[i], check);
}
void enforce(const ConfigNode& node, const std::vector<int64_t>& value, const Check& check) {
  const auto items = node.items();
  for (std::size_t i = 0; i < value.size() && i < items.size(); ++i) {
    enforce(items[i], static_cast<double>(value[i]), check);
  }
}
void enforce(const ConfigNode& node, const std::vector<double>& value, const Check& check) {
  const auto items = node.items();
  for (std::size_t i = 0; i < value.size() && i < items.size(); ++i) enforce(items[i], value[i], check);
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

void reject_unknown_keys(const ConfigNode& node, const std::vector<std::string>& known) {
  for (const auto& key : node.keys()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string message = "unknown key " + node[key].describe();
    std::string best;
    std::size_t best_distance = 3;
    for (const auto& candidate : known) {
      // A truncated key ("ppo_mini_batch") is as likely a typo as a misspelt one.
      const bool prefix = key.size() >= 4 && candidate.compare(0, key.size(), key) == 0;
      const std::size_t distance = prefix ? 1 : edit_distance(key, candidate);
      if (distance < best_distance) best_distance = distance, best = candidate;
    }
    if (!best.empty()) message += "; did you mean '" + best + "'?";
    message += best.empty() ? ". Known keys here: " : " Known keys here: ";
    throw ConfigError(message + join(known));
  }
}

void require_map(const ConfigNode& node) {
  if (!node.is_map()) throw ConfigError("key " + node.describe() + ": expected a map of keys");
}

}  // namespace detail
}  // namespace rlcore
