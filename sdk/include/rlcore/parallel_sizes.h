// How an engine splits one model over ranks, as its options say (SDK 6.2): the
// core builds a pool's mesh from these sizes before any worker starts.
#pragma once

#include <cstdint>
#include <string>

namespace rlcore {

// One parallel size and the engine's option that sets it, relative to the engine's
// options ("megatron.tensor_model_parallel_size"); the core names it in layout errors.
struct ParallelSize {
  int64_t size = 1;
  std::string key;
};

// Every size is 1 (no key) unless the engine declares it.
struct ParallelSizes {
  ParallelSize tp;  // tensor parallel: ranks one layer's weights are split over
  ParallelSize pp;  // pipeline parallel: stages the layers are split into
  ParallelSize ep;  // expert parallel: data-parallel ranks the experts are split over
  ParallelSize sp;  // sequence parallel (Ulysses): ranks a sequence's tokens are split over
  ParallelSize cp;  // context parallel: ranks a long context's attention is split over
};

}  // namespace rlcore
