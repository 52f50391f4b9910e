// Memory references the swap benchmarks measure in the same run as the swaps:
// memcpy bandwidth (warm, or into freshly allocated memory) and peak RSS.
#pragma once

#include <cstdint>

namespace rlcore::bench {

// Best-of-reps bandwidth (bytes copied per second / 1e9) of one memcpy of
// `bytes`, split over the intra-op threads like the swap's copies: between two
// touched buffers (`fresh` false), or into a buffer allocated just before
// (`fresh` true: the page faults a swap pays on its new bucket are included).
double memcpy_gbps(int64_t bytes, int reps, bool fresh);

// The process's peak resident set so far, in bytes.
int64_t max_rss_bytes();

}  // namespace rlcore::bench
