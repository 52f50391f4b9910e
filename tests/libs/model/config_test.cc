// ModelConfig: parsing real HF config.json files, errors naming the field,
// HF-compatible output and the size presets.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rlcore/error.h"
#include "rlcore/model/architecture.h"
#include "rlcore/model/config.h"
#include "../../common/scratch_dir.h"
#include "../../common/test_paths.h"

#include <catch2/catch.hpp>

#include "../../common/error_of.h"

using rlcore::ConfigError;
using rlcore::model::ModelConfig;
using rlcore::model::preset;

namespace {

// Trimmed copies of the published config.json files.
const char* kQwen25Config = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kQwen3Config = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* kLlama32Config = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "vocab_size": 128256})";

// Text edits rather than nlohmann: using its templates here would triple
// this file's compile time.
// Overrides `key` by appending it: like Python's json, nlohmann keeps the last duplicate.
std::string with(const std::string& base, const std::string& key, const std::string& value) {
  return base.substr(0, base.rfind('}')) + ", \"" + key + "\": " + value + "}";
}

// Removes a key whose value is a scalar (no comma inside).
std::string without(const std::string& base, const std::string& key) {
  const size_t begin = base.find("\"" + key + "\":");
  REQUIRE(begin != std::string::npos);
  return base.substr(0, begin) + base.substr(base.find(',', begin) + 1);
}

