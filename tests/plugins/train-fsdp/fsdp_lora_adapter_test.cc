// Which modules LoRA adapts (target_modules / exclude_modules, PEFT's rules)
// and starting from an existing PEFT adapter (verl's lora_adapter_path): an
// adapter PEFT made gives PEFT's log-probs, trains on, and is refused by name
// where rlcore cannot train it.
#include "lora_testing.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "../../common/reference_python.h"

using namespace fsdp_test;
using namespace lora_test;

namespace {

std::vector<std::string> adapted_modules(const FsdpEngine& engine) {
  std::vector<std::string> modules;
  for (const auto& pair : engine.lora().pairs()) modules.push_back(pair->module);
  return modules;
}

FsdpOptions excluding(std::vector<std::string> targets, std::vector<std::string> excludes) {
  FsdpOptions options = lora_options(2, std::move(targets));
  options.lora.exclude_modules = std::move(excludes);
  return options;
}

FsdpOptions from_adapter(const fs::path& adapter, int64_t rank = 0) {
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.lora.lora_rank = rank;
  options.lora.lora_adapter_path = adapter.string();
  return options;
}

// Log-probs of the batch's responses from full-sequence logits (positions 3..6 predict tokens 4..7).
at::Tensor response_log_probs(const at::Tensor& logits, const rlcore::Batch& batch) {
  return at::log_softmax(logits.slice(1, 3, 7), -1).gather(-1, batch.tensor("responses").unsqueeze(-1)).squeeze(-1);
}

void edit_json(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json value = nlohmann::json::parse(std::ifstream(file));
  edit(value);
  std::ofstream(file) << value.dump(2);
}

}  // namespace

