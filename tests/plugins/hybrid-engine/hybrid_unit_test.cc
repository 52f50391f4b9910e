// The hybrid engine in one process (dp 1): bucket planning, the identity
// adaptor, offload keys and aliases, zero-copy adoption by the native engine,
// the RAII scope, mode errors and stale-version detection.
#include "../train-fsdp/fsdp_testing.h"

#include "engine_offloader.h"
#include "fsdp_engine.h"
#include "hybrid_options.h"
#include "identity_adaptor.h"
#include "native_engine.h"
#include "rlcore/config_node.h"
#include "rlcore/error.h"
#include "sharding_manager_impl.h"
#include "swap_plan.h"

using namespace fsdp_test;
using rlcore::ValueError;
using rlcore::WeightMeta;
using rlcore::hybrid_engine::BucketedShardingManager;

namespace {

struct Engines {
  explicit Engines(const rlcore::model::ModelConfig& config = tiny_config()) {
    write_tiny_checkpoint(dir.path(), config);
    rlcore::ComponentContext context;
    context.model_path = dir.str();
    actor = std::make_shared<rlcore::train_fsdp::FsdpEngine>(rlcore::train_fsdp::FsdpOptions(), context);
    rollout =
        std::make_shared<rlcore::infer_native::NativeEngine>(rlcore::infer_native::NativeEngineOptions(), context);
  }
  rlcore::HybridEngines parts(std::shared_ptr<rlcore::InferenceEngine> engine = nullptr) const {
    return {actor,
            engine ? engine : rollout,
            std::make_shared<rlcore::hybrid_engine::IdentityAdaptor>(),
            std::make_shared<rlcore::hybrid_engine::EngineOffloader>(),
            {}};
  }
  TempDir dir;
  std::shared_ptr<rlcore::train_fsdp::FsdpEngine> actor;
  std::shared_ptr<rlcore::infer_native::NativeEngine> rollout;
};

// Loads weights but keeps reporting the version it had: a stale rollout.
class StaleEngine final : public rlcore::InferenceEngine {
 public:
  explicit StaleEngine(std::shared_ptr<rlcore::InferenceEngine> inner) : inner_(std::move(inner)) {}
  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts,
                                    const rlcore::SamplingParams& sampling) override {
    return inner_->generate(prompts, sampling);
  }
  std::vector<WeightMeta> weight_meta() const override { return inner_->weight_meta(); }
  void load_weights(const rlcore::NamedTensorList& weights, int64_t) override { inner_->load_weights(weights, 0); }
  int64_t weight_version() const override { return inner_->weight_version(); }
  void sleep() override { inner_->sleep(); }
  void wake_up() override { inner_->wake_up(); }

 private:
  std::shared_ptr<rlcore::InferenceEngine> inner_;
};

}  // namespace

TEST_CASE("the bucket plan is exactly the rollout's weights, packed without padding", "[hybrid][plan]") {
  const std::vector<WeightMeta> meta = {
      {"a", {3, 5}, at::kBFloat16}, {"b", {7}, at::kBFloat16}, {"c", {2, 2}, at::kFloat}};
  const auto plan = rlcore::hybrid_engine::plan_swap(meta, rlcore::hybrid_engine::IdentityAdaptor(), {});
  CHECK(plan.tensors[1].byte_offset == 30);
  CHECK(plan.tensors[2].byte_offset == 44);  // 44 is already 4-byte aligned: no padding
  CHECK(plan.bucket_bytes == 30 + 14 + 16);
  CHECK(plan.targets_of.at("b") == std::vector<size_t>{1});
  const at::Tensor bucket = at::zeros({plan.bucket_bytes}, at::kByte);
  const auto views = rlcore::hybrid_engine::bucket_views(plan, bucket);
  views[2].fill_(1.5);
  CHECK(views[2].sizes() == at::IntArrayRef({2, 2}));
  CHECK(views[2].scalar_type() == at::kFloat);
  CHECK(bucket.narrow(0, 44, 16).view(at::kFloat).eq(1.5).all().item<bool>());
  CHECK(bucket.narrow(0, 0, 44).eq(0).all().item<bool>());
}

TEST_CASE("the identity adaptor converts dtype and refuses what it cannot map", "[hybrid][adaptor]") {
  const rlcore::hybrid_engine::IdentityAdaptor adaptor;
  const WeightMeta meta{"model.norm.weight", {4}, at::kBFloat16};
  at::Tensor out = at::empty({4}, at::kBFloat16);
  const at::Tensor full = at::tensor({1.0f, 2.5f, -3.0f, 0.125f});
  adaptor.convert(meta, {}, {full}, out);
  CHECK(at::equal(out, full.to(at::kBFloat16)));
  CHECK_THAT(error_of<ValueError>([&] { adaptor.convert(meta, {}, {at::zeros({5})}, out); }),
             Catch::Contains("model.norm.weight") && Catch::Contains("[5]"));
}

