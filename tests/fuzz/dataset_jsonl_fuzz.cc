// Datasets: the input is a dataset file after its first byte, whose bits pick
// prompts only (RL) or prompt/response pairs (SFT), .jsonl or a .json array,
// the truncation mode, the prompt template and the overlong filter; records
// are tokenized with the built-in tokenizer.
#include "fuzz_input.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const uint8_t pick = data[0];
  const bool with_responses = pick & 1;
  const char* name = pick & 2 ? "data.json" : "data.jsonl";
  const std::string path = rlcore_fuzz::write_temp_file(name, rlcore_fuzz::as_text(data + 1, size - 1));
  rlcore::config::DataConfig config;
  config.max_prompt_length = 64;
  config.max_response_length = 32;
  static const char* const kTruncations[] = {"error", "left", "right", "error"};
  config.truncation = kTruncations[(pick >> 2) & 3];
  config.prompt_template = pick & 16 ? "plain" : "chat";
  config.system_prompt = pick & 16 ? "" : "Be brief.";
  config.filter_overlong_prompts = pick & 32;
  rlcore_fuzz::expect_only_rlcore_errors("dataset", [&] {
    const rlcore::data::Dataset dataset = rlcore::data::Dataset::load({path}, config, tokenizer, with_responses);
    for (int64_t i = 0; i < dataset.size(); ++i) (void)dataset.at(i);
  });
  return 0;
}
