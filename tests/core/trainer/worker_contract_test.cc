// The controller <-> worker contract: method names as both sides spell them,
// and each reply read back exactly as its writer wrote it.
#include "../../../core/src/trainer/worker_contract.h"
#include "trainer_testing.h"

using namespace rlcore;
using namespace rlcore::trainer;

TEST_CASE("a method is registered by its name and called as role.name", "[contract]") {
  CHECK(actor_methods::kUpdateActor.qualified() == "actor.update_actor");
  CHECK(std::string(actor_methods::kUpdateActor.name) == "update_actor");
  CHECK(critic_methods::kUpdateCritic.qualified() == "critic.update_critic");
  CHECK(actor_methods::kSaveCheckpoint.qualified() == "actor.save_checkpoint");
  CHECK(critic_methods::kSaveCheckpoint.qualified() == "critic.save_checkpoint");
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
  const auto read = SyncWeightsReply::from_json(nlohmann::json::parse(written.to_json().dump()));

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

TEST_CASE("the other replies read back as written; a missing key is an error naming it", "[contract]") {
  CHECK(GenerateReply::from_json(GenerateReply{42}.to_json()).weight_version == 42);
  CHECK(LoadCheckpointReply::from_json(LoadCheckpointReply{9}.to_json()).step == 9);
  const MemoryReply memory = MemoryReply::from_json(MemoryReply{1, 2, 3, 4}.to_json());
  CHECK((memory.param_bytes == 1 && memory.grad_bytes == 2 && memory.optimizer_bytes == 3 && memory.host_bytes == 4));
  CHECK_THROWS_WITH(GenerateReply::from_json(nlohmann::json::object()), Catch::Contains("weight_version"));
}