TEST_CASE("the identity adaptor re-slices by tp rank: column dim 0, row dim 1, replicated whole",
          "[hybrid][adaptor][tp]") {
  const rlcore::hybrid_engine::IdentityAdaptor adaptor;
  const at::Tensor full = at::arange(24, at::kFloat).view({4, 6});
  for (int64_t rank = 0; rank < 2; ++rank) {
    rlcore::RolloutLayout layout;
    layout.tp_size = 2;
    layout.tp_rank = rank;
    INFO("tp rank " << rank);
    const WeightMeta column{"model.layers.0.mlp.up_proj.weight", {2, 6}, at::kFloat};
    CHECK(adaptor.sources(column, layout) == std::vector<std::string>{column.name});
    at::Tensor out = at::empty({2, 6}, at::kFloat);
    adaptor.convert(column, layout, {full}, out);
    CHECK(at::equal(out, full.slice(0, 2 * rank, 2 * rank + 2)));
    const WeightMeta row{"model.layers.0.mlp.down_proj.weight", {4, 3}, at::kBFloat16};
    out = at::empty({4, 3}, at::kBFloat16);
    adaptor.convert(row, layout, {full}, out);
    CHECK(at::equal(out, full.slice(1, 3 * rank, 3 * rank + 3).to(at::kBFloat16)));
    const WeightMeta replicated{"model.embed_tokens.weight", {4, 6}, at::kFloat};
    out = at::empty({4, 6}, at::kFloat);
    adaptor.convert(replicated, layout, {full}, out);
    CHECK(at::equal(out, full));
    // A rollout shard shape that is not this layout's slice is refused, naming the tensor and layout.
    out = at::empty({4, 6}, at::kFloat);
    CHECK_THAT(error_of<ValueError>([&] {
                 adaptor.convert({column.name, {4, 6}, at::kFloat}, layout, {full}, out);
               }),
               Catch::Contains(column.name) && Catch::Contains("of 2"));
  }
}

TEST_CASE("offload keys and their verl-style aliases select the same state", "[hybrid][options]") {
  const auto schema = rlcore::hybrid_engine::hybrid_options_schema();
  using rlcore::OffloadSet;
  auto set_of = [&](const std::string& yaml) {
    return rlcore::hybrid_engine::offload_set(schema.parse(rlcore::ConfigNode::parse(yaml, "test")));
  };
  CHECK(set_of("{}") == OffloadSet::kNone);
  CHECK(set_of("{offload_train_param: true, offload_train_optimizer: true}") ==
        (OffloadSet::kParams | OffloadSet::kOptimizer));
  CHECK(set_of("{param_offload: true, grad_offload: true, optimizer_offload: true}") == OffloadSet::kAll);
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { set_of("{offload_params: true}"); }),
             Catch::Contains("offload_params"));
}

TEST_CASE("the native engine adopts matching tensors zero-copy and copies the rest", "[hybrid][infer-native]") {
  Engines engines;
  auto& engine = *engines.rollout;
  engine.sleep();
  engine.wake_up_unallocated();
  CHECK(engine.bytes_held() == 0);
  rlcore::NamedTensorList weights;
  for (const auto& meta : engine.weight_meta()) weights.emplace_back(meta.name, at::randn(meta.shape, meta.dtype));
  // A transposed (non-contiguous) tensor cannot be adopted: it is copied.
  const auto& first = weights.front();
  REQUIRE(first.second.dim() == 2);
  const at::Tensor transposed = first.second.t().contiguous().t();
  weights.front().second = transposed;
  engine.load_weights(weights, 3);
  const auto params = engine.parameters();
  CHECK(params.front().second.data_ptr() != transposed.data_ptr());
  CHECK(at::equal(params.front().second, transposed));
  for (size_t i = 1; i < params.size(); ++i) CHECK(params[i].second.data_ptr() == weights[i].second.data_ptr());
  int64_t bytes = 0;
  for (const auto& [name, tensor] : weights) bytes += tensor.numel() * tensor.element_size();
  CHECK(engine.bytes_held() == bytes);
  CHECK(engine.weight_version() == 3);
  // Reloading into an adopted slot with a copy must not write into the caller's tensor.
  const at::Tensor adopted = weights[1].second.clone();
  engine.load_weights({{weights[1].first, at::zeros(weights[1].second.sizes(), at::kBFloat16)}}, 4);
  CHECK(at::equal(weights[1].second, adopted));
  CHECK(engine.parameters()[1].second.eq(0).all().item<bool>());
}

