// CommContext and CommGroup: named c10d process groups with blocking collectives.
#include "rlcore/comm_context.h"

#include <numeric>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/version.h>

#include "collective_ledger_internal.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {

struct CommGroup::Impl {
  std::string name;
  c10::intrusive_ptr<c10d::ProcessGroup> backend;
  std::vector<int64_t> ranks;
  int64_t rank = 0;
  std::string device_backend;
  std::shared_ptr<detail::LedgerEntry> ledger;  // null without a backend
};

namespace {

// Issues a collective and waits for it, numbered in the collective ledger. A
// backend's failure (a peer gone, a timeout) becomes an IoError naming the
// group, this rank and the collective; over NCCL the group's communicators are
// aborted first (ncclCommAbort), so no kernel of this rank keeps waiting.
template <typename Issue>
void run_collective(const CommGroup& group, detail::LedgerEntry& ledger, const char* collective, Issue issue) {
  detail::CollectiveInFlight in_flight(ledger, group.name(), collective);
  try {
    issue()->wait();
  } catch (const std::exception& e) {
    in_flight.failed();
#if TORCH_VERSION_MAJOR >= 2
    if (group.device_backend() == "nccl") group.backend().abort();
#endif
    throw IoError(std::string(collective) + " over group '" + group.name() + "' failed on its rank " +
                  std::to_string(group.rank()) + " (pool rank " + std::to_string(group.ranks()[group.rank()]) +
                  "): " + e.what());
  }
}

}  // namespace

CommGroup::CommGroup(std::string name, const c10::intrusive_ptr<c10d::ProcessGroup>& backend,
                     std::vector<int64_t> ranks, int64_t rank, std::string device_backend) {
  if (rank < 0 || rank >= static_cast<int64_t>(ranks.size())) {
    throw ValueError("group '" + name + "': rank " + std::to_string(rank) + " is outside its " +
                     std::to_string(ranks.size()) + " members");
  }
  if (!backend && ranks.size() > 1) throw ValueError("group '" + name + "' has several members but no backend");
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  impl->backend = backend;
  impl->ranks = std::move(ranks);
  impl->rank = rank;
  impl->device_backend = std::move(device_backend);
  if (impl->backend) impl->ledger = detail::ledger_entry(impl->backend.get(), impl->name, impl->ranks, impl->rank);
  impl_ = std::move(impl);
}

CommGroup::CommGroup(std::string name, std::vector<int64_t> ranks, int64_t rank)
    : CommGroup(std::move(name), c10::intrusive_ptr<c10d::ProcessGroup>(), std::move(ranks), rank) {}

CommGroup::~CommGroup() = default;
CommGroup::CommGroup(const CommGroup&) = default;
CommGroup& CommGroup::operator=(const CommGroup&) = default;

const std::string& CommGroup::name() const { return impl_->name; }
int64_t CommGroup::rank() const { return impl_->rank; }
int64_t CommGroup::size() const { return static_cast<int64_t>(impl_->ranks.size()); }
const std::vector<int64_t>& CommGroup::ranks() const { return impl_->ranks; }

c10d::ProcessGroup& CommGroup::backend() const {
  if (!impl_->backend) throw ValueError("group '" + impl_->name + "' has no c10d backend");
  return *impl_->backend;
}

const std::string& CommGroup::device_backend() const { return impl_->device_backend; }

CommGroup CommGroup::renamed(std::string name) const {
  CommGroup copy(*this);
  auto impl = std::make_shared<Impl>(*impl_);
  impl->name = std::move(name);
  copy.impl_ = std::move(impl);
  return copy;
}

void CommGroup::all_reduce(at::Tensor& tensor) const {
  if (size() == 1 && !impl_->backend) return;
  std::vector<at::Tensor> tensors{tensor};
  run_collective(*this, *impl_->ledger, "all_reduce", [&] { return backend().allreduce(tensors); });
}

void CommGroup::broadcast(at::Tensor& tensor, int64_t root) const {
  if (root < 0 || root >= size()) {
    throw ValueError("group '" + impl_->name + "': broadcast root " + std::to_string(root) + " is outside [0, " +
                     std::to_string(size()) + ")");
  }
  if (size() == 1 && !impl_->backend) return;
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  run_collective(*this, *impl_->ledger, "broadcast", [&] { return backend().broadcast(tensors, options); });
}

std::vector<at::Tensor> CommGroup::all_gather(const at::Tensor& tensor) const {
  if (size() == 1 && !impl_->backend) return {tensor.clone()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int64_t i = 0; i < size(); ++i) outputs[0].push_back(at::empty_like(tensor));
  std::vector<at::Tensor> inputs{tensor.contiguous()};
  run_collective(*this, *impl_->ledger, "all_gather", [&] { return backend().allgather(outputs, inputs); });
  return outputs[0];
}

