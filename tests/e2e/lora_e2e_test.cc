// LoRA through the trainer under verl's keys (actor_rollout_ref.model.lora_rank,
// lora_alpha, target_modules, exclude_modules, lora_adapter_path): the
// checkpoint carries a PEFT adapter, `rlcore export` writes the merged model,
// the frozen base stays as it was, a run from the saved adapter generates what
// the export does, and the keys are refused by name where they cannot work.
#include "e2e_testing.h"

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/safetensors/safetensors.h"

namespace fs = std::filesystem;

namespace {

at::Tensor weight(const fs::path& dir, const std::string& name) {
  return rlcore::SafetensorsFile(dir / "model.safetensors").view(name).clone();
}

// The responses of a trainer.val_only run (its validation_data_dir dump), in order.
std::vector<std::string> validation_responses(const std::string& config, const std::string& ws, const std::string& name,
                                              std::vector<std::string> overrides) {
  std::vector<std::string> args = {"--config",
                                   config,
                                   "trainer.val_only=true",
                                   "data.val_files=" + ws + "/prompts.jsonl",
                                   "trainer.default_local_dir=" + ws + "/" + name,
                                   "trainer.validation_data_dir=" + ws + "/" + name + "/val"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  const e2e::RunResult run = e2e::run_rlcore(args);
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::ifstream dump(ws + "/" + name + "/val/0.jsonl");
  REQUIRE(dump);
  std::vector<std::string> responses;
  for (std::string line; std::getline(dump, line);)
    responses.push_back(nlohmann::json::parse(line).at("output").get<std::string>());
  return responses;
}

}  // namespace

TEST_CASE("verl's LoRA keys train adapters over the frozen base; export merges them", "[e2e][lora]") {
  const std::string ws = e2e::make_workspace("lora", 8);
  const std::string config = e2e::write_config(ws, "lora", e2e::kQuickGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=2", "trainer.save_freq=2", "runtime.n_workers_per_node=2",
       "actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=8",
       "actor_rollout_ref.model.target_modules=all-linear", "actor_rollout_ref.actor.optim.lr=0.05"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const fs::path actor = fs::path(ws) / "lora/checkpoints/global_step_2/actor";
  std::ifstream adapter_config(actor / "lora_adapter/adapter_config.json");
  REQUIRE(adapter_config);
  const nlohmann::json adapter = nlohmann::json::parse(adapter_config);
  CHECK(adapter.at("r") == 4);
  CHECK(adapter.at("lora_alpha") == 8.0);
  CHECK(adapter.at("target_modules").size() == 7);  // all-linear: q k v o gate up down

  const fs::path exported = fs::path(ws) / "exported";
  const e2e::RunResult exporting =
      e2e::run_rlcore({"export", "--checkpoint", actor.string(), "--model", ws + "/model", "--out", exported.string()});
  INFO(exporting.output);
  REQUIRE(exporting.status == 0);
  const fs::path base = fs::path(ws) / "model";
  // Adapted projections moved (base + scaling B A); what has no adapter is the base, bit for bit.
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  CHECK((weight(exported, q) - weight(base, q)).abs().max().item<double>() > 1e-6);
  for (const std::string frozen : {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"}) {
    INFO(frozen);
    CHECK(at::equal(weight(exported, frozen), weight(base, frozen)));
  }

  // verl's lora_adapter_path: the base plus the saved adapter generates what the merged export does.
  const std::vector<std::string> from_adapter = validation_responses(
      config, ws, "from_adapter", {"actor_rollout_ref.model.lora_adapter_path=" + (actor / "lora_adapter").string()});
  const std::vector<std::string> from_export =
      validation_responses(config, ws, "from_export", {"actor_rollout_ref.model.path=" + exported.string()});
  CHECK(from_adapter.size() == 8);
  CHECK(from_adapter == from_export);
  CHECK(from_adapter != validation_responses(config, ws, "from_base", {}));  // the adapter was applied
  fs::remove_all(ws);
}

TEST_CASE("LoRA keys are refused by name where they cannot work", "[e2e][lora]") {
  const std::string ws = e2e::make_workspace("lora_bad", 8);
  const std::string config = e2e::write_config(ws, "bad", e2e::kQuickGrpo);
  auto error_of = [&](std::vector<std::string> overrides) {
    std::vector<std::string> args = {"--config", config, "trainer.total_training_steps=1"};
    args.insert(args.end(), overrides.begin(), overrides.end());
    const e2e::RunResult run = e2e::run_rlcore(args);
    CHECK(run.status != 0);
    return run.output;
  };
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.actor.strategy=megatron"}),
             Catch::Contains("actor_rollout_ref.model.lora_rank") && Catch::Contains("low_rank_adapters"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.actor.lora.lora_rank=4"}),
             Catch::Contains("LoRA is set twice"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.target_modules=[qkv]"}),
             Catch::Contains("lora.target_modules") && Catch::Contains("'qkv'"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_rank=-1"}), Catch::Contains("actor_rollout_ref.model.lora_rank"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_adapter_path=" + ws + "/no_adapter"}),
             Catch::Contains("lora.lora_adapter_path") && Catch::Contains("no_adapter/adapter_config.json"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_adapter_path=" + ws + "/no_adapter",
                       "actor_rollout_ref.actor.strategy=megatron"}),
             Catch::Contains("actor_rollout_ref.model.lora_adapter_path") && Catch::Contains("low_rank_adapters"));
  CHECK_THAT(error_of({"actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.exclude_modules=[nothing]"}),
             Catch::Contains("lora.exclude_modules") && Catch::Contains("'nothing'"));
  fs::remove_all(ws);
}
