// The actor pool's parallel layout: a model-parallel trainer gets the mesh
// {dp, pp, tp}, a TP rollout alone {rollout_dp, rollout_tp}, the data-parallel
// size divides out tp x pp, and layouts the pool cannot hold name their keys.
#include "rlcore/core/config/engine_options.h"
#include "rlcore/inference_engine.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"
#include "rlcore/weight_adaptor.h"
#include "workers/parallel.h"
#include "../../common/run_config_testing.h"

using namespace rlcore;
using namespace rlcore::workers;
using rlcore_test::error_of;
using rlcore_test::run_config;

namespace {

// Stand-ins for the engines' declarations (rlcore/parallel_sizes.h), with their keys:
// train-megatron's megatron.* sizes, train-fsdp's Ulysses size, infer-native's TP.
struct MegatronSizes {
  int64_t tp = 1, pp = 1, ep = 1;
};
struct MegatronKeys {
  MegatronSizes megatron;
};
struct OneSize {
  int64_t size = 1;
};

template <class Interface, class Options>
void add_engine(PluginRegistrar& registrar, const std::string& name, const OptionsSchema<Options>& schema,
                ParallelSizes (*sizes)(const Options&)) {
  registrar.add<Interface>(name, "stand-in", schema, [](const Options&) { return std::shared_ptr<Interface>(); });
  registrar.add_parallel_sizes<Interface>(name, schema, sizes);
}

Registry engines() {
  Registry registry;
  PluginRegistrar registrar(registry, PluginOrigin{"parallel_test", "0.0.0", ""});
  OptionsSchema<MegatronSizes> megatron;
  megatron.key("tensor_model_parallel_size", &MegatronSizes::tp, "TP")
      .key("pipeline_model_parallel_size", &MegatronSizes::pp, "PP")
      .key("expert_model_parallel_size", &MegatronSizes::ep, "EP");
  OptionsSchema<MegatronKeys> megatron_keys;
  megatron_keys.section("megatron", &MegatronKeys::megatron, megatron);
  add_engine<TrainEngine>(
      registrar, "megatron", megatron_keys, +[](const MegatronKeys& keys) {
        ParallelSizes sizes;
        sizes.tp = {keys.megatron.tp, "megatron.tensor_model_parallel_size"};
        sizes.pp = {keys.megatron.pp, "megatron.pipeline_model_parallel_size"};
        sizes.ep = {keys.megatron.ep, "megatron.expert_model_parallel_size"};
        return sizes;
      });
  add_engine<TrainEngine>(
      registrar, "fsdp", OptionsSchema<OneSize>().key("ulysses_sequence_parallel_size", &OneSize::size, "SP"),
      +[](const OneSize& keys) {
        ParallelSizes sizes;
        sizes.sp = {keys.size, "ulysses_sequence_parallel_size"};
        return sizes;
      });
  add_engine<InferenceEngine>(
      registrar, "native", OptionsSchema<OneSize>().key("tensor_model_parallel_size", &OneSize::size, "TP"),
      +[](const OneSize& keys) {
        ParallelSizes sizes;
        sizes.tp = {keys.size, "tensor_model_parallel_size"};
        return sizes;
      });
  return registry;
}

workers::ActorParallelism parallelism(const std::string& yaml) {
  return workers::actor_parallelism(run_config(yaml).actor_rollout_ref, engines());
}

std::string mesh_text(const runtime::MeshShape& mesh) {
  std::string text;
  for (const runtime::MeshDim& dim : mesh) text += dim.name + "=" + std::to_string(dim.size) + " ";
  return text;
}

}  // namespace

TEST_CASE("megatron tp x pp sets the mesh {dp, pp, tp} and divides the data-parallel size") {
  const workers::ActorParallelism p = parallelism(R"(
actor_rollout_ref:
  actor: {strategy: megatron, megatron: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2}}
)");
  CHECK(p.train_tp == 2);
  CHECK(p.train_pp == 2);
  CHECK(p.rollout_tp == 1);
  CHECK(workers::actor_data_parallel_size(p, 8) == 2);
  CHECK(mesh_text(workers::actor_pool_mesh(p, 8)) == "dp=2 pp=2 tp=2 ");
  CHECK_THAT(error_of<ConfigError>([&] { workers::actor_data_parallel_size(p, 6); }),
             Catch::Contains("tensor_model_parallel_size = 2") && Catch::Contains("6 workers"));
}

TEST_CASE("megatron expert parallelism factors dp into {edp, ep}; ep must divide dp") {
  const workers::ActorParallelism p = parallelism(R"(
actor_rollout_ref:
  actor: {strategy: megatron, megatron: {tensor_model_parallel_size: 2, expert_model_parallel_size: 2}}
)");
  CHECK(p.train_ep == 2);
  CHECK(p.model_parallel());
  const runtime::MeshShape mesh = workers::actor_pool_mesh(p, 8);  // dp 4 = edp 2 x ep 2
  CHECK(mesh_text(mesh) == "dp=4 pp=1 tp=2 ");
  REQUIRE(mesh[0].factors.size() == 2);
  CHECK(mesh_text(mesh[0].factors) == "edp=2 ep=2 ");
  CHECK(runtime::mesh_group_names(mesh) == std::vector<std::string>{"dp", "edp", "ep", "pp", "tp"});
  // Pool rank 5 = dp 2 (edp 1, ep 0), tp 1: its ep peers are dp 2 and 3, its edp peers dp 0 and 2 (same tp rank).
  CHECK(runtime::mesh_group_ranks(mesh, "ep", 5) == std::vector<int64_t>{5, 7});
  CHECK(runtime::mesh_group_ranks(mesh, "edp", 5) == std::vector<int64_t>{1, 5});
  CHECK(runtime::mesh_group_ranks(mesh, "dp", 5) == std::vector<int64_t>{1, 3, 5, 7});
  CHECK(runtime::mesh_from_json(runtime::mesh_to_json(mesh))[0].factors.size() == 2);
  CHECK_THAT(error_of<ConfigError>([&] { workers::actor_pool_mesh(p, 6); }),
             Catch::Contains("expert_model_parallel_size = 2 must divide the data-parallel size (3"));
  runtime::MeshShape bad = mesh;
  bad[0].factors[1].size = 3;
  CHECK_THAT(error_of<ValueError>([&] { runtime::validate_mesh(bad, 8); }),
             Catch::Contains("'dp' (4) is not the product of its factors (6)"));
}

