// Private to the sdk library: the kernels' side of rlcore/model/cpu_kernels.h.
#pragma once

#include "rlcore/model/cpu_kernels.h"

namespace rlcore::model::cpu {

// Called once a kernel has accepted its inputs: whether to run the AVX-512
// version (`supported` by this CPU and not forced generic); counts the path.
bool take_avx512_path(CpuKernel kernel, bool supported);

}  // namespace rlcore::model::cpu
