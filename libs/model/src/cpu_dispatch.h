// Private to the sdk library: the kernels' side of rlcore/model/cpu_kernels.h.
#pragma once

#include "rlcore/model/cpu_kernels.h"

namespace rlcore::model::cpu {

// Called once a kernel has accepted its inputs: whether to run the AVX-512
// version (cpu_kernel_path); counts the path.
bool take_avx512_path(CpuKernel kernel);

}  // namespace rlcore::model::cpu