TEST_CASE("Ulysses sets the mesh {dp, sp}; a group's ranks are one replica; it takes no model-parallel layout") {
  const workers::ActorParallelism p = parallelism("actor_rollout_ref: {actor: {ulysses_sequence_parallel_size: 2}}");
  CHECK(p.train_sp == 2);
  CHECK_FALSE(p.model_parallel());
  CHECK(workers::actor_data_parallel_size(p, 4) == 2);
  const runtime::MeshShape mesh = workers::actor_pool_mesh(p, 4);
  CHECK(mesh_text(mesh) == "dp=2 sp=2 ");
  CHECK(runtime::mesh_group_ranks(mesh, "sp", 2) == std::vector<int64_t>{2, 3});
  // Rank 3 is the second replica's second rank: it computes, rank 2 hands the outputs back.
  CHECK(runtime::default_mesh_rank(mesh, 3).dp_rank == 1);
  CHECK_FALSE(runtime::default_mesh_rank(mesh, 3).collect);
  CHECK(runtime::default_mesh_rank(mesh, 2).collect);
  CHECK_THAT(error_of<ConfigError>([&] { workers::actor_data_parallel_size(p, 3); }),
             Catch::Contains("ulysses_sequence_parallel_size = 2 must divide the 3 workers"));
  CHECK_THAT(error_of<ConfigError>([&] {
               parallelism(
                   "actor_rollout_ref: {actor: {ulysses_sequence_parallel_size: 2}, "
                   "rollout: {tensor_model_parallel_size: 2}}");
             }),
             Catch::Contains("tensor-parallel rollout"));
}

TEST_CASE("a TP rollout alone keeps the trainer over the whole pool; with megatron it must match its TP") {
  const workers::ActorParallelism rollout_only =
      parallelism("actor_rollout_ref: {rollout: {tensor_model_parallel_size: 2}}");
  CHECK(workers::actor_data_parallel_size(rollout_only, 4) == 4);
  CHECK(mesh_text(workers::actor_pool_mesh(rollout_only, 4)) == "rollout_dp=2 rollout_tp=2 ");
  CHECK(workers::actor_pool_mesh(parallelism("{}"), 4).empty());
  const workers::ActorParallelism mismatch = parallelism(R"(
actor_rollout_ref:
  actor: {strategy: megatron, megatron: {tensor_model_parallel_size: 2}}
  rollout: {tensor_model_parallel_size: 4}
)");
  CHECK_THAT(error_of<ConfigError>([&] { workers::actor_pool_mesh(mismatch, 8); }),
             Catch::Contains("rollout.tensor_model_parallel_size (4) must be 1 or") &&
                 Catch::Contains("megatron.tensor_model_parallel_size (2)"));
}

TEST_CASE("an engine that declares no parallel sizes (a plugin built against SDK 6.1) runs with all of them 1") {
  Registry registry;
  PluginRegistrar registrar(registry, PluginOrigin{"parallel_test", "0.0.0", ""});
  const auto none = [](const OneSize&) { return std::shared_ptr<TrainEngine>(); };
  registrar.add<TrainEngine>("fsdp", "stand-in", OptionsSchema<OneSize>(), none);
  registrar.add<InferenceEngine>("native", "stand-in", OptionsSchema<OneSize>(),
                                 [](const OneSize&) { return std::shared_ptr<InferenceEngine>(); });
  const workers::ActorParallelism p = workers::actor_parallelism(run_config("{}").actor_rollout_ref, registry);
  CHECK(p.train_tp * p.train_pp * p.train_ep * p.train_sp * p.rollout_tp == 1);
  CHECK(workers::actor_pool_mesh(p, 4).empty());
}

TEST_CASE("weight_adaptor: the one named like the actor's engine when registered, else identity, unless set") {
  Registry registry;
  PluginRegistrar registrar(registry, PluginOrigin{"parallel_test", "0.0.0", ""});
  const auto none = [](const OneSize&) { return std::shared_ptr<WeightAdaptor>(); };
  registrar.add<WeightAdaptor>("identity", "stand-in", OptionsSchema<OneSize>(), none);
  CHECK(config::weight_adaptor_for(run_config("{}").actor_rollout_ref, registry) == "identity");
  const auto megatron = run_config("actor_rollout_ref: {actor: {strategy: megatron}}").actor_rollout_ref;
  CHECK(config::weight_adaptor_for(megatron, registry) == "identity");  // no adaptor of its name yet
  registrar.add<WeightAdaptor>("megatron", "stand-in", OptionsSchema<OneSize>(), none);
  CHECK(config::weight_adaptor_for(megatron, registry) == "megatron");
  CHECK(config::weight_adaptor_for(run_config(R"(
actor_rollout_ref:
  actor: {strategy: megatron}
  hybrid_engine: {weight_adaptor: custom}
)")
                                       .actor_rollout_ref,
                                   registry) == "custom");
}
