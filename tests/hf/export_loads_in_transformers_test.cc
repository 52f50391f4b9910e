// The other direction: what rlcore writes (`rlcore export` and every train
// engine's HF export go through train_common::write_hf_export: ModelConfig::to_json
// plus safetensors shards) loads in transformers and gives rlcore's logits,
// single-file and sharded, tied and untied.
#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "train-common/checkpoint_files.h"
#include "rlcore/model/transformer.h"
#include "rlcore/safetensors/safetensors.h"

#include <catch2/catch.hpp>

#include "hf_testing.h"

namespace fs = std::filesystem;
using namespace rlcore::model;

namespace {

// Moves every weight, so transformers can only match by reading what rlcore wrote.
void perturb(Transformer& model) {
  at::NoGradGuard no_grad;
  at::manual_seed(11);
  for (auto& [name, tensor] : model.named_parameters()) tensor.add_(at::randn_like(tensor) * 0.05);
}

}  // namespace

TEST_CASE("rlcore's HF export loads in transformers with identical logits", "[hf][export]") {
  const hf_testing::Inputs inputs{{{0, 0, 9, 17, 33, 8, 61}, {3, 44, 5, 71, 7, 28, 9}},
                                  {{0, 0, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}}};
  struct Case {
    std::string family;
    nlohmann::json config;
    bool sharded;
  };
  const Case cases[] = {{"llama", {{"tie_word_embeddings", true}}, false},
                        {"qwen2", {{"tie_word_embeddings", false}}, true},
                        {"qwen3", {{"head_dim", 32}, {"tie_word_embeddings", true}}, true},
                        {"mistral", {{"sliding_window", 3}}, false},
                        {"gemma2", {{"sliding_window", 3}, {"final_logit_softcapping", 2.0}}, true},
                        {"deepseek_v3",
                         hf_testing::deepseek_v3_config({{"rope_parameters",
                                                          {{"rope_type", "yarn"},
                                                           {"rope_theta", 10000.0},
                                                           {"factor", 4.0},
                                                           {"mscale", 0.9},
                                                           {"mscale_all_dim", 0.8},
                                                           {"original_max_position_embeddings", 64}}}}),
                         true}};
  for (const Case& c : cases) {
    SECTION(c.family + (c.sharded ? ", sharded" : "")) {
      const fs::path source = hf_testing::scratch_dir("export_source_" + c.family);
      hf_testing::make_reference_model(c.family, c.config, inputs, 1, source);
      Transformer model = hf_testing::load_checkpoint(source);
      perturb(model);

      const fs::path exported = hf_testing::scratch_dir("export_" + c.family);
      const uint64_t shard_bytes = c.sharded ? 40 * 1024 : (uint64_t{1} << 32);
      rlcore::train_common::write_hf_export(exported, model.config().to_json(), model.named_parameters(), source);
      if (c.sharded) {
        // write_hf_export's shard size is the production one; reshard to exercise the index.
        fs::remove(exported / "model.safetensors");
        rlcore::save_safetensors_checkpoint(exported, model.named_parameters(), shard_bytes);
        REQUIRE(fs::exists(exported / rlcore::kSafetensorsIndexFile));
      }
      const at::Tensor expected = model.forward(inputs.ids_tensor(), inputs.mask_tensor());
      const at::Tensor actual = hf_testing::transformers_logits(exported, inputs);
      const at::Tensor real = inputs.mask_tensor().to(at::kBool);
      CHECK(hf_testing::relative_error(actual.index({real}), expected.index({real})) < 1e-5);
      // And back: rlcore reads its own export to the same model.
      CHECK(hf_testing::relative_error(
                hf_testing::load_checkpoint(exported).forward(inputs.ids_tensor(), inputs.mask_tensor()).index({real}),
                expected.index({real})) == 0);
      fs::remove_all(source);
      fs::remove_all(exported);
    }
  }
}