// The ConfigError message for `text`, or "" if it parses.
std::string parse_error(const std::string& text) {
  try {
    ModelConfig::from_json_text(text, "/ckpt/config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("qwen2 config.json parses with qwen2's fixed biases", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kQwen25Config);
  CHECK(c.model_type == "qwen2");
  CHECK(c.hidden_size == 896);
  CHECK(c.num_attention_heads == 14);
  CHECK(c.num_key_value_heads == 2);
  CHECK(c.head_dim == 64);  // hidden / heads
  CHECK(c.num_kv_groups() == 7);
  CHECK(c.qkv_bias);
  CHECK_FALSE(c.o_proj_bias);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.tie_word_embeddings);
  CHECK(c.rope_theta == 1e6);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK(c.dtype() == c10::ScalarType::BFloat16);
  CHECK(c.bos_token_id == 151643);
  CHECK(c.eos_token_ids == std::vector<int64_t>({151643}));
}

TEST_CASE("qwen3 config.json keeps its explicit head_dim and gets q/k norms", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kQwen3Config);
  CHECK(c.head_dim == 128);  // not 1024 / 16
  CHECK(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CHECK(c.max_position_embeddings == 40960);
  // Qwen3Config's own default when the field is absent.
  CHECK(ModelConfig::from_json_text(without(kQwen3Config, "head_dim")).head_dim == 128);
  CHECK(ModelConfig::from_json_text(with(kQwen3Config, "attention_bias", "true")).o_proj_bias);
}

TEST_CASE("llama 3.2 config.json: llama3 rope scaling, eos list, defaults", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kLlama32Config);
  CHECK(c.rope_scaling.rope_type == "llama3");
  CHECK(c.rope_scaling.factor == 32.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(c.eos_token_ids == std::vector<int64_t>({128001, 128008, 128009}));
  CHECK_FALSE(c.qkv_bias);
  const ModelConfig biased = ModelConfig::from_json_text(with(kLlama32Config, "attention_bias", "true"));
  CHECK(biased.qkv_bias);
  CHECK(biased.o_proj_bias);
  // num_key_value_heads defaults to the head count, as in LlamaConfig.
  CHECK(ModelConfig::from_json_text(without(kLlama32Config, "num_key_value_heads")).num_key_value_heads == 32);
  // transformers >= 4.57 nests rope_theta in rope_parameters.
  const std::string modern = with(with(without(kLlama32Config, "rope_theta"), "rope_scaling", "null"),
                                  "rope_parameters", R"({"rope_type": "default", "rope_theta": 250000.0})");
  const ModelConfig m = ModelConfig::from_json_text(modern);
  CHECK(m.rope_theta == 250000.0);
  CHECK(m.rope_scaling.rope_type == "default");
}

TEST_CASE("config errors name the field and the file", "[model]") {
  std::string error = parse_error(with(kQwen25Config, "model_type", R"("gpt2")"));
  CHECK_THAT(error, Catch::Contains("/ckpt/config.json") && Catch::Contains("model_type") && Catch::Contains("gpt2") &&
                        Catch::Contains("deepseek_v3, gemma2, llama, mistral, mixtral, qwen2, qwen3, qwen3_moe"));

  error = parse_error(with(kQwen25Config, "num_key_value_heads", "3"));
  CHECK_THAT(error, Catch::Contains("num_key_value_heads") && Catch::Contains("14"));

  error = parse_error(with(kQwen25Config, "num_attention_heads", "10"));  // 896 % 10 != 0
  CHECK_THAT(error, Catch::Contains("hidden_size") && Catch::Contains("head_dim"));
  // An explicit head_dim lifts that requirement.
  CHECK(parse_error(with(with(kQwen25Config, "num_attention_heads", "10"), "head_dim", "64")).empty());

  error = parse_error(without(kQwen25Config, "hidden_size"));
  CHECK_THAT(error,
             Catch::Contains("/ckpt/config.json") && Catch::Contains("'hidden_size'") && Catch::Contains("missing"));

  CHECK_THAT(parse_error(with(kQwen25Config, "hidden_size", R"("896")")),
             Catch::Contains("hidden_size") && Catch::Contains("integer"));
  CHECK_THAT(parse_error(with(kQwen25Config, "num_hidden_layers", "0")),
             Catch::Contains("num_hidden_layers") && Catch::Contains("positive"));
  CHECK_THAT(parse_error(with(kQwen25Config, "rms_norm_eps", "-1.0")), Catch::Contains("rms_norm_eps"));
  CHECK_THAT(parse_error(with(kQwen25Config, "hidden_act", R"("gelu")")), Catch::Contains("hidden_act"));
  CHECK_THAT(parse_error(with(kQwen25Config, "use_sliding_window", "true")), Catch::Contains("use_sliding_window"));
  CHECK_THAT(parse_error(with(kQwen25Config, "torch_dtype", R"("int8")")), Catch::Contains("torch_dtype"));
  CHECK_THAT(parse_error(with(kQwen25Config, "rope_scaling", R"({"rope_type": "dynamic", "factor": 4.0})")),
             Catch::Contains("rope_scaling.rope_type") && Catch::Contains("dynamic") && Catch::Contains("yarn"));
  CHECK_THAT(parse_error(with(kQwen25Config, "rope_scaling", R"({"rope_type": "longrope", "factor": 4.0})")),
             Catch::Contains("longrope"));
  CHECK_THAT(parse_error("{not json"), Catch::Contains("/ckpt/config.json") && Catch::Contains("invalid JSON"));
  CHECK_THAT(parse_error(with(kQwen25Config, "rope_theta", "1e999999")), Catch::Contains("/ckpt/config.json") &&
                                                                             Catch::Contains("invalid JSON") &&
                                                                             Catch::Contains("number overflow"));
  CHECK_THROWS_AS(ModelConfig::from_file("/nonexistent/config.json"), rlcore::IoError);
}

TEST_CASE("each model_type is one registered architecture; an unknown one is refused with their names", "[model]") {
  using rlcore::model::Architecture;
  for (const Architecture& arch : rlcore::model::architectures()) {
    CHECK(&rlcore::model::find_architecture(arch.model_type) == &arch);
  }
  CHECK(rlcore::model::architecture_names() == "deepseek_v3, gemma2, llama, mistral, mixtral, qwen2, qwen3, qwen3_moe");
  CHECK_THROWS_WITH(rlcore::model::find_architecture("gpt2"),
                    Catch::Contains("'gpt2'") && Catch::Contains("deepseek_v3, gemma2, llama"));
  CHECK_THROWS_AS(rlcore::model::find_architecture("gpt2"), ConfigError);
}

TEST_CASE("every file under libs/model/src/architectures/ is registered, with its name as the model_type", "[model]") {
  // The build generates the list from the files: a family is one file, with nothing to add elsewhere.
  std::vector<std::string> families;
  for (const auto& entry :
       std::filesystem::directory_iterator(rlcore_test::source_dir() + "/libs/model/src/architectures")) {
    if (entry.path().extension() == ".cc") families.push_back(entry.path().stem().string());
  }
  REQUIRE(families.size() == rlcore::model::architectures().size());
  for (const std::string& family : families) {
    INFO(family << ".cc");
    CHECK(rlcore::model::lookup_architecture(family) != nullptr);
  }
}

TEST_CASE("other MoE and vision checkpoints are refused by their architectures field", "[model]") {
  for (const char* architecture : {"DeepseekV2ForCausalLM", "Qwen2VLForConditionalGeneration", "GptOssForCausalLM"}) {
    const std::string error =
        parse_error(with(kQwen25Config, "architectures", std::string("[\"") + architecture + "\"]"));
    CHECK_THAT(error, Catch::Contains("/ckpt/config.json") && Catch::Contains("'architectures'") &&
                          Catch::Contains(architecture));
  }
  // A critic checkpoint (verl saves *ForTokenClassification) is a dense decoder too.
  CHECK(parse_error(with(kQwen25Config, "architectures", R"(["Qwen2ForTokenClassification"])")).empty());
}

TEST_CASE("yarn rope scaling reads HF's defaults", "[model]") {
  const ModelConfig plain = ModelConfig::from_json_text(
      with(kQwen25Config, "rope_scaling",
           R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})"));
  CHECK(plain.rope_scaling.rope_type == "yarn");
  CHECK(plain.rope_scaling.beta_fast == 32.0);
  CHECK(plain.rope_scaling.beta_slow == 1.0);
  CHECK(plain.rope_scaling.attention_factor == Approx(0.1 * std::log(4.0) + 1.0));
  // mscale / mscale_all_dim (DeepSeek style) give a ratio; a given attention_factor wins.
  const ModelConfig ratio = ModelConfig::from_json_text(with(
      kQwen25Config, "rope_scaling", R"({"rope_type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.5})"));
  CHECK(ratio.rope_scaling.attention_factor == Approx((0.1 * std::log(40.0) + 1.0) / (0.05 * std::log(40.0) + 1.0)));
  CHECK(ratio.rope_scaling.original_max_position_embeddings == ratio.max_position_embeddings);
  const ModelConfig given = ModelConfig::from_json_text(
      with(kQwen25Config, "rope_scaling", R"({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5})"));
  CHECK(given.rope_scaling.attention_factor == 1.5);
  CHECK(ModelConfig::from_json_text(given.to_json_text()) == given);
}

TEST_CASE("mistral's sliding_window: absent means 4096, null means none", "[model]") {
  const std::string mistral =
      with(with(kLlama32Config, "model_type", R"("mistral")"), "architectures", R"(["MistralForCausalLM"])");
  CHECK(ModelConfig::from_json_text(mistral).sliding_window == 4096);
  CHECK_FALSE(ModelConfig::from_json_text(with(mistral, "sliding_window", "null")).sliding_window.has_value());
  const ModelConfig windowed = ModelConfig::from_json_text(with(mistral, "sliding_window", "64"));
  CHECK(windowed.sliding_window == 64);
  CHECK(ModelConfig::from_json_text(windowed.to_json_text()) == windowed);
  CHECK_THAT(parse_error(with(mistral, "sliding_window", "0")), Catch::Contains("sliding_window"));
}

TEST_CASE("gemma2 reads Gemma2Config's defaults and its layer types", "[model]") {
  const std::string gemma2 = R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 1000,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 2})";
  const ModelConfig c = ModelConfig::from_json_text(gemma2);
  CHECK(c.head_dim == 256);
  CHECK(c.tie_word_embeddings);
  CHECK(c.hidden_act == "gelu_pytorch_tanh");
  CHECK((c.norm_weight_offset && c.sandwich_norms && c.scale_embeddings));
  CHECK(c.sliding_window == 4096);
  CHECK(c.sliding_layers == std::vector<bool>{true, false, true});
  CHECK(c.attn_logit_softcapping == 50.0);
  CHECK(c.final_logit_softcapping == 30.0);
  CHECK(c.attention_scaling() == Approx(1.0 / 16.0));  // query_pre_attn_scalar 256
  CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);

  const ModelConfig uncapped = ModelConfig::from_json_text(
      with(with(gemma2, "attn_logit_softcapping", "null"), "final_logit_softcapping", "null"));
  CHECK_FALSE(uncapped.attn_logit_softcapping.has_value());
  CHECK_FALSE(uncapped.final_logit_softcapping.has_value());
  CHECK(ModelConfig::from_json_text(uncapped.to_json_text()) == uncapped);

  CHECK_THAT(parse_error(with(gemma2, "layer_types", R"(["full_attention"])")), Catch::Contains("layer_types"));
  CHECK_THAT(parse_error(with(gemma2, "layer_types", R"(["full_attention", "chunked_attention", "full_attention"])")),
             Catch::Contains("chunked_attention"));
  CHECK_THAT(parse_error(with(gemma2, "use_bidirectional_attention", "true")),
             Catch::Contains("use_bidirectional_attention"));
  CHECK_THAT(parse_error(with(gemma2, "hidden_activation", R"("relu")")), Catch::Contains("hidden_activation"));
}

