// The controller <-> worker contract: method names as both sides spell them,
// arguments and replies typed on both sides and read back exactly as written.
#include <type_traits>

#include "workers/worker_common.h"
#include "workers/worker_contract.h"
#include "../../common/run_config_testing.h"

using namespace rlcore;
using namespace rlcore::workers;

namespace contract_test {

// What the wire does to a value: its JSON text, parsed back.
template <typename T>
T through_the_wire(const T& value) {
  return nlohmann::json::parse(nlohmann::json(value).dump()).get<T>();
}

// Whether the controller can call method M with arguments A (it compiles).
template <typename M, typename A, typename = void>
struct Callable : std::false_type {};
template <typename M, typename A>
struct Callable<M, A,
                std::void_t<decltype(workers::call(std::declval<runtime::WorkerGroup&>(), std::declval<const M&>(),
                                                   Batch(), std::declval<const A&>()))>> : std::true_type {};

}  // namespace contract_test

using contract_test::Callable;
using contract_test::through_the_wire;

TEST_CASE("a method is registered by its name and called as role.name", "[contract]") {
  CHECK(actor_methods::kUpdateActor.qualified() == "actor.update_actor");
  CHECK(std::string(actor_methods::kUpdateActor.name) == "update_actor");
  CHECK(critic_methods::kUpdateCritic.qualified() == "critic.update_critic");
  CHECK(actor_methods::kSaveCheckpoint.qualified() == "actor.save_checkpoint");
  CHECK(critic_methods::kSaveCheckpoint.qualified() == "critic.save_checkpoint");
  CHECK(rollout_methods::kStream.qualified() == "rollout.stream");
}

TEST_CASE("a call with another method's arguments does not compile", "[contract]") {
  STATIC_REQUIRE(Callable<decltype(actor_methods::kUpdateActor), UpdateActorArgs>::value);
  STATIC_REQUIRE_FALSE(Callable<decltype(actor_methods::kUpdateActor), UpdateCriticArgs>::value);
  STATIC_REQUIRE(Callable<decltype(critic_methods::kUpdateCritic), UpdateCriticArgs>::value);
  STATIC_REQUIRE_FALSE(Callable<decltype(actor_methods::kSyncWeights), DirArgs>::value);
  STATIC_REQUIRE(std::is_same_v<decltype(actor_methods::kGenerate), decltype(rollout_methods::kGenerate)>);
}

TEST_CASE("a handler gets the arguments the controller sent and its reply reads back typed", "[contract]") {
  GenerateArgs sent;
  sent.sampling.greedy = true;
  sent.sampling.temperature = 0.7;
  sent.sampling.top_k = 5;
  sent.sampling.top_p = 0.9;
  sent.sampling.seed = 123;
  sent.sampling.validation = true;
  sent.limits = {17, {2, 3}, 9};
  GenerateArgs received;
  const rlcore::runtime::Method method =
      handle(actor_methods::kGenerate, [&received](const Batch& prompts, const GenerateArgs& args) {
        received = args;
        return Replied<GenerateReply>{prompts, GenerateReply{41, GenerationStats{1, 2, 3, 4, 5, 6}}};
      });
  Batch prompts(2);
  prompts.set("x", at::arange(2));
  const runtime::MethodResult result = method(prompts, nlohmann::json::parse(nlohmann::json(sent).dump()));

  CHECK(received.sampling.greedy);
  CHECK(received.sampling.temperature == 0.7);
  CHECK(received.sampling.top_k == 5);
  CHECK(received.sampling.top_p == 0.9);
  CHECK(received.sampling.seed == 123);
  CHECK(received.sampling.validation);
  CHECK(received.limits.max_tokens == 17);
  CHECK(received.limits.stop_token_ids == std::vector<int32_t>{2, 3});
  CHECK(received.limits.pad_token_id == 9);
  CHECK(result.batch.size() == 2);
  const GenerateReply reply = reply_of(actor_methods::kGenerate, runtime::RankReply{0, result.value, Batch()});
  CHECK(reply.weight_version == 41);
  REQUIRE(reply.stats);
  CHECK(reply.stats->joins == 6);
  CHECK(reply.stats->max_waiting == 4);
  CHECK_FALSE(through_the_wire(GenerateReply{7, std::nullopt}).stats);
}

