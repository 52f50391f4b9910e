// Answer extraction and normalisation of verl's verl/utils/reward_score/math_reward.py
// (the Hendrycks MATH one, from lm-evaluation-harness). Where verl raises an
// exception these return nullopt, and callers fall back exactly as verl does.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rlcore::reward {

// last_boxed_only_string: "\boxed <rest up to $>" if "\boxed " occurs anywhere,
// else the last "\boxed..." (or, failing that, "\fbox...") up to its matching brace.
std::optional<std::string> last_boxed_only_string(std::string_view text);

// remove_boxed: the content of "\boxed <x>" or "\boxed{<x>}"; nullopt where verl's
// assertions fail, which includes every "\fbox{...}".
std::optional<std::string> remove_boxed(std::string_view boxed);

// strip_string: the normalisation chain; nullopt where verl raises (several
// "\text{ ", or "\sqrt"/"\frac" with nothing after them).
std::optional<std::string> strip_string(std::string_view text);

// is_equiv: equal after strip_string, or, if either side cannot be stripped,
// equal as raw strings.
bool is_equiv(std::string_view answer, std::string_view ground_truth);

}  // namespace rlcore::reward