TEST_CASE("to_json writes an HF config that parses back to the same config", "[model]") {
  const std::pair<std::string, std::string> archs[] = {
      {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
  for (const auto& [arch, architecture] : archs) {
    ModelConfig c = preset(arch, "tiny", 1000);
    c.bos_token_id = 1;
    c.eos_token_ids = {2, 3};
    // Checked on the text (save_pretrained's 2-space layout) to keep nlohmann out of this file.
    const std::string text = c.to_json_text();
    CHECK_THAT(text, Catch::Contains("\"architectures\": [\n    \"" + architecture + "\"\n  ]"));
    CHECK_THAT(text, Catch::Contains("\"model_type\": \"" + arch + "\""));
    CHECK_THAT(text, Catch::Contains("\"hidden_act\": \"silu\""));
    CHECK_THAT(text, Catch::Contains("\"eos_token_id\": [\n    2,\n    3\n  ]"));
    CHECK_THAT(text, Catch::Contains("\"head_dim\": 32"));
    CHECK((text.find("\"attention_bias\"") != std::string::npos) == (arch != "qwen2"));
    CHECK(ModelConfig::from_json_text(text) == c);
  }
  // Real configs round-trip too (rope scaling, explicit head_dim).
  for (const char* text : {kQwen25Config, kQwen3Config, kLlama32Config}) {
    const ModelConfig c = ModelConfig::from_json_text(text);
    CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);
  }
}

TEST_CASE("from_file reads a config.json", "[model]") {
  const std::string path = rlcore_test::binary_dir() + "/model_config_test_config.json";
  {
    std::ofstream out(path);
    out << kQwen3Config;
  }
  CHECK(ModelConfig::from_file(path).head_dim == 128);
  std::remove(path.c_str());
}

TEST_CASE("from_checkpoint_dir reads a checkpoint directory's config.json, naming the engine", "[model]") {
  const rlcore_test::ScratchDir dir("model_checkpoint_dir");
  dir.write("config.json", kQwen3Config);
  CHECK(ModelConfig::from_checkpoint_dir(dir.str(), "fsdp").head_dim == 128);

  CHECK_THAT(rlcore_test::error_of<ConfigError>([] { ModelConfig::from_checkpoint_dir("", "fsdp"); }),
             Catch::StartsWith("fsdp: model_path is empty"));
  const std::string missing = dir.str() + "/absent";
  CHECK_THAT(rlcore_test::error_of<ConfigError>([&] { ModelConfig::from_checkpoint_dir(missing, "megatron"); }),
             Catch::StartsWith("megatron: model_path '" + missing + "' is not a directory (it does not exist)"));
  const std::string file = dir.str() + "/config.json";
  CHECK_THAT(rlcore_test::error_of<ConfigError>([&] { ModelConfig::from_checkpoint_dir(file, "infer-native"); }),
             Catch::Equals("infer-native: model_path '" + file + "' is not a directory"));
  // A directory without config.json: from_file's IoError, naming the file.
  const rlcore_test::ScratchDir empty("model_checkpoint_dir_empty");
  CHECK_THAT(rlcore_test::error_of<rlcore::IoError>([&] { ModelConfig::from_checkpoint_dir(empty.str(), "fsdp"); }),
             Catch::Contains(empty.str() + "/config.json"));
}

TEST_CASE("presets have the documented shapes", "[model]") {
  const ModelConfig tiny = preset("llama", "tiny", 1000);
  CHECK(tiny.hidden_size == 128);
  CHECK(tiny.num_hidden_layers == 4);
  CHECK(tiny.num_attention_heads == 4);
  CHECK(tiny.num_key_value_heads == 2);
  CHECK(tiny.intermediate_size == 384);
  CHECK(preset("qwen2", "tiny", 1000).qkv_bias);
  CHECK(preset("qwen3", "tiny", 1000).qk_norm);
  CHECK_THROWS_WITH(preset("gpt2", "tiny", 1000), Catch::Contains("gpt2") && Catch::Contains("qwen3"));
  CHECK_THROWS_WITH(preset("llama", "7b", 1000), Catch::Contains("7b") && Catch::Contains("tiny"));
  CHECK_THROWS_AS(preset("llama", "tiny", 0), ConfigError);
}

// Qwen3-30B-A3B's config.json, shrunk to test sizes (its fields and values as the Hub ships them).
const char* const kQwen3MoeConfig = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
  "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 4, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "attention_bias": false, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "output_router_logits": false,
  "bos_token_id": 151643, "eos_token_id": 151645
})";

