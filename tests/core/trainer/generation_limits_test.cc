// The generation limits the trainer hands every rollout: EOS stops a response
// unless actor_rollout_ref.rollout.ignore_eos, verl's SamplingParams(ignore_eos).
#include "trainer/generation.h"

#include <catch2/catch.hpp>

using namespace rlcore;

TEST_CASE("the EOS token stops generation unless rollout.ignore_eos") {
  const Tokenizer tokenizer = make_builtin_tokenizer();  // eos <|im_end|>, pad <|endoftext|>
  const int32_t eos = *tokenizer.eos_token_id();
  config::RolloutConfig rollout;

  const trainer::GenerationLimits stopping = trainer::generation_limits(tokenizer, 6, rollout);
  CHECK(stopping.max_tokens == 6);
  CHECK(stopping.stop_token_ids == std::vector<int32_t>{eos});
  CHECK(stopping.pad_token_id == *tokenizer.pad_token_id());

  rollout.ignore_eos = true;
  const trainer::GenerationLimits running = trainer::generation_limits(tokenizer, 6, rollout);
  CHECK(running.max_tokens == 6);
  CHECK(running.stop_token_ids.empty());
  CHECK(running.pad_token_id == *tokenizer.pad_token_id());  // padding is unchanged
}
