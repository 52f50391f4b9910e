// Process groups with a device backend on a real GPU: NCCL for one rank, and
// two ranks sharing the one GPU through Gloo (NCCL refuses a shared device).
// The ranks are threads of this process, rendezvousing through a local store.
#include "cuda_testing.h"

#include <future>

using namespace cuda_test;

namespace {

// all_reduce, broadcast and all_gather of CUDA tensors; returns what rank saw.
std::vector<double> collectives(const rlcore::CommContext& comm, const at::Device& gpu) {
  const rlcore::CommGroup& world = comm.world();
  at::Tensor sum = at::full({4}, static_cast<double>(comm.rank() + 1), at::TensorOptions().device(gpu));
  world.all_reduce(sum);
  at::Tensor root = at::full({2}, comm.rank() == 0 ? 7.0 : -1.0, at::TensorOptions().device(gpu));
  world.broadcast(root, 0);
  const std::vector<at::Tensor> gathered =
      world.all_gather(at::full({3}, static_cast<double>(comm.rank()), at::TensorOptions().device(gpu)));
  // Into a view of a larger tensor, as into a swap's bucket (NCCL: one all-gather into it).
  at::Tensor flat = at::zeros({world.size() * 2 + 1}, at::TensorOptions().device(gpu));
  at::Tensor into = flat.narrow(0, 1, world.size() * 2);
  world.all_gather_into(at::full({2}, static_cast<double>(comm.rank() + 1), into.options()), into);
  CHECK(sum.device() == gpu);
  std::vector<double> seen = {sum.sum().item<double>(), root.sum().item<double>()};
  for (const at::Tensor& t : gathered) seen.push_back(t.sum().item<double>());
  seen.push_back(flat.to(at::kDouble).sum().item<double>());
  return seen;
}

}  // namespace

TEST_CASE("one rank's NCCL group reduces CUDA tensors", "[cuda]") {
  const at::Device gpu = require_gpu();
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  const auto comm = join(store, "nccl1", 0, 1, "nccl");
  CHECK(collectives(*comm, gpu) == std::vector<double>{4.0, 14.0, 0.0, 2.0});
  // Host tensors of the same group still go through Gloo.
  at::Tensor host = at::ones({3});
  comm->world().all_reduce(host);
  CHECK(host.sum().item<double>() == 3.0);
}

TEST_CASE("two ranks on one GPU reduce CUDA tensors through Gloo", "[cuda]") {
  const at::Device gpu = require_gpu();
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  auto run = [&](int64_t rank) {
    const auto comm = join(store, "gloo2", rank, 2, "gloo");
    return collectives(*comm, gpu);
  };
  auto other = std::async(std::launch::async, run, 1);
  const std::vector<double> mine = run(0);
  const std::vector<double> theirs = other.get();
  // (1 + 2) x 4, 7 x 2, ranks 0 and 1 x 3, (1 + 2) x 2 gathered into the view
  const std::vector<double> expected = {12.0, 14.0, 0.0, 3.0, 6.0};
  CHECK(mine == expected);
  CHECK(theirs == expected);
}