TEST_CASE("a Qwen3-MoE config reads its experts and writes them back", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kQwen3MoeConfig);
  CHECK(c.model_type == "qwen3_moe");
  CHECK(c.is_moe());
  CHECK(c.qk_norm);
  CHECK(c.num_experts == 128);
  CHECK(c.num_experts_per_tok == 8);
  CHECK(c.moe_intermediate_size == 768);
  CHECK(c.norm_topk_prob);
  CHECK(c.router_aux_loss_coef == 0.001);
  for (int64_t layer = 0; layer < 4; ++layer) CHECK(c.layer_is_sparse(layer));
  // transformers >= 5 writes the count as num_local_experts.
  CHECK(ModelConfig::from_json_text(with(kQwen3MoeConfig, "num_local_experts", "16")).num_experts == 16);
  CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);
  CHECK_THAT(c.to_json_text(), Catch::Contains("\"Qwen3MoeForCausalLM\""));

  // Every second layer sparse, layer 1 dense by mlp_only_layers: only layer 3 is.
  const ModelConfig sparse =
      ModelConfig::from_json_text(with(with(kQwen3MoeConfig, "decoder_sparse_step", "2"), "mlp_only_layers", "[1]"));
  CHECK_FALSE(sparse.layer_is_sparse(0));
  CHECK_FALSE(sparse.layer_is_sparse(1));
  CHECK_FALSE(sparse.layer_is_sparse(2));
  CHECK(sparse.layer_is_sparse(3));
  CHECK(ModelConfig::from_json_text(sparse.to_json_text()) == sparse);
}