void CommGroup::all_gather_into(const at::Tensor& input, at::Tensor& output) const {
  if (output.dim() != 1 || !output.is_contiguous() || output.numel() != size() * input.numel() ||
      output.scalar_type() != input.scalar_type() || output.device() != input.device()) {
    throw ValueError("group '" + impl_->name + "': all_gather_into needs a contiguous 1-D output of " +
                     std::to_string(size()) + " x " + std::to_string(input.numel()) + " elements of " +
                     std::string(c10::toString(input.scalar_type())) + " on " + input.device().str() + " (got " +
                     std::to_string(output.numel()) + " of " + c10::toString(output.scalar_type()) + " on " +
                     output.device().str() + ")");
  }
  at::Tensor in = input.contiguous().view(-1);
  if (size() == 1 && !impl_->backend) {
    output.copy_(in);
    return;
  }
  if (in.is_cuda() && impl_->device_backend == "nccl") {
    run_collective(*this, *impl_->ledger, "all_gather", [&] { return backend()._allgather_base(output, in); });
    return;
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int64_t i = 0; i < size(); ++i) outputs[0].push_back(output.narrow(0, i * in.numel(), in.numel()));
  std::vector<at::Tensor> inputs{in};
  run_collective(*this, *impl_->ledger, "all_gather", [&] { return backend().allgather(outputs, inputs); });
}

void CommGroup::reduce_scatter(const at::Tensor& input, at::Tensor& output) const {
  const int64_t chunk = input.numel() / size();
  if (input.dim() != 1 || chunk * size() != input.numel() || output.numel() != chunk) {
    throw ValueError("group '" + impl_->name + "': reduce_scatter needs a 1-D input of " + std::to_string(size()) +
                     " equal chunks and an output of one chunk (input " + std::to_string(input.numel()) + ", output " +
                     std::to_string(output.numel()) + ")");
  }
  if (size() == 1 && !impl_->backend) {
    output.copy_(input);
    return;
  }
  if (input.is_cuda() && impl_->device_backend == "nccl") {
    at::Tensor in = input.contiguous();
    run_collective(*this, *impl_->ledger, "reduce_scatter", [&] { return backend()._reduce_scatter_base(output, in); });
    return;
  }
  at::Tensor sum = input.clone();
  all_reduce(sum);
  output.copy_(sum.narrow(0, rank() * chunk, chunk));
}

at::Tensor CommGroup::all_to_all(const at::Tensor& input, const std::vector<int64_t>& send_rows,
                                 const std::vector<int64_t>& recv_rows) const {
  const auto sum = [](const std::vector<int64_t>& rows) {
    return std::accumulate(rows.begin(), rows.end(), int64_t{0});
  };
  if (input.dim() < 1 || static_cast<int64_t>(send_rows.size()) != size() ||
      static_cast<int64_t>(recv_rows.size()) != size() || sum(send_rows) != input.size(0)) {
    throw ValueError("group '" + impl_->name + "': all_to_all needs one send and one receive row count per rank (" +
                     std::to_string(size()) + "), the send counts summing to the input's " +
                     std::to_string(input.dim() < 1 ? 0 : input.size(0)) + " rows (got " +
                     std::to_string(send_rows.size()) + " summing to " + std::to_string(sum(send_rows)) + ", and " +
                     std::to_string(recv_rows.size()) + ")");
  }
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = sum(recv_rows);
  if (size() == 1 && !impl_->backend) return input.clone();
  // Gloo's all-to-all has no bfloat16 (it copies bytes only): the bits travel as float16.
  const bool as_half = input.scalar_type() == at::kBFloat16;
  at::Tensor in = input.contiguous();
  if (as_half) in = in.view(at::kHalf);
  at::Tensor out = at::empty(shape, in.options());
  std::vector<int64_t> send = send_rows, recv = recv_rows;
  run_collective(*this, *impl_->ledger, "all_to_all", [&] { return backend().alltoall_base(out, in, recv, send); });
  return as_half ? out.view(input.scalar_type()) : out;
}

void CommGroup::barrier() const {
  if (size() == 1 && !impl_->backend) return;
  run_collective(*this, *impl_->ledger, "barrier", [&] { return backend().barrier(); });
}

CommContext::CommContext(int64_t rank, int64_t world_size, int64_t local_rank,
                         std::vector<std::pair<std::string, int64_t>> mesh, std::vector<CommGroup> groups)
    : rank_(rank),
      world_size_(world_size),
      local_rank_(local_rank),
      mesh_(std::move(mesh)),
      groups_(std::move(groups)) {}

CommContext::~CommContext() = default;

int64_t CommContext::rank() const { return rank_; }
int64_t CommContext::world_size() const { return world_size_; }
int64_t CommContext::local_rank() const { return local_rank_; }
const std::vector<std::pair<std::string, int64_t>>& CommContext::mesh() const { return mesh_; }

bool CommContext::has_group(const std::string& name) const {
  for (const auto& group : groups_) {
    if (group.name() == name) return true;
  }
  return false;
}

const CommGroup& CommContext::group(const std::string& name) const {
  for (const auto& group : groups_) {
    if (group.name() == name) return group;
  }
  const std::string names = join(groups_, ", ", [](const auto& group) { return group.name(); });
  throw ValueError("no process group named '" + name + "'; groups: " + (names.empty() ? "(none)" : names));
}

std::vector<std::string> CommContext::group_names() const {
  std::vector<std::string> names;
  for (const auto& group : groups_) names.push_back(group.name());
  return names;
}

}  // namespace rlcore
