// Training prompts through a real checkpoint's chat template: the ids rlcore's
// dataset makes from verl-style records equal what verl's dataset makes with
// transformers (apply_chat_template with the generation prompt and the
// template kwargs, then encode without special tokens), with the real Qwen3
// tokenizer and template.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlcore/core/data/dataset.h"
#include "rlcore/tokenizer/tokenizer.h"

#include <catch2/catch.hpp>

#include "../common/reference_python.h"
#include "../common/test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("verl-style prompts through Qwen3's own template give transformers' ids", "[hf][chat_template]") {
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "hf_tests" / "chat_prompts";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string script = rlcore_test::reference_script("hf/reference/hf_models.py");
  rlcore_test::run_reference(script,
                             {"chat_model", "qwen3", rlcore_test::source_dir() + "/tests/fixtures/tokenizers/qwen3",
                              (dir / "model").string()});
  const fs::path records = dir / "train.jsonl";
  {
    std::ofstream out(records);
    out << json{{"prompt", "What is 12 + 35? Let's think step by step and output the final answer after \"####\"."}}
               .dump()
        << "\n"
        << json{{"prompt",
                 {{{"role", "system"}, {"content", "Solve it."}}, {{"role", "user"}, {"content", "2x = 8; x?"}}}}}
               .dump()
        << "\n"
        << json{{"prompt",
                 {{{"role", "user"}, {"content", "Hi 🎉"}},
                  {{"role", "assistant"}, {"content", "Hello! 中文"}},
                  {{"role", "user"}, {"content", "  and now?\n"}}}}}
               .dump()
        << "\n";
  }
  for (const bool thinking : {false, true}) {
    SECTION(thinking ? "enable_thinking true" : "enable_thinking false") {
      rlcore::config::DataConfig config;
      config.max_prompt_length = 512;
      config.apply_chat_template_kwargs =
          rlcore::ConfigNode::parse(std::string("{enable_thinking: ") + (thinking ? "true" : "false") + "}", "test");
      const rlcore::Tokenizer tokenizer = rlcore::Tokenizer::from_pretrained_dir((dir / "model").string());
      const rlcore::data::Dataset data =
          rlcore::data::Dataset::load({records.string()}, config, tokenizer, false,
                                      rlcore::data::checkpoint_chat_renderer((dir / "model").string(), config));
      const json expected = json::parse(rlcore_test::run_reference(
          script, {"chat_ids", (dir / "model").string(), records.string(),
                   std::string("{\"enable_thinking\": ") + (thinking ? "true" : "false") + "}"}));
      REQUIRE(data.size() == 3);
      for (int64_t i = 0; i < 3; ++i) {
        INFO("record " << i);
        CHECK(json(data.at(i).prompt_ids) == expected[static_cast<size_t>(i)]);
      }
    }
  }
  fs::remove_all(dir);
}