TEST_CASE("a Qwen3-MoE config with impossible experts is refused naming the field", "[model]") {
  CHECK_THAT(parse_error(with(kQwen3MoeConfig, "num_experts_per_tok", "129")),
             Catch::Contains("num_experts_per_tok") && Catch::Contains("between 1 and num_experts"));
  CHECK_THAT(parse_error(with(kQwen3MoeConfig, "mlp_only_layers", "[4]")),
             Catch::Contains("mlp_only_layers") && Catch::Contains("layer 4"));
  CHECK_THAT(parse_error(with(kQwen3MoeConfig, "moe_intermediate_size", "0")),
             Catch::Contains("moe_intermediate_size"));
  CHECK_THAT(parse_error(with(kQwen3MoeConfig, "decoder_sparse_step", "0")), Catch::Contains("decoder_sparse_step"));
}

// Mixtral-8x7B-Instruct-v0.1's config.json, shrunk to test sizes.
const char* const kMixtralConfig = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096,
  "intermediate_size": 14336, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
  "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "num_local_experts": 8, "num_experts_per_tok": 2,
  "router_aux_loss_coef": 0.02, "output_router_logits": false, "bos_token_id": 1, "eos_token_id": 2
})";

TEST_CASE("a Mixtral config reads its experts: every layer, intermediate_size each, renormalised", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kMixtralConfig);
  CHECK(c.model_type == "mixtral");
  CHECK(c.num_experts == 8);
  CHECK(c.num_experts_per_tok == 2);
  CHECK(c.moe_intermediate_size == 14336);
  CHECK(c.norm_topk_prob);
  CHECK_FALSE(c.sliding_window);
  CHECK_FALSE(c.qkv_bias);
  CHECK(c.head_dim == 128);
  CHECK(c.router_aux_loss_coef == 0.02);
  CHECK((c.layer_is_sparse(0) && c.layer_is_sparse(1)));
  CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);
  CHECK_THAT(parse_error(with(kMixtralConfig, "router_jitter_noise", "0.01")), Catch::Contains("router_jitter_noise"));
}

