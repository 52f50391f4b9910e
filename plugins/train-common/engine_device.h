// The device a train engine keeps its tensors on.
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "rlcore/registry.h"

namespace rlcore::train_common {

// The context's device resolved for this worker (rlcore/device.h): a bare
// `cuda` becomes cuda:<local rank>, so the engine's own device compares equal
// to the devices of the tensors it is handed (a swap bucket on cuda:0). An
// empty device is the CPU. Errors name `engine`'s device key.
at::Device engine_device(const ComponentContext& context, const std::string& engine);

}  // namespace rlcore::train_common
