// Parquet datasets: the input is a .parquet file, loaded as an RL dataset with
// the built-in tokenizer (Arrow parses it; rlcore's reader turns the rows into
// records). Seeds: verl-layout files and files of every column type rlcore reads.
#include "fuzz_input.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const std::string path = rlcore_fuzz::write_temp_file("data.parquet", rlcore_fuzz::as_text(data, size));
  rlcore::config::DataConfig config;
  config.max_prompt_length = 64;
  config.truncation = "left";
  rlcore_fuzz::expect_only_rlcore_errors("dataset_parquet", [&] {
    const rlcore::data::Dataset dataset = rlcore::data::Dataset::load({path}, config, tokenizer, false);
    for (int64_t i = 0; i < dataset.size(); ++i) (void)dataset.at(i);
  });
  return 0;
}