TEST_CASE("exclude_modules takes names, dotted suffixes and regular expressions", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  const auto modules = [&](std::vector<std::string> targets, std::vector<std::string> excludes) {
    return adapted_modules(FsdpEngine(excluding(std::move(targets), std::move(excludes)), context_for(dir.str())));
  };
  CHECK(modules({"all-linear"}, {"down_proj", "mlp.up_proj"}).size() == 2 * 5);
  CHECK(modules({"q_proj", "v_proj"}, {R"(model\.layers\.1\..*)"}) ==
        std::vector<std::string>{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj"});
  CHECK(modules({R"(.*layers\.1\.mlp\..*)"}, {}) == std::vector<std::string>{"model.layers.1.mlp.gate_proj",
                                                                             "model.layers.1.mlp.up_proj",
                                                                             "model.layers.1.mlp.down_proj"});
  CHECK(modules({"all-linear"}, {}).size() == 2 * 7);
}

TEST_CASE("bad target_modules / exclude_modules entries name their key and entry", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  const auto error = [&](std::vector<std::string> targets, std::vector<std::string> excludes) {
    return error_of<rlcore::ConfigError>(
        [&] { FsdpEngine(excluding(std::move(targets), std::move(excludes)), context_for(dir.str())); });
  };
  CHECK_THAT(error({"all-linear"}, {"down_prj"}),
             Catch::Contains("lora.exclude_modules") && Catch::Contains("'down_prj'") && Catch::Contains("selects no"));
  CHECK_THAT(error({"lm_head"}, {}), Catch::Contains("lora.target_modules") && Catch::Contains("'lm_head'") &&
                                         Catch::Contains("projections only"));
  CHECK_THAT(error({"q_proj"}, {"self_attn"}), Catch::Contains("'self_attn'"));  // a path part, not a module
  CHECK_THAT(error({"q_proj"}, {"(unclosed"}), Catch::Contains("lora.exclude_modules") &&
                                                   Catch::Contains("not a module name or a valid regular expression"));
  CHECK_THAT(error({"q_proj"}, {"q_proj"}), Catch::Contains("excludes every module"));
}

TEST_CASE("a checkpoint of a partial selection restores the same modules", "[fsdp][lora]") {
  TempDir dir, saved;
  write_tiny_checkpoint(dir.path());
  FsdpEngine trained(excluding({"all-linear"}, {R"(.*layers\.0\.mlp\..*)"}), context_for(dir.str()));
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  trained.train_step(batch, {}, pg_loss);
  trained.save_checkpoint(saved.str());
  // Not every layer alike: PEFT gets the full module names, which select exactly these modules.
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(saved.path() / "lora_adapter/adapter_config.json"));
  CHECK(config.at("target_modules") == nlohmann::json(adapted_modules(trained)));

  rlcore::ComponentContext frozen_context = context_for(dir.str());
  frozen_context.trainable = false;
  FsdpEngine frozen(FsdpOptions{}, frozen_context);
  frozen.load_checkpoint(saved.str());
  CHECK(adapted_modules(frozen) == adapted_modules(trained));
  CHECK(adapted_modules(frozen).size() == 14 - 3);
  CHECK(at::equal(frozen.forward(batch, {}).log_prob, trained.forward(batch, {}).log_prob));
}

TEST_CASE("an adapter PEFT made (lora_adapter_path) gives PEFT's log-probs and trains on", "[fsdp][lora][peft]") {
  TempDir dir, adapter, scratch, saved;
  write_tiny_checkpoint(dir.path());
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  rlcore::save_safetensors(scratch.path() / "inputs.safetensors", {{"input_ids", batch.tensor("input_ids")}});
  const fs::path out = scratch.path() / "peft.safetensors";
  // PEFT's string form of exclude_modules (a regular expression), as verl passes it.
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/train-fsdp/reference/peft_make_adapter.py"),
                             {dir.str(), adapter.str(), (scratch.path() / "inputs.safetensors").string(), out.string(),
                              "4", "8", R"("all-linear")", R"("model\\.layers\\.0\\.self_attn\\..*")"});
  const rlcore::SafetensorsFile peft(out);

  FsdpEngine engine(from_adapter(adapter.path()), context_for(dir.str()));
  CHECK(engine.lora().rank() == 4);
  CHECK(engine.lora().scaling() == 2.0);
  std::vector<std::string> peft_modules;
  for (const std::string& name : peft.names())
    if (name.rfind("module.", 0) == 0) peft_modules.push_back(name.substr(7));
  std::vector<std::string> ours = adapted_modules(engine);
  std::sort(ours.begin(), ours.end());
  std::sort(peft_modules.begin(), peft_modules.end());
  CHECK(ours == peft_modules);
  CHECK(ours.size() == 14 - 4);
  const at::Tensor peft_log_prob = response_log_probs(peft.load("logits"), batch);
  const at::Tensor log_prob = engine.forward(batch, {}).log_prob;
  CHECK((log_prob - peft_log_prob).abs().max().item<double>() < 1e-5);
  CHECK((log_prob - FsdpEngine(FsdpOptions{}, context_for(dir.str())).forward(batch, {}).log_prob)
            .abs()
            .max()
            .item<double>() > 1e-3);  // B is not zero: the adapter changes the model

  // It trains on, and what it saves PEFT reads back to the same model.
  for (int step = 0; step < 2; ++step) engine.train_step(batch, {}, pg_loss);
  engine.save_checkpoint(saved.str());
  const fs::path reread = scratch.path() / "reread.safetensors";
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/train-fsdp/reference/peft_adapter.py"),
                             {dir.str(), (saved.path() / "lora_adapter").string(),
                              (scratch.path() / "inputs.safetensors").string(), reread.string()});
  const at::Tensor trained_peft = response_log_probs(rlcore::SafetensorsFile(reread).load("logits"), batch);
  CHECK((engine.forward(batch, {}).log_prob - trained_peft).abs().max().item<double>() < 1e-5);
}

