// Memory references the benchmarks measure in the same run as what they time:
// memcpy bandwidth (warm, or into freshly allocated memory), read bandwidth
// and peak RSS.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

namespace rlcore::bench {

// Best-of-reps bandwidth (bytes copied per second / 1e9) of one memcpy of
// `bytes`, split over the intra-op threads like the swap's copies: between two
// touched buffers (`fresh` false), or into a buffer allocated just before
// (`fresh` true: the page faults a swap pays on its new bucket are included).
double memcpy_gbps(int64_t bytes, int reps, bool fresh);

// Best-of-reps bandwidth (bytes read per second / 1e9) of summing `bytes` of
// touched memory, split over the intra-op threads: what a step that only
// streams weights in (a decode step's GEMVs) can reach at best. Nothing is
// written, so it exceeds memcpy's bytes copied per second.
double read_gbps(int64_t bytes, int reps);

// Best-of-reps bandwidth (bytes copied per second / 1e9) of copying `bytes`
// between two buffers on `device` (a GPU's device-to-device copy), timed to
// the copy's completion.
double device_copy_gbps(int64_t bytes, int reps, const at::Device& device);

// Waits until the work queued on `device` so far is done (a no-op on the CPU).
void wait_for_device(const at::Device& device);

}  // namespace rlcore::bench