// DeepSeek-V3's config.json as the Hub ships it (bf16 variant: no quantization_config), 4 layers.
const char* const kDeepseekV3Config = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
  "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
  "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
  "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 4, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                   "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
  "use_cache": true, "v_head_dim": 128, "vocab_size": 129280
})";

TEST_CASE("a DeepSeek-V3 config reads its latent attention and routing and writes them back", "[model]") {
  const ModelConfig c = ModelConfig::from_json_text(kDeepseekV3Config);
  CHECK(c.model_type == "deepseek_v3");
  CHECK(c.latent_attention());
  CHECK(c.kv_lora_rank == 512);
  CHECK(c.q_lora_rank == 1536);
  CHECK(c.head_dim == 64);  // qk_rope_head_dim, as HF sets head_dim
  CHECK(c.qk_nope_head_dim == 128);
  CHECK(c.qk_head_dim() == 192);
  CHECK(c.v_head_dim == 128);
  CHECK(c.value_head_dim() == 128);
  CHECK(c.rope_interleave);  // DeepseekV3Config's default
  CHECK(c.num_experts == 256);
  CHECK(c.n_shared_experts == 1);
  CHECK(c.num_experts_per_tok == 8);
  CHECK(c.n_group == 8);
  CHECK(c.topk_group == 4);
  CHECK(c.routed_scaling_factor == 2.5);
  CHECK(c.norm_topk_prob);
  CHECK(c.router_aux_loss_coef == 0.0);
  CHECK(c.first_k_dense_replace == 3);
  for (int64_t layer = 0; layer < 4; ++layer) CHECK(c.layer_is_sparse(layer) == (layer >= 3));
  CHECK(c.rope_scaling.rope_type == "yarn");
  CHECK(c.rope_scaling.factor == 40.0);
  CHECK(c.rope_scaling.mscale_all_dim == 1.0);
  CHECK(c.rope_scaling.attention_factor == Approx(1.0));  // mscale / mscale_all_dim, both 1
  // HF's yarn_apply_mscale: qk_head_dim^-0.5 times mscale(mscale_all_dim)^2.
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  CHECK(c.attention_scaling() == Approx(std::pow(192.0, -0.5) * mscale * mscale).epsilon(1e-12));
  CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);
  CHECK_THAT(c.to_json_text(), Catch::Contains("\"DeepseekV3ForCausalLM\"") &&
                                   Catch::Contains("\"n_routed_experts\"") && Catch::Contains("\"mscale_all_dim\""));

  // q_lora_rank null: a plain q_proj; it round-trips as null.
  const ModelConfig plain_q = ModelConfig::from_json_text(with(kDeepseekV3Config, "q_lora_rank", "null"));
  CHECK_FALSE(plain_q.q_lora_rank.has_value());
  CHECK(ModelConfig::from_json_text(plain_q.to_json_text()) == plain_q);
  // Without rope scaling the scale is qk_head_dim^-0.5 alone.
  const ModelConfig unscaled = ModelConfig::from_json_text(with(kDeepseekV3Config, "rope_scaling", "null"));
  CHECK(unscaled.attention_scaling() == std::pow(192.0, -0.5));
  CHECK(ModelConfig::from_json_text(unscaled.to_json_text()) == unscaled);
}

