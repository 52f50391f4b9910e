// The hybrid engine's weight swap on a real GPU, in one process (dp 1): the
// rollout's weights are the trainer's, bit for bit, after each swap; a round
// trip leaves the training state bit-identical; the caching allocator's
// measured peak stays within the zero-redundancy bound and below the naive
// manager's in the same run. Two ranks sharing the GPU (Gloo) gather each
// fsdp unit straight into the CUDA bucket, with the weights of gathering apart.
#include "../plugins/infer-native/engine_testing.h"
#include "cuda_testing.h"

#include <future>
#include <map>

#include "engine_offloader.h"
#include "fsdp_engine.h"
#include "hybrid_options.h"
#include "identity_adaptor.h"
#include "sharding_manager_impl.h"

using namespace cuda_test;
using rlcore::hybrid_engine::BucketedShardingManager;
using rlcore::hybrid_engine::SwapMode;

namespace {

// Wide enough that allocator rounding is small next to the bucket.
rlcore::model::ModelConfig wide_config() {
  rlcore::model::ModelConfig config = infer_native_test::tiny_config();
  config.hidden_size = 1024;
  config.head_dim = 256;
  config.intermediate_size = 2816;
  config.validate("wide swap test config");
  return config;
}

struct Engines {
  Engines(const infer_native_test::TempDir& dir, const std::string& device, const rlcore::CommContext* comm = nullptr) {
    rlcore::ComponentContext context;
    context.model_path = dir.str();
    context.device = device;
    context.comm = comm;
    actor = std::make_shared<rlcore::train_fsdp::FsdpEngine>(rlcore::train_fsdp::FsdpOptions(), context);
    rollout =
        std::make_shared<rlcore::infer_native::NativeEngine>(rlcore::infer_native::NativeEngineOptions(), context);
  }
  rlcore::HybridEngines parts() const {
    return {actor,
            rollout,
            std::make_shared<rlcore::hybrid_engine::IdentityAdaptor>(),
            std::make_shared<rlcore::hybrid_engine::EngineOffloader>(),
            {}};
  }
  std::shared_ptr<rlcore::train_fsdp::FsdpEngine> actor;
  std::shared_ptr<rlcore::infer_native::NativeEngine> rollout;
};

std::vector<at::Tensor> training_state(const rlcore::train_fsdp::FsdpEngine& actor) {
  std::vector<at::Tensor> state;
  for (const auto& shard : actor.parameter_shards()) state.push_back(shard.local.clone());
  return state;
}

}  // namespace

TEST_CASE("swaps on the GPU carry the trainer's weights bit for bit and round-trip exactly", "[cuda]") {
  const at::Device gpu = require_gpu();
  infer_native_test::TempDir dir;
  infer_native_test::write_checkpoint(dir.path(), infer_native_test::random_model(wide_config(), 2));
  // A bare `cuda` (the swap benchmark's --device, trainer.device) is the same GPU:
  // fsdp gathers each unit straight into the bucket on cuda:0.
  const std::string device = GENERATE(std::string("cuda:0"), std::string("cuda"));
  INFO("device " << device);
  Engines engines(dir, device);
  BucketedShardingManager manager{rlcore::hybrid_engine::HybridOptions()};
  manager.attach(engines.parts());
  for (int64_t version = 1; version <= 2; ++version) {
    INFO("version " << version);
    const std::vector<at::Tensor> before = training_state(*engines.actor);
    manager.to_rollout(version);
    const auto rollout = engines.rollout->parameters();
    size_t index = 0;
    engines.actor->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
      REQUIRE(index < rollout.size());
      CHECK(rollout[index].first == name);
      CHECK(rollout[index].second.device() == gpu);
      CHECK(rollout[index].second.equal(full.to(rollout[index].second.scalar_type())));
      ++index;
    });
    CHECK(index == rollout.size());
    manager.to_train();
    const std::vector<at::Tensor> after = training_state(*engines.actor);
    for (size_t i = 0; i < before.size(); ++i) CHECK(after[i].equal(before[i]));
    for (const auto& shard : engines.actor->parameter_shards()) shard.local.add_(0.5);  // the next version differs
  }
}

