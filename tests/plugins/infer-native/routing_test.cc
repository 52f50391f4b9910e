// Routing replay's rollout half (RecordsRouting): each output's recorded
// experts are the ones a full forward over its prompt and response routes to,
// in every decode mode; a dense model refuses to record.
#include "engine_testing.h"

#include "rlcore/capabilities.h"
#include "rlcore/model/routing.h"
#include "scheduler.h"

using namespace infer_native_test;
using rlcore::infer_native::DecodeMode;
using rlcore::infer_native::Scheduler;
using rlcore::infer_native::SchedulerOptions;
using rlcore::infer_native::Sequence;

namespace routing_test {

// The experts a forward without a cache routes `ids` to: [tokens, sparse layers, top_k].
at::Tensor full_forward_routing(const Transformer& model, const std::vector<int32_t>& ids) {
  at::NoGradGuard no_grad;
  const at::Tensor input = row_tensor(ids);
  rlcore::model::ForwardContext ctx = model.prepare(input, {}, {}, nullptr);
  rlcore::model::MoeRouting routing;
  ctx.routing = &routing;
  model.hidden_states(input, ctx);
  return rlcore::model::stack_routing(routing, model.config(), {static_cast<int64_t>(ids.size())});
}

// Sorted within each token's choices: the set of experts, whatever order top-k lists them in.
at::Tensor expert_sets(const at::Tensor& routed) { return std::get<0>(routed.sort(-1)); }

}  // namespace routing_test

TEST_CASE("infer-native records each output's routing: what a full forward over prompt and response routes",
          "[infer_native][moe]") {
  Fixture fixture("qwen3_moe", 3);
  auto engine = make_engine(fixture.dir.path());
  REQUIRE(rlcore::supports<rlcore::RecordsRouting>(engine));
  const auto& config = fixture.model.config();
  const auto sparse = static_cast<int64_t>(rlcore::model::sparse_layers(config).size());

  engine.set_record_routing(true);
  rlcore::SamplingParams params = sampled(7, 11);
  params.n = 2;
  const std::vector<std::vector<int32_t>> prompts(test_prompts().begin(), test_prompts().begin() + 3);
  const rlcore::GenerationOutput out = engine.generate(prompts, params);
  const std::vector<at::Tensor> routing = engine.take_routing();
  REQUIRE(routing.size() == out.token_ids.size());
  for (size_t i = 0; i < routing.size(); ++i) {
    std::vector<int32_t> fed = prompts[i / 2];
    fed.insert(fed.end(), out.token_ids[i].begin(), out.token_ids[i].end() - 1);  // the last token is never fed
    REQUIRE(routing[i].sizes() ==
            at::IntArrayRef({static_cast<int64_t>(fed.size()), sparse, config.num_experts_per_tok}));
    CHECK(at::equal(routing_test::expert_sets(routing[i]),
                    routing_test::expert_sets(routing_test::full_forward_routing(fixture.model, fed))));
  }
  CHECK(engine.take_routing().empty());  // taken

  engine.set_record_routing(false);
  engine.generate(prompts, params);
  CHECK(engine.take_routing().empty());
}

TEST_CASE("shape-static decode steps record the eager steps' routing", "[infer_native][moe]") {
  Fixture fixture("qwen3_moe", 4);
  const auto decode = [&](DecodeMode mode) {
    SchedulerOptions options;
    options.mode = mode;
    options.record_routing = true;
    Scheduler scheduler(fixture.model, options);
    const int64_t limits[] = {5, 2, 8, 3};
    for (int64_t i = 0; i < 4; ++i) {
      auto prompt = std::make_shared<const std::vector<int32_t>>(test_prompts()[i / 2]);
      scheduler.add(std::make_unique<Sequence>(std::to_string(i), prompt, greedy(limits[i]), limits[i], 7, i));
    }
    std::map<std::string, at::Tensor> routed;
    while (!scheduler.idle()) {
      for (auto& seq : scheduler.step(0).finished) routed[seq->id] = at::cat(seq->routed);
    }
    return routed;
  };
  const auto eager = decode(DecodeMode::kEager);
  const auto shape_static = decode(DecodeMode::kShapeStatic);
  REQUIRE(eager.size() == 4);
  for (const auto& [id, routed] : eager) {
    CHECK(at::equal(routing_test::expert_sets(routed), routing_test::expert_sets(shape_static.at(id))));
  }
}

TEST_CASE("a dense model refuses to record its routing, naming the key", "[infer_native][moe]") {
  Fixture fixture("llama", 1);
  auto engine = make_engine(fixture.dir.path());
  CHECK_THROWS_WITH(engine.set_record_routing(true), Catch::Contains("enable_rollout_routing_replay") &&
                                                         Catch::Contains("llama") &&
                                                         Catch::Contains("not a mixture of experts"));
}
