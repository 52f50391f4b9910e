// NCCL in the CPU flavour: there is none.
#include "nccl_backend.h"

#include "rlcore/error.h"

namespace rlcore::device {

void add_nccl_backend(c10d::ProcessGroup&, const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds,
                      const std::string& name) {
  throw ConfigError("process group '" + name +
                    "': this rlcore build has no NCCL (its libtorch has no CUDA); build the CUDA flavour with "
                    "`bash scripts/build.sh --cuda` (docs/gpu.md)");
}

}  // namespace rlcore::device