TEST_CASE("the measured device peak of a swap is within the bound and below the naive manager's", "[cuda]") {
  const at::Device gpu = require_gpu();
  infer_native_test::TempDir dir;
  infer_native_test::write_checkpoint(dir.path(), infer_native_test::random_model(wide_config(), 3));
  constexpr int64_t kSlack = 8 << 20;  // caching-allocator block rounding
  std::map<SwapMode, int64_t> peaks;
  int64_t bucket = 0;
  for (const SwapMode mode : {SwapMode::kBucketed, SwapMode::kNaive}) {
    Engines engines(dir, gpu.str());
    const auto made = rlcore::hybrid_engine::make_sharding_manager(rlcore::hybrid_engine::HybridOptions(), mode);
    rlcore::hybrid_engine::HybridShardingManager& manager = *made;
    manager.attach(engines.parts());
    if (mode == SwapMode::kBucketed) bucket = manager.plan().bucket_bytes;
    const rlcore::SwapStats stats = manager.to_rollout(1);
    manager.to_train();
    REQUIRE(stats.measured_per_swap);
    peaks[mode] = stats.measured_peak_bytes;
  }
  INFO("bucketed " << peaks[SwapMode::kBucketed] << " B, naive " << peaks[SwapMode::kNaive] << " B, bucket " << bucket
                   << " B");
  REQUIRE(bucket > (32 << 20));
  // The rollout's storage is the bucket itself (zero-copy adoption); the rest is one gathered unit at a time.
  CHECK(peaks[SwapMode::kBucketed] <= 2 * bucket + kSlack);
  CHECK(peaks[SwapMode::kBucketed] >= bucket - kSlack);
  CHECK(peaks[SwapMode::kNaive] > peaks[SwapMode::kBucketed] + bucket / 2);
}

TEST_CASE("two ranks on one GPU gather each unit straight into the CUDA bucket, the weights of gathering apart",
          "[cuda]") {
  const at::Device gpu = require_gpu();
  infer_native_test::TempDir dir;
  infer_native_test::write_checkpoint(dir.path(), infer_native_test::random_model(wide_config(), 4));
  rlcore::runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::seconds(60));
  struct Seen {
    std::vector<at::Tensor> weights;  // on the host
    bool on_gpu = true;
    int64_t direct = 0, planned_peak = 0, train_and_bucket = 0;
  };
  // Runs on both ranks' threads: no Catch assertions inside (they are not thread-safe).
  auto swap = [&](int64_t rank, bool into) {
    const auto comm = join(store, into ? "into" : "apart", rank, 2, "gloo");
    Engines engines(dir, gpu.str(), comm.get());
    rlcore::hybrid_engine::HybridOptions options;
    options.gather_into_bucket = into;
    BucketedShardingManager manager(options);
    manager.attach(engines.parts());
    const rlcore::TrainMemory memory = engines.actor->memory();
    Seen seen;
    seen.direct = manager.direct_gathers().direct_count();
    seen.train_and_bucket =
        memory.param_bytes + memory.grad_bytes + memory.optimizer_bytes + manager.plan().bucket_bytes;
    seen.planned_peak = manager.to_rollout(1).planned_peak_bytes;
    for (const auto& [name, tensor] : engines.rollout->parameters()) {
      seen.on_gpu = seen.on_gpu && tensor.device() == gpu;
      seen.weights.push_back(tensor.to(at::kCPU));
    }
    manager.to_train();
    return seen;
  };
  std::map<bool, std::pair<Seen, Seen>> runs;  // gather_into_bucket -> (rank 0, rank 1)
  for (const bool into : {true, false}) {
    auto other = std::async(std::launch::async, swap, 1, into);
    runs[into].first = swap(0, into);
    runs[into].second = other.get();
  }
  const Seen& into = runs[true].first;
  const Seen& apart = runs[false].first;
  CHECK(into.direct == wide_config().num_hidden_layers + 2);  // embeddings, layers, head
  CHECK(into.planned_peak == into.train_and_bucket);          // nothing gathered beside the bucket
  CHECK(apart.direct == 0);
  CHECK(apart.planned_peak > apart.train_and_bucket);
  for (const Seen* rank : {&runs[true].first, &runs[true].second, &runs[false].first, &runs[false].second}) {
    CHECK(rank->on_gpu);
    REQUIRE(rank->weights.size() == into.weights.size());
    for (size_t i = 0; i < into.weights.size(); ++i) CHECK(at::equal(rank->weights[i], into.weights[i]));
  }
}