TEST_CASE("bucketed claims the bounded swap memory capability and naive does not", "[hybrid][capabilities]") {
  CHECK(rlcore::capabilities_of<BucketedShardingManager>() == std::vector<std::string>{"bounded_swap_memory"});
  CHECK(rlcore::capabilities_of<rlcore::hybrid_engine::NaiveShardingManager>().empty());
  const auto naive = rlcore::hybrid_engine::make_sharding_manager({}, rlcore::hybrid_engine::SwapMode::kNaive);
  const auto bucketed = rlcore::hybrid_engine::make_sharding_manager({}, rlcore::hybrid_engine::SwapMode::kBucketed);
  CHECK_FALSE(rlcore::supports<rlcore::BoundedSwapMemory>(*naive));
  CHECK(rlcore::supports<rlcore::BoundedSwapMemory>(*bucketed));
}

TEST_CASE("the scope swaps in and out, also on an exception, and modes are enforced", "[hybrid][scope]") {
  Engines engines;
  BucketedShardingManager manager({});
  manager.attach(engines.parts());
  CHECK(engines.rollout->asleep());
  CHECK_THAT(error_of<ValueError>([&] { manager.to_train(); }), Catch::Contains("not in rollout"));
  try {
    rlcore::RolloutScope scope(manager, 5);
    CHECK(manager.in_rollout());
    CHECK(engines.rollout->weight_version() == 5);
    CHECK_THAT(error_of<ValueError>([&] { manager.to_rollout(6); }), Catch::Contains("already in rollout"));
    throw std::runtime_error("generation failed");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(manager.in_rollout());
  CHECK(engines.rollout->asleep());
  CHECK(engines.rollout->bytes_held() == 0);
}

TEST_CASE("a rollout that does not take the swapped version is an error, never silent", "[hybrid][version]") {
  Engines engines;
  BucketedShardingManager manager({});
  manager.attach(engines.parts(std::make_shared<StaleEngine>(engines.rollout)));
  CHECK_THAT(error_of<ValueError>([&] { manager.to_rollout(9); }),
             Catch::Contains("weight version 0") && Catch::Contains("version 9"));
}

TEST_CASE("consecutive swaps through the reused bucket range carry each version's weights", "[hybrid][bucket]") {
  // Wide enough that the rollout bucket is its own mapping (>= 32 MiB), which lazy_free keeps.
  rlcore::model::ModelConfig config = tiny_config();
  config.hidden_size = 1024;
  config.head_dim = 256;
  config.intermediate_size = 2816;
  Engines engines(config);
  for (const std::string release : {"lazy_free", "unmap"}) {
    INFO("bucket_release " << release);
    rlcore::hybrid_engine::HybridOptions options;
    options.bucket_release = release;
    BucketedShardingManager manager(options);
    manager.attach(engines.parts());
    REQUIRE(manager.plan().bucket_bytes >= (int64_t{32} << 20));
    const void* first_range = nullptr;
    for (int64_t version = 1; version <= 3; ++version) {
      manager.to_rollout(version);
      const auto rollout = engines.rollout->parameters();
      if (version == 1) first_range = rollout.front().second.data_ptr();
      if (release == "lazy_free") CHECK(rollout.front().second.data_ptr() == first_range);
      size_t index = 0;
      engines.actor->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
        REQUIRE(index < rollout.size());
        CHECK(rollout[index].first == name);
        CHECK(rollout[index].second.equal(full.to(rollout[index].second.scalar_type())));
        ++index;
      });
      CHECK(index == rollout.size());
      manager.to_train();
      // The next version: every training value changes.
      for (const auto& shard : engines.actor->parameter_shards()) shard.local.add_(0.5);
    }
  }
}

namespace {

rlcore::GathersIntoBuffers::Gather gather_of(std::vector<std::string> names, std::vector<int64_t> offsets,
                                             std::vector<int64_t> numels, int64_t numel) {
  return {std::move(names), std::move(offsets), std::move(numels), numel};
}

// A fused target built from two sources, as the megatron adaptor's are.
class FusingAdaptor final : public rlcore::WeightAdaptor {
 public:
  std::vector<std::string> sources(const WeightMeta& target, const rlcore::RolloutLayout&) const override {
    if (target.name == "qk") return {"q", "k"};
    return {target.name};
  }
  void convert(const WeightMeta&, const rlcore::RolloutLayout&, const std::vector<at::Tensor>&,
               at::Tensor&) const override {}
};

}  // namespace

