// The padded prompt/response layout the trainer and its workers exchange.
#include "workers/sequences.h"
#include "../../common/run_config_testing.h"

#include "rlcore/train_engine.h"

using namespace rlcore;
using namespace rlcore::workers;
using rlcore_test::error_of;

namespace {

std::vector<int64_t> row(const at::Tensor& t, int64_t i) {
  const at::Tensor r = t[i].to(at::kLong).contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

}  // namespace

TEST_CASE("prompts are left-padded and round-trip without padding") {
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {8}};
  const Batch batch = workers::make_prompt_batch(prompts, 0);
  CHECK(row(batch.tensor(columns::kPromptIds), 0) == std::vector<int64_t>{5, 6, 7});
  CHECK(row(batch.tensor(columns::kPromptIds), 1) == std::vector<int64_t>{0, 0, 8});
  CHECK(row(batch.tensor(columns::kPromptMask), 1) == std::vector<int64_t>{0, 0, 1});
  CHECK(workers::unpad_prompts(batch) == prompts);
}

TEST_CASE("a rollout becomes input_ids = prompt | response with HF position ids") {
  const Batch prompts = workers::make_prompt_batch({{5, 6}, {7}}, 0);
  GenerationOutput generated;
  generated.token_ids = {{9, 2}, {3}};
  generated.logprobs = {{-0.5f, -0.25f}, {-1.0f}};
  generated.finish_reasons = {FinishReason::kStop, FinishReason::kLength};
  const Batch seq = workers::make_sequence_batch(prompts, generated, 3, 0);
  CHECK(row(seq.tensor(columns::kInputIds), 0) == std::vector<int64_t>{5, 6, 9, 2, 0});
  CHECK(row(seq.tensor(columns::kInputIds), 1) == std::vector<int64_t>{0, 7, 3, 0, 0});
  CHECK(row(seq.tensor(columns::kAttentionMask), 1) == std::vector<int64_t>{0, 1, 1, 0, 0});
  CHECK(row(seq.tensor(columns::kPositionIds), 1) == std::vector<int64_t>{0, 0, 1, 1, 1});
  CHECK(row(seq.tensor(columns::kResponses), 0) == std::vector<int64_t>{9, 2, 0});
  CHECK(row(seq.tensor(columns::kResponseMask), 0) == std::vector<int64_t>{1, 1, 0});
  CHECK(seq.tensor(columns::kRolloutLogProbs)[0][1].item<float>() == -0.25f);
  CHECK(seq.tensor(columns::kRolloutLogProbs)[1][1].item<float>() == 0.0f);
  CHECK(row(seq.tensor(columns::kFinishedByStop), 0) == std::vector<int64_t>{1});
  CHECK(workers::response_tokens(seq) == std::vector<std::vector<int32_t>>{{9, 2}, {3}});
}

TEST_CASE("a rollout with a wrong number of responses is refused") {
  const Batch prompts = workers::make_prompt_batch({{5}, {7}}, 0);
  GenerationOutput generated;
  generated.token_ids = {{1}};
  CHECK_THAT(error_of<ValueError>([&] { workers::make_sequence_batch(prompts, generated, 2, 0); }),
             Catch::Contains("1 responses for 2 prompts"));
}

TEST_CASE("supervised pairs mask every response token and nothing else") {
  const Batch seq = workers::make_supervised_batch({{1, 2}, {3}}, {{4}, {5, 6}}, 0);
  CHECK(row(seq.tensor(columns::kInputIds), 0) == std::vector<int64_t>{1, 2, 4, 0});
  CHECK(row(seq.tensor(columns::kInputIds), 1) == std::vector<int64_t>{0, 3, 5, 6});
  CHECK(row(seq.tensor(columns::kResponseMask), 0) == std::vector<int64_t>{1, 0});
  CHECK(row(seq.tensor(columns::kResponseMask), 1) == std::vector<int64_t>{1, 1});
}
