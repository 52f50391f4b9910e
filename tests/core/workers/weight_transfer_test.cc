// The actor's weights to a standalone rollout pool over the bridge (three
// ranks as threads, Gloo through a file store): every target arrives bit for
// bit in the receiving engine's layout (a fused target from three sources, a
// TP shard per rollout rank), bucketed (a parameter larger than a bucket goes
// alone), versioned; a target whose source never comes is an error naming both.
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "workers/weight_transfer.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"

using namespace std::chrono_literals;
using rlcore::CommGroup;
using rlcore::NamedTensorList;
using rlcore::RolloutLayout;
using rlcore::WeightMeta;

namespace weight_transfer_test {

// A rollout engine that only holds weights.
class WeightsOnlyEngine : public rlcore::InferenceEngine {
 public:
  explicit WeightsOnlyEngine(std::vector<WeightMeta> meta) : meta_(std::move(meta)) {}
  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>&, const rlcore::SamplingParams&) override {
    throw rlcore::ValueError("not a generating engine");
  }
  std::vector<WeightMeta> weight_meta() const override { return meta_; }
  void load_weights(const NamedTensorList& weights, int64_t version) override {
    for (const auto& [name, tensor] : weights) held[name] = tensor.clone();
    version_ = version;
  }
  int64_t weight_version() const override { return version_; }
  void sleep() override {}
  void wake_up() override {}

  std::map<std::string, at::Tensor> held;

 private:
  std::vector<WeightMeta> meta_;
  int64_t version_ = 0;
};

// "qkv" is q, k and v stacked; "w_shard" is this TP rank's rows of "w"; the rest are themselves.
class TestAdaptor : public rlcore::WeightAdaptor {
 public:
  std::vector<std::string> sources(const WeightMeta& target, const RolloutLayout&) const override {
    if (target.name == "qkv") return {"q", "k", "v"};
    if (target.name == "w_shard") return {"w"};
    return {target.name};
  }
  void convert(const WeightMeta& target, const RolloutLayout& layout, const std::vector<at::Tensor>& full,
               at::Tensor& out) const override {
    if (target.name == "qkv") {
      out.copy_(at::cat(full, 0));
    } else if (target.name == "w_shard") {
      const int64_t rows = full[0].size(0) / layout.tp_size;
      out.copy_(full[0].narrow(0, layout.tp_rank * rows, rows));
    } else {
      out.copy_(full[0]);
    }
  }
};

std::map<std::string, at::Tensor> actor_parameters() {
  at::manual_seed(7);
  return {{"embed", at::randn({64, 16})},  // 4 KiB
          {"q", at::randn({8, 16}).to(at::kBFloat16)},
          {"k", at::randn({8, 16}).to(at::kBFloat16)},
          {"v", at::randn({8, 16}).to(at::kBFloat16)},
          {"w", at::randn({10, 4})},
          {"big", at::randn({2048})},           // 8 KiB: more than a bucket
          {"optimizer_only", at::randn({3})}};  // no rollout target reads it
}

std::vector<WeightMeta> rollout_targets() {
  return {{"embed", {64, 16}, at::kFloat},
          {"qkv", {24, 16}, at::kBFloat16},
          {"w_shard", {5, 4}, at::kFloat},
          {"big", {2048}, at::kFloat}};
}

struct Outcome {
  rlcore::workers::WeightTransferStats sent;
  std::vector<rlcore::workers::WeightTransferStats> received;
  std::vector<std::unique_ptr<WeightsOnlyEngine>> engines;
  std::vector<std::string> errors;
  std::string sender_error;
};

