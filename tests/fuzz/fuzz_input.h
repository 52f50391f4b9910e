// Shared by the fuzz targets: splitting one input into parts, and the rule
// they all check: a parser may refuse bad bytes only with rlcore's own errors
// (rlcore::Error and its subclasses); any other exception, a crash, a leak or
// undefined behaviour is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "rlcore/error.h"

namespace rlcore_fuzz {

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// `text` cut at every `separator`.
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at = text.find(separator); at != std::string_view::npos; at = text.find(separator, start)) {
    parts.emplace_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

// Runs `parse`; rlcore::Error is the documented refusal, anything else aborts.
template <class Parse>
void expect_only_rlcore_errors(const char* target, Parse&& parse) {
  try {
    parse();
  } catch (const rlcore::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: escaped %s: %s\n", target, typeid(e).name(), e.what());
    std::abort();
  }
}

// A file under /tmp (the fuzzers run one process per target) holding `bytes`.
std::string write_temp_file(const std::string& name, std::string_view bytes);

}  // namespace rlcore_fuzz
