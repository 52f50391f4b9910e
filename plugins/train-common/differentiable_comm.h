// Collectives inside an autograd graph: the backward of each is the reverse
// exchange, so a forward split over ranks trains as one graph.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/comm_context.h"

namespace rlcore::train_common {

// Rows of `x` exchanged over `group` (send_rows[r] to rank r, recv_rows[r]
// from rank r); its gradient travels back the same way.
at::Tensor all_to_all_rows(const at::Tensor& x, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows, const CommGroup& group);

}  // namespace rlcore::train_common
