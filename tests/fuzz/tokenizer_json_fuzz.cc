// tokenizer.json: the input is the file; a tokenizer it makes encodes and
// decodes a fixed mixed-script text.
#include "fuzz_input.h"
#include "rlcore/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  rlcore_fuzz::expect_only_rlcore_errors("tokenizer.json", [&] {
    const rlcore::Tokenizer tokenizer = rlcore::Tokenizer::from_json(rlcore_fuzz::as_text(data, size));
    const std::vector<int32_t> ids =
        tokenizer.encode("Hello, wörld! 1+1=2 \xE4\xBD\xA0\xE5\xA5\xBD  \t\n\xF0\x9F\x98\x80");
    (void)tokenizer.decode(ids);
  });
  return 0;
}
