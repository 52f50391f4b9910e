// `rlcore model init` and write_hf_checkpoint: the directory loads back into a
// Transformer with identical weights, its tokenizer loads, and --out is guarded.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "rlcore/core/checkpoint_init.h"
#include "rlcore/core/cli/cli.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace fs = std::filesystem;

namespace {

struct ScratchDir {
  ScratchDir() : path(fs::temp_directory_path() / ("rlcore_model_init_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

nlohmann::json load_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("model init writes an HF checkpoint that loads back identically", "[model-init]") {
  ScratchDir scratch;
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3"}) {
    INFO("arch " << arch);
    const fs::path out = scratch.path / arch;
    const rlcore::ModelInitResult result = rlcore::init_random_checkpoint({arch, "tiny", out, 5, "", false});
    CHECK(result.files.size() == 5);
    CHECK(result.config.vocab_size % 64 == 0);
    CHECK(result.config.vocab_size >= rlcore::make_builtin_tokenizer().vocab_size());
    CHECK(result.num_parameters == rlcore::model::num_parameters(result.config));
    CHECK(result.bytes > static_cast<std::uint64_t>(result.num_parameters) * 4);

    const auto config = rlcore::model::ModelConfig::from_file((out / "config.json").string());
    CHECK(config == result.config);
    rlcore::model::Transformer expected(config);
    expected.init_random(5);
    rlcore::model::Transformer loaded(config);
    loaded.load(rlcore::SafetensorsCheckpoint(out).load_all());
    for (const auto& [name, tensor] : expected.named_parameters()) {
      INFO(name);
      const auto& other = loaded.named_parameters();
      const auto it =
          std::find_if(other.begin(), other.end(), [&name = name](const auto& e) { return e.first == name; });
      REQUIRE(it != other.end());
      CHECK(at::equal(tensor, it->second));
    }

    const rlcore::Tokenizer tokenizer = rlcore::Tokenizer::from_pretrained_dir(out.string());
    REQUIRE(tokenizer.eos_token_id());
    CHECK(tokenizer.id_to_token(*tokenizer.eos_token_id()) == "<|im_end|>");
    CHECK(tokenizer.id_to_token(*tokenizer.pad_token_id()) == "<|endoftext|>");
    CHECK(config.eos_token_ids == std::vector<int64_t>{*tokenizer.eos_token_id()});
    CHECK(tokenizer.decode(tokenizer.encode("Question: 2 + 3?")) == "Question: 2 + 3?");

    const auto tokenizer_config = load_json(out / "tokenizer_config.json");
    CHECK(tokenizer_config["eos_token"] == "<|im_end|>");
    CHECK(tokenizer_config["bos_token"].is_null());
    CHECK(tokenizer_config["model_max_length"] == config.max_position_embeddings);
    CHECK(tokenizer_config["chat_template"].get<std::string>().find("<|im_start|>") != std::string::npos);
    CHECK(tokenizer_config["added_tokens_decoder"].size() == 3);
    CHECK(load_json(out / "generation_config.json")["eos_token_id"] == *tokenizer.eos_token_id());
  }
}

TEST_CASE("model init takes a dtype and a seed", "[model-init]") {
  ScratchDir scratch;
  const auto a = rlcore::init_random_checkpoint({"llama", "tiny", scratch.path / "a", 1, "bfloat16", false});
  CHECK(a.config.torch_dtype == "bfloat16");
  CHECK(rlcore::SafetensorsCheckpoint(scratch.path / "a").load("model.norm.weight").scalar_type() == at::kBFloat16);
  rlcore::init_random_checkpoint({"llama", "tiny", scratch.path / "b", 2, "bfloat16", false});
  const auto name = "model.layers.0.mlp.up_proj.weight";
  CHECK_FALSE(at::equal(rlcore::SafetensorsCheckpoint(scratch.path / "a").load(name),
                        rlcore::SafetensorsCheckpoint(scratch.path / "b").load(name)));
  CHECK_THROWS_AS(rlcore::init_random_checkpoint({"llama", "tiny", scratch.path / "c", 1, "fp8", false}),
                  rlcore::ConfigError);
  CHECK_THROWS_AS(rlcore::init_random_checkpoint({"gpt2", "tiny", scratch.path / "d", 1, "", false}),
                  rlcore::ConfigError);
}

TEST_CASE("rlcore model init refuses a non-empty --out unless --force", "[model-init][cli]") {
  ScratchDir scratch;
  const std::string out = (scratch.path / "ckpt").string();
  auto run = [](const std::vector<std::string>& args, std::string& text) {
    std::istringstream in;
    std::ostringstream stdout_text, stderr_text;
    const int status = rlcore::cli::run_cli(args, in, stdout_text, stderr_text);
    text = stdout_text.str() + stderr_text.str();
    return status;
  };
  std::string text;
  REQUIRE(run({"model", "init", "--arch", "qwen2", "--size", "tiny", "--out", out}, text) == 0);
  CHECK_THAT(text,
             Catch::Contains("parameters") && Catch::Contains("model.safetensors") && Catch::Contains("config.json"));
  CHECK(run({"model", "init", "--arch", "qwen2", "--size", "tiny", "--out", out}, text) == 1);
  CHECK_THAT(text, Catch::Contains("not empty") && Catch::Contains("--force") && Catch::Contains(out));
  CHECK(run({"model", "init", "--arch", "qwen2", "--size", "tiny", "--out", out, "--force", "--seed", "3"}, text) == 0);
  CHECK(run({"model", "init", "--arch", "qwen2", "--out", out + "2"}, text) == 1);
  CHECK_THAT(text, Catch::Contains("size"));
  CHECK(run({"model", "frobnicate"}, text) == 2);
  CHECK(run({"model", "--help"}, text) == 0);
  CHECK_THAT(text, Catch::Contains("--arch"));
}
