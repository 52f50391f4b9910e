// The Unicode data NFC normalization needs; the tables themselves are
// generated into unicode_tables.cc by unicode_tables.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace rlcore::unicode {

// Characters not in any range have canonical combining class 0.
struct CombiningClassRange {
  char32_t first;
  char32_t last;
  std::uint8_t combining_class;
};

// Full (recursive) canonical decomposition; Hangul syllables are left to the
// algorithm. The characters are kDecompositionData[offset, offset + length).
struct Decomposition {
  char32_t code_point;
  std::uint16_t offset;
  std::uint8_t length;
};

// Primary composites only: composition exclusions and singletons are absent.
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

// Each table is sorted by its leading field(s).
extern const CombiningClassRange kCombiningClassRanges[];
extern const std::size_t kCombiningClassRangeCount;
extern const char32_t kDecompositionData[];
extern const Decomposition kDecompositions[];
extern const std::size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const std::size_t kCompositionCount;

}  // namespace rlcore::unicode
