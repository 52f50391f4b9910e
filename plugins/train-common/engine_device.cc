#include "engine_device.h"

#include "rlcore/comm_context.h"
#include "rlcore/device.h"

namespace rlcore::train_common {

at::Device engine_device(const ComponentContext& context, const std::string& engine) {
  const int64_t local_rank = context.comm != nullptr ? context.comm->local_rank() : 0;
  return resolve_device(context.device.empty() ? "cpu" : context.device, local_rank, engine + " device");
}

}  // namespace rlcore::train_common
