// JSONL datasets: the input is the file after its first byte, which picks
// prompts only (RL) or prompt/response pairs (SFT); records are tokenized
// with the built-in tokenizer.
#include "fuzz_input.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const std::string path = rlcore_fuzz::write_temp_file("data.jsonl", rlcore_fuzz::as_text(data + 1, size - 1));
  rlcore::DataConfig config;
  config.max_prompt_length = 64;
  rlcore_fuzz::expect_only_rlcore_errors("jsonl dataset", [&] {
    const rlcore::Dataset dataset = rlcore::Dataset::load({path}, config, tokenizer, data[0] % 2 == 1);
    for (int64_t i = 0; i < dataset.size(); ++i) (void)dataset.at(i);
  });
  return 0;
}