TEST_CASE("a DeepSeek-V3 config HF could not build, or rlcore does not implement, is refused naming the key",
          "[model]") {
  const auto refused = [](const std::string& key, const std::string& value) {
    return parse_error(with(kDeepseekV3Config, key, value));
  };
  CHECK_THAT(refused("num_key_value_heads", "8"), Catch::Contains("/ckpt/config.json") &&
                                                      Catch::Contains("'num_key_value_heads'") &&
                                                      Catch::Contains("num_attention_heads"));
  CHECK_THAT(refused("n_group", "7"), Catch::Contains("'n_group'") && Catch::Contains("n_routed_experts"));
  CHECK_THAT(refused("n_group", "256"), Catch::Contains("'n_group'") && Catch::Contains("at least 2"));
  CHECK_THAT(refused("topk_group", "9"), Catch::Contains("'topk_group'") && Catch::Contains("n_group (8)"));
  CHECK_THAT(refused("topk_group", "0"), Catch::Contains("'topk_group'"));
  CHECK_THAT(parse_error(with(with(kDeepseekV3Config, "topk_group", "1"), "num_experts_per_tok", "33")),
             Catch::Contains("'num_experts_per_tok'") && Catch::Contains("(32)"));
  CHECK_THAT(refused("first_k_dense_replace", "5"), Catch::Contains("'first_k_dense_replace'"));
  CHECK_THAT(refused("kv_lora_rank", "0"), Catch::Contains("'kv_lora_rank'"));
  CHECK_THAT(refused("q_lora_rank", "0"), Catch::Contains("'q_lora_rank'"));
  CHECK_THAT(refused("qk_rope_head_dim", "63"), Catch::Contains("'qk_rope_head_dim'") && Catch::Contains("even"));
  CHECK_THAT(refused("head_dim", "128"), Catch::Contains("'head_dim'") && Catch::Contains("qk_rope_head_dim"));
  CHECK_THAT(refused("v_head_dim", "0"), Catch::Contains("'v_head_dim'"));
  CHECK_THAT(refused("n_shared_experts", "0"), Catch::Contains("'n_shared_experts'"));
  CHECK_THAT(refused("routed_scaling_factor", "0"), Catch::Contains("'routed_scaling_factor'"));
  CHECK_THAT(refused("hidden_act", R"("gelu_pytorch_tanh")"), Catch::Contains("'hidden_act'"));
  CHECK_THAT(refused("scoring_func", R"("softmax")"), Catch::Contains("'scoring_func'") && Catch::Contains("softmax"));
  CHECK_THAT(refused("topk_method", R"("greedy")"), Catch::Contains("'topk_method'") && Catch::Contains("greedy"));
  CHECK_THAT(refused("moe_layer_freq", "2"), Catch::Contains("'moe_layer_freq'"));
  CHECK_THAT(refused("quantization_config", R"({"quant_method": "fp8", "fmt": "e4m3"})"),
             Catch::Contains("'quantization_config'") && Catch::Contains("fp8"));
  // The DeepSeek fields belong to deepseek_v3 alone.
  ModelConfig qwen = ModelConfig::from_json_text(kQwen3Config);
  qwen.n_group = 2;
  CHECK_THROWS_WITH(qwen.validate(), Catch::Contains("deepseek_v3"));
}

TEST_CASE("the deepseek_v3 presets are valid latent-attention mixtures of experts", "[model]") {
  for (const char* size : {"tiny", "100m", "1b"}) {
    const ModelConfig c = preset("deepseek_v3", size, 1000);
    INFO(size);
    CHECK(c.latent_attention());
    CHECK(c.num_key_value_heads == c.num_attention_heads);
    CHECK_FALSE(c.layer_is_sparse(0));
    CHECK(c.layer_is_sparse(1));
    CHECK(ModelConfig::from_json_text(c.to_json_text()) == c);
  }
}