// The actor's rank 0 sends `names` of actor_parameters() in that order to two
// rollout ranks (TP 2); with `fail_after` >= 0 its gather throws after that many.
Outcome transfer(const std::vector<std::string>& names, int64_t bucket_bytes, int64_t version, int fail_after = -1) {
  const auto store = rlcore::runtime::RendezvousStore::on_this_host();
  rlcore::runtime::ProcessGroupOptions options;
  options.store_file = store->file();
  options.timeout = 30s;
  const auto parameters = actor_parameters();
  Outcome outcome;
  for (int r = 0; r < 2; ++r) outcome.engines.push_back(std::make_unique<WeightsOnlyEngine>(rollout_targets()));
  outcome.received.resize(2);
  outcome.errors.resize(2);
  auto sender = std::async(std::launch::async, [&] {
    const CommGroup bridge = rlcore::runtime::join_shared_group(options, "bridge", 0, 3);
    const auto visit_all = [&](const auto& visit) {
      int visited = 0;
      for (const auto& name : names) {
        if (visited++ == fail_after) throw rlcore::IoError("the gather of '" + name + "' failed");
        visit(name, parameters.at(name));
      }
    };
    try {
      return rlcore::workers::send_weights(visit_all, &bridge, bucket_bytes);
    } catch (const rlcore::IoError& e) {
      outcome.sender_error = e.what();
      return rlcore::workers::WeightTransferStats{};
    }
  });
  std::vector<std::future<void>> receivers;
  for (int r = 0; r < 2; ++r) {
    receivers.push_back(std::async(std::launch::async, [&, r] {
      const CommGroup bridge = rlcore::runtime::join_shared_group(options, "bridge", 1 + r, 3);
      RolloutLayout layout;
      layout.tp_size = 2;
      layout.tp_rank = r;
      try {
        outcome.received[r] =
            rlcore::workers::receive_weights(*outcome.engines[r], TestAdaptor(), layout, bridge, at::kCPU, version);
      } catch (const rlcore::ValueError& e) {
        outcome.errors[r] = e.what();
      }
    }));
  }
  REQUIRE(sender.wait_for(60s) == std::future_status::ready);
  for (auto& receiver : receivers) REQUIRE(receiver.wait_for(60s) == std::future_status::ready);
  outcome.sent = sender.get();
  return outcome;
}

}  // namespace weight_transfer_test

using namespace weight_transfer_test;

TEST_CASE("the actor's weights reach each rollout rank in its own layout, bucketed and versioned",
          "[trainer][weight_transfer]") {
  const std::vector<std::string> order = {"embed", "q", "k", "v", "w", "big", "optimizer_only"};
  const Outcome outcome = transfer(order, /*bucket_bytes=*/4096, /*version=*/7);
  const auto parameters = actor_parameters();
  CHECK(outcome.sent.tensors == 7);
  // embed fills a bucket; q, k, v, w share one; big goes alone; optimizer_only is the last.
  CHECK(outcome.sent.buckets == 4);
  for (int r = 0; r < 2; ++r) {
    INFO("rollout rank " << r);
    CHECK(outcome.errors[r].empty());
    const WeightsOnlyEngine& engine = *outcome.engines[r];
    CHECK(engine.weight_version() == 7);
    CHECK(outcome.received[r].tensors == 4);
    CHECK(outcome.received[r].buckets == outcome.sent.buckets);
    CHECK(outcome.received[r].bytes == outcome.sent.bytes);
    CHECK(at::equal(engine.held.at("embed"), parameters.at("embed")));
    CHECK(at::equal(engine.held.at("big"), parameters.at("big")));
    CHECK(engine.held.at("qkv").scalar_type() == at::kBFloat16);
    CHECK(at::equal(engine.held.at("qkv"), at::cat({parameters.at("q"), parameters.at("k"), parameters.at("v")}, 0)));
    CHECK(at::equal(engine.held.at("w_shard"), parameters.at("w").narrow(0, 5 * r, 5)));
  }
}

TEST_CASE("a target whose source the actor never sends is an error naming both", "[trainer][weight_transfer]") {
  const Outcome outcome = transfer({"embed", "q", "v", "w", "big"}, 1 << 20, 3);
  for (int r = 0; r < 2; ++r) {
    INFO("rollout rank " << r);
    CHECK_THAT(outcome.errors[r], Catch::Contains("the rollout's 'qkv' needs k") &&
                                      Catch::Contains("which the actor did not send") &&
                                      Catch::Contains("3 of 4 targets loaded"));
  }
  CHECK(outcome.sent.buckets == 1);  // everything fits one bucket of 1 MiB
}

TEST_CASE("an actor whose gather fails mid-transfer tells the rollout ranks instead of leaving them waiting",
          "[trainer][weight_transfer]") {
  // Fails at "w", after embed filled a bucket and q, k, v were added to the next.
  const Outcome outcome = transfer({"embed", "q", "k", "v", "w", "big"}, 4096, 5, /*fail_after=*/4);
  CHECK_THAT(outcome.sender_error, Catch::Contains("the gather of 'w' failed"));
  for (int r = 0; r < 2; ++r) {
    INFO("rollout rank " << r);
    CHECK_THAT(outcome.errors[r], Catch::Contains("the actor stopped sending weights version 5"));
  }
}
