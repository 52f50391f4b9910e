// Private to the core's data code: random draws that are the same on every
// platform (std::uniform_int_distribution is not: each standard library has its own).
#pragma once

#include <cstdint>
#include <random>

namespace rlcore::data::random {

// An engine seeded from (seed, stream) through std::seed_seq, whose algorithm the
// standard fixes; distinct pairs give unrelated sequences.
inline std::mt19937_64 make_engine(int64_t seed, int64_t stream) {
  const auto s = static_cast<uint64_t>(seed);
  const auto t = static_cast<uint64_t>(stream);
  std::seed_seq sequence{static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32), static_cast<uint32_t>(t),
                         static_cast<uint32_t>(t >> 32)};
  return std::mt19937_64(sequence);
}

// Uniform in [0, bound) for bound >= 1, by rejection so there is no modulo bias.
inline uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // a multiple of bound
  uint64_t draw = engine();
  while (draw >= limit) draw = engine();
  return draw % bound;
}

}  // namespace rlcore::data::random