TEST_CASE("arguments missing a key are refused naming it", "[contract]") {
  const rlcore::runtime::Method method =
      handle(actor_methods::kUpdateActor, [](const Batch&, const UpdateActorArgs&) { return Replied<UpdateReply>{}; });
  CHECK_THROWS_WITH(method(Batch(), nlohmann::json{{"temperature", 1.0}}), Catch::Contains("mini_batch_rows"));
  CHECK_THROWS_WITH(nlohmann::json::object().get<GenerateReply>(), Catch::Contains("weight_version"));
}

TEST_CASE("an update's reply names the learning rate, gradient norm and engine metrics for its role", "[contract]") {
  UpdateReply reply = rlcore::workers::update_reply(
      {{"lr", 1e-6}, {"grad_norm", 0.5}, {"critic/vf_loss", 0.25}, {"moe_aux_loss", 2.5}});
  CHECK(reply.engine_metrics == std::map<std::string, double>{{"moe_aux_loss", 2.5}});
  std::map<std::string, double> metrics;
  through_the_wire(reply).add_to(metrics, "critic");
  CHECK(metrics ==
        std::map<std::string, double>{
            {"critic/vf_loss", 0.25}, {"critic/lr", 1e-6}, {"critic/grad_norm", 0.5}, {"critic/moe_aux_loss", 2.5}});

  reply.has_grad_norm = false;
  metrics.clear();
  through_the_wire(reply).add_to(metrics, "actor");
  CHECK(metrics.count("actor/grad_norm") == 0);
  CHECK(metrics.at("actor/lr") == 1e-6);
  CHECK(metrics.at("actor/moe_aux_loss") == 2.5);
}

TEST_CASE("sync_weights' reply reads back as written, through the wire's JSON text", "[contract]") {
  SwapStats to_rollout;
  to_rollout.seconds = 0.5;
  to_rollout.gather_s = 0.125;
  to_rollout.bytes_moved = 1 << 20;
  to_rollout.bytes_gathered = 4096;
  to_rollout.planned_peak_bytes = 3000;
  to_rollout.measured_peak_bytes = 2000;
  SwapStats to_train;
  to_train.seconds = 0.25;
  to_train.reload_s = 0.0625;
  to_train.measured_peak_bytes = 5000;

  SyncWeightsReply written;
  written.version = 7;
  written.swaps.add_to_rollout(to_rollout);
  written.swaps.add_to_train(to_train);
  written.allocated_bytes = 11;
  written.reserved_bytes = 12;
  written.rss_bytes = 13;
  const SyncWeightsReply read = through_the_wire(written);

  CHECK(read.version == 7);
  CHECK(read.swaps.swaps == 1);
  CHECK(read.swaps.to_rollout_s == 0.5);
  CHECK(read.swaps.to_train_s == 0.25);
  CHECK(read.swaps.bytes_moved == (1 << 20));
  CHECK(read.swaps.bytes_gathered == 4096);
  CHECK(read.swaps.planned_peak_bytes == 3000);
  CHECK(read.swaps.measured_peak_bytes == 5000);
  CHECK(read.swaps.phases == written.swaps.phases);
  CHECK(read.swaps.phases.at("gather") == 0.125);
  CHECK(read.swaps.phases.at("reload") == 0.0625);
  CHECK(read.allocated_bytes == 11);
  CHECK(read.reserved_bytes == 12);
  CHECK(read.rss_bytes == 13);
}

TEST_CASE("the other replies read back as written", "[contract]") {
  CHECK(through_the_wire(LoadCheckpointReply{9}).step == 9);
  const MemoryReply memory = through_the_wire(MemoryReply{1, 2, 3, 4});
  CHECK((memory.param_bytes == 1 && memory.grad_bytes == 2 && memory.optimizer_bytes == 3 && memory.host_bytes == 4));
  const WeightTransferStats stats = through_the_wire(WeightTransferStats{10, 2, 3, 0.5});
  CHECK((stats.bytes == 10 && stats.buckets == 2 && stats.tensors == 3 && stats.seconds == 0.5));
  CHECK(through_the_wire(StreamStatus{4}).unfinished == 4);
}
