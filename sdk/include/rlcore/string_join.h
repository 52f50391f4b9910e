// join(): items written one after another with a separator between them, the
// idiom behind every "known names: a, b, c" in an error message.
//
//   join(names)                                            // "a, b, c"
//   join(shape, "x", [](int64_t d) { return std::to_string(d); })
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace rlcore {

// Each item of `items` through `format` (which returns something a std::string
// can be appended with), `separator` between them.
template <class Range, class Format>
std::string join(const Range& items, std::string_view separator, Format&& format) {
  std::string text;
  bool first = true;
  for (const auto& item : items) {
    if (!first) text += separator;
    text += format(item);
    first = false;
  }
  return text;
}

// Items that are strings (or convert to one) as they are.
template <class Range>
std::string join(const Range& items, std::string_view separator = ", ") {
  return join(items, separator, [](const auto& item) -> std::string { return std::string(item); });
}

// join(items), or "(none)" when there are none: a list in an error message.
template <class Range>
std::string join_or_none(const Range& items) {
  std::string text = join(items);
  return text.empty() ? "(none)" : text;
}

}  // namespace rlcore
