// Tables generated from Python's str methods (scripts/gen_python_unicode_tables.py);
// python_unicode.cc reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace rlcore::reward::tables {

struct LowerRun {
  char32_t first, last;
  uint32_t stride;
  int32_t delta;
};

extern const std::pair<char32_t, char32_t> kAlnumRanges[];
extern const std::size_t kAlnumRangeCount;
extern const LowerRun kLowerRuns[];
extern const std::size_t kLowerRunCount;

}  // namespace rlcore::reward::tables