TEST_CASE("an rsLoRA adapter PEFT made scales by alpha / sqrt(r), as PEFT does", "[fsdp][lora][peft]") {
  TempDir dir, adapter, scratch, saved;
  write_tiny_checkpoint(dir.path());
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  rlcore::save_safetensors(scratch.path() / "inputs.safetensors", {{"input_ids", batch.tensor("input_ids")}});
  const fs::path out = scratch.path() / "peft.safetensors";
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/train-fsdp/reference/peft_make_adapter.py"),
                             {dir.str(), adapter.str(), (scratch.path() / "inputs.safetensors").string(), out.string(),
                              "4", "8", R"(["q_proj", "down_proj"])", "null", "1"});
  FsdpEngine engine(from_adapter(adapter.path()), context_for(dir.str()));
  CHECK(engine.lora().options().use_rslora);
  CHECK(engine.lora().scaling() == 4.0);  // 8 / sqrt(4)
  const at::Tensor peft_log_prob = response_log_probs(rlcore::SafetensorsFile(out).load("logits"), batch);
  CHECK((engine.forward(batch, {}).log_prob - peft_log_prob).abs().max().item<double>() < 1e-5);

  // Saved and resumed with the flag; an engine configured without it is refused, naming both.
  engine.save_checkpoint(saved.str());
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(saved.path() / "lora_adapter/adapter_config.json"));
  CHECK(config.at("use_rslora") == true);
  FsdpOptions plain = lora_options(4, {"q_proj", "down_proj"});
  plain.lora.lora_alpha = 8;
  FsdpEngine resumed(plain, context_for(dir.str()));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { resumed.load_checkpoint(saved.str()); }),
             Catch::Contains("use_rslora = true") && Catch::Contains("lora.use_rslora false"));
}

TEST_CASE("lora_adapter_path refuses, by name, an adapter it cannot train", "[fsdp][lora]") {
  TempDir dir, saved;
  write_tiny_checkpoint(dir.path());
  FsdpEngine writer(lora_options(4, {"q_proj", "v_proj"}), context_for(dir.str()));
  writer.save_checkpoint(saved.str());
  const fs::path adapter = saved.path() / "lora_adapter";
  FsdpEngine loaded(from_adapter(adapter, 4), context_for(dir.str()));  // lora_rank may repeat the adapter's r
  CHECK(loaded.lora().target_names() == std::vector<std::string>{"q_proj", "v_proj"});

  const auto config_error = [&](const fs::path& path, int64_t rank = 0) {
    return error_of<rlcore::ConfigError>([&] { FsdpEngine(from_adapter(path, rank), context_for(dir.str())); });
  };
  CHECK_THAT(config_error(adapter, 8), Catch::Contains("lora.lora_rank is 8") && Catch::Contains("r = 4"));
  CHECK_THAT(config_error(saved.path() / "nowhere"),
             Catch::Contains("lora.lora_adapter_path") && Catch::Contains("adapter_config.json"));
  CHECK_THAT(config_error(adapter / "adapter_config.json"), Catch::Contains("a file; a LoRA adapter is the directory"));

  const fs::path config = adapter / "adapter_config.json";
  edit_json(config, [](nlohmann::json& c) { c["use_dora"] = true; });
  CHECK_THAT(config_error(adapter), Catch::Contains("use_dora is true"));
  edit_json(config, [](nlohmann::json& c) {
    c["use_dora"] = false;
    c["layers_to_transform"] = {1};
  });
  CHECK_THAT(config_error(adapter), Catch::Contains("layers_to_transform is [1]"));
  edit_json(config, [](nlohmann::json& c) {
    c["layers_to_transform"] = nullptr;
    c["exclude_modules"] = ".*visual.*";
  });
  CHECK_THAT(config_error(adapter), Catch::Contains("adapter_config.json (lora.lora_adapter_path)") &&
                                        Catch::Contains("'.*visual.*' selects no module"));
  edit_json(config, [](nlohmann::json& c) {
    c["exclude_modules"] = nullptr;
    c["target_modules"] = {"q_proj"};  // the file still holds v_proj's adapters
  });
  CHECK_THAT(error_of<rlcore::FormatError>([&] { FsdpEngine(from_adapter(adapter), context_for(dir.str())); }),
             Catch::Contains("model.layers.0.self_attn.v_proj.lora_A.weight") && Catch::Contains("not an adapter"));
}