TEST_CASE("a gather lands in the bucket only where its buffer is exactly its tensors there", "[hybrid][plan]") {
  using rlcore::hybrid_engine::plan_direct_gathers;
  // a, b, c: bf16 at bytes 0, 30, 44; d: fp32 at 52 (4-aligned after c's 8 bytes); 68 bytes in all.
  const std::vector<WeightMeta> meta = {
      {"a", {3, 5}, at::kBFloat16}, {"b", {7}, at::kBFloat16}, {"c", {2, 2}, at::kBFloat16}, {"d", {4}, at::kFloat}};
  const auto plan = rlcore::hybrid_engine::plan_swap(meta, rlcore::hybrid_engine::IdentityAdaptor(), {});
  REQUIRE(plan.tensors[3].byte_offset == 52);
  REQUIRE(plan.bucket_bytes == 68);

  // a and b as one buffer; c padded by 2 elements spills onto d, which a later gather writes;
  // d padded would run past the bucket's end.
  auto direct = plan_direct_gathers(plan, {gather_of({"a", "b"}, {0, 15}, {15, 7}, 22), gather_of({"c"}, {0}, {4}, 6),
                                           gather_of({"d"}, {0}, {4}, 6)});
  REQUIRE(direct.gathers.size() == 3);
  CHECK(direct.gathers[0].byte_offset == 0);
  CHECK(direct.gathers[0].dtype == at::kBFloat16);
  CHECK(direct.gathers[1].byte_offset == 44);
  CHECK_FALSE(direct.gathers[2].direct());
  CHECK(direct.direct_count() == 2);
  // Unpadded, d fits exactly.
  direct = plan_direct_gathers(plan, {gather_of({"d"}, {0}, {4}, 4)});
  CHECK(direct.gathers[0].byte_offset == 52);
  CHECK(direct.gathers[0].dtype == at::kFloat);

  // Padding that would overwrite a tensor an earlier gather already wrote.
  direct = plan_direct_gathers(plan, {gather_of({"d"}, {0}, {4}, 4), gather_of({"c"}, {0}, {4}, 6)});
  CHECK(direct.gathers[0].direct());
  CHECK_FALSE(direct.gathers[1].direct());
  // Other order, other spacing, mixed dtypes, a wrong size, a name the rollout does not have.
  CHECK_FALSE(plan_direct_gathers(plan, {gather_of({"b", "a"}, {0, 7}, {7, 15}, 22)}).gathers[0].direct());
  CHECK_FALSE(plan_direct_gathers(plan, {gather_of({"a", "b"}, {0, 16}, {15, 7}, 24)}).gathers[0].direct());
  CHECK_FALSE(plan_direct_gathers(plan, {gather_of({"c", "d"}, {0, 4}, {4, 4}, 8)}).gathers[0].direct());
  CHECK_FALSE(plan_direct_gathers(plan, {gather_of({"b"}, {0}, {8}, 8)}).gathers[0].direct());
  CHECK_FALSE(plan_direct_gathers(plan, {gather_of({"lm_head.weight"}, {0}, {4}, 4)}).gathers[0].direct());
  CHECK(plan_direct_gathers(plan, {}).direct_count() == 0);

  // A target built from several sources is never a plain copy of one.
  const auto fused =
      rlcore::hybrid_engine::plan_swap({{"qk", {4}, at::kFloat}, {"v", {2}, at::kFloat}}, FusingAdaptor(), {});
  direct = plan_direct_gathers(fused, {gather_of({"q"}, {0}, {2}, 2), gather_of({"k", "v"}, {0, 2}, {2, 2}, 4)});
  CHECK(direct.direct_count() == 0);
}

TEST_CASE("infer-native lays out every fsdp unit as the trainer does; gather_into_bucket false plans none",
          "[hybrid][gather_into]") {
  Engines engines;
  rlcore::hybrid_engine::HybridOptions apart;
  apart.gather_into_bucket = false;
  BucketedShardingManager into_manager({});
  BucketedShardingManager apart_manager(apart);
  into_manager.attach(engines.parts());
  apart_manager.attach(engines.parts());
  // Planned for every unit (the swap tests over two ranks gather into them; one rank visits its own shards).
  CHECK(into_manager.direct_gathers().direct_count() == tiny_config().num_hidden_layers + 2);
  CHECK(apart_manager.direct_gathers().direct_count() == 0);
  rlcore::hybrid_engine::NaiveShardingManager naive({});
  naive.attach(engines.parts());
  CHECK(naive.direct_gathers().direct_count() == 0);
}
