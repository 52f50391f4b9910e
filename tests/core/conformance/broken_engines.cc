// Deliberately broken engines for the conformance tests: each wraps an in-tree
// engine and breaks one behaviour (broken_engines.h lists them); each plugin of
// broken_plugin.cc registers one, so the suite must fail exactly the check that covers it.
#include "broken_engines.h"

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "native_engine.h"
#include "sharding_manager_impl.h"
#include "rlcore/safetensors/safetensors.h"

namespace broken {

namespace fs = std::filesystem;
using namespace rlcore;

// Forwards every call to the fsdp engine; the broken behaviour overrides one.
class WrappedTrainEngine : public TrainEngine {
 public:
  WrappedTrainEngine(const train_fsdp::FsdpOptions& options, const ComponentContext& context)
      : inner_(std::make_unique<train_fsdp::FsdpEngine>(options, context)) {}
  explicit WrappedTrainEngine(std::unique_ptr<TrainEngine> inner) : inner_(std::move(inner)) {}
  ModelOutput forward(const Batch& batch, const ForwardOptions& options) override {
    return inner_->forward(batch, options);
  }
  TrainStepOutput train_step(const Batch& batch, const ForwardOptions& options, const LossFunction& loss) override {
    return inner_->train_step(batch, options, loss);
  }
  std::vector<ParameterShard> parameter_shards() const override { return inner_->parameter_shards(); }
  void for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) override {
    inner_->for_each_full_parameter(visit);
  }
  void save_checkpoint(const std::string& dir) override { inner_->save_checkpoint(dir); }
  void load_checkpoint(const std::string& dir) override { inner_->load_checkpoint(dir); }
  void export_hf(const std::string& dir) override { inner_->export_hf(dir); }
  void offload(OffloadSet what) override { inner_->offload(what); }
  void reload(OffloadSet what) override { inner_->reload(what); }
  TrainMemory memory() const override { return inner_->memory(); }
  int64_t step() const override { return inner_->step(); }

 protected:
  TrainEngine& inner() const { return *inner_; }

 private:
  std::unique_ptr<TrainEngine> inner_;
};

class WrongLogProbs final : public WrappedTrainEngine {
 public:
  using WrappedTrainEngine::WrappedTrainEngine;
  ModelOutput forward(const Batch& batch, const ForwardOptions& options) override {
    ModelOutput out = WrappedTrainEngine::forward(batch, options);
    out.log_prob = out.log_prob + 0.01;
    return out;
  }
};

// Saves, then rewrites every safetensors file of the checkpoint without its last
// tensor (one optimizer moment of the last unit): the kind of loss a careless
// writer makes, which load_checkpoint may or may not notice.
class DroppingCheckpoint final : public WrappedTrainEngine {
 public:
  using WrappedTrainEngine::WrappedTrainEngine;
  void save_checkpoint(const std::string& dir) override {
    WrappedTrainEngine::save_checkpoint(dir);
    for (const auto& file : fs::directory_iterator(dir)) {
      if (file.path().extension() != ".safetensors") continue;
      const SafetensorsFile read(file.path());
      NamedTensors tensors = read.load_all();
      const SafetensorsMetadata metadata = read.metadata();
      tensors.pop_back();
      save_safetensors(file.path(), tensors, metadata);
    }
  }
};

// fsdp's gathers into the caller's buffers, each one element later than the
// offsets it lists (an off-by-one a hand-written layout makes).
class ShiftedGatherInto final : public WrappedTrainEngine, public GathersIntoBuffers {
 public:
  ShiftedGatherInto(const train_fsdp::FsdpOptions& options, const ComponentContext& context)
      : WrappedTrainEngine(std::make_unique<train_fsdp::FsdpEngine>(options, context)) {}
  std::vector<Gather> full_parameter_gathers() const override {
    std::vector<Gather> gathers = fsdp().full_parameter_gathers();
    for (Gather& gather : gathers) ++gather.numel;
    return gathers;
  }
  void for_each_full_parameter_into(const std::function<at::Tensor(size_t)>& destination,
                                    const std::function<void(const std::string&, const at::Tensor&)>& visit) override {
    fsdp().for_each_full_parameter_into(
        [&](size_t gather) {
          const at::Tensor buffer = destination(gather);
          return buffer.defined() ? buffer.narrow(0, 1, buffer.numel() - 1) : buffer;
        },
        visit);
  }

 private:
  train_fsdp::FsdpEngine& fsdp() const { return static_cast<train_fsdp::FsdpEngine&>(inner()); }
};

// Records the version but never touches the weights.
class IgnoresLoadWeights final : public InferenceEngine {
 public:
  IgnoresLoadWeights(const infer_native::NativeEngineOptions& options, const ComponentContext& context)
      : inner_(options, context) {}
  GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling) override {
    GenerationOutput out = inner_.generate(prompts, sampling);
    out.weight_version = version_;
    return out;
  }
  std::vector<WeightMeta> weight_meta() const override { return inner_.weight_meta(); }
  void load_weights(const NamedTensorList&, int64_t version) override { version_ = version; }
  int64_t weight_version() const override { return version_; }
  void sleep() override {}
  void wake_up() override {}

 private:
  infer_native::NativeEngine inner_;
  int64_t version_ = 0;
};

// native, whose log-probs after wake_up() are one fp32 ulp off (as when the weights come back
// apart and fused projections run as separate GEMMs); the tokens stay the same.
class RoundsDifferentlyAfterWakeUp final : public InferenceEngine {
 public:
  RoundsDifferentlyAfterWakeUp(const infer_native::NativeEngineOptions& options, const ComponentContext& context)
      : inner_(options, context) {}
  GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling) override {
    GenerationOutput out = inner_.generate(prompts, sampling);
    if (woken_) {
      for (auto& row : out.logprobs)
        for (float& logprob : row) logprob = std::nextafter(logprob, 0.0f);
    }
    return out;
  }
  std::vector<WeightMeta> weight_meta() const override { return inner_.weight_meta(); }
  void load_weights(const NamedTensorList& weights, int64_t version) override { inner_.load_weights(weights, version); }
  int64_t weight_version() const override { return inner_.weight_version(); }
  void sleep() override { inner_.sleep(); }
  void wake_up() override {
    inner_.wake_up();
    woken_ = true;
  }

 private:
  infer_native::NativeEngine inner_;
  bool woken_ = false;
};

// The naive manager, which keeps redundant copies, claiming the bucketed one's bound.
class OverclaimedBound final : public ShardingManager, public BoundedSwapMemory {
 public:
  explicit OverclaimedBound(const hybrid_engine::HybridOptions& options) : inner_(options) {}
  void attach(HybridEngines engines) override { inner_.attach(std::move(engines)); }
  SwapStats to_rollout(int64_t version) override { return inner_.to_rollout(version); }
  SwapStats to_train() override { return inner_.to_train(); }
  bool in_rollout() const override { return inner_.in_rollout(); }
  const MemoryLedger& ledger() const override { return inner_.ledger(); }

 private:
  hybrid_engine::NaiveShardingManager inner_;
};

void register_log_probs(PluginRegistrar& registrar) {
  registrar.add<TrainEngine>("broken_log_probs", "fsdp with log-probs off by 0.01", train_fsdp::fsdp_options_schema(),
                             [](const train_fsdp::FsdpOptions& options, const ComponentContext& context) {
                               return std::make_shared<WrongLogProbs>(options, context);
                             });
}

void register_checkpoint(PluginRegistrar& registrar) {
  registrar.add<TrainEngine>("broken_checkpoint", "fsdp whose checkpoints lose a tensor",
                             train_fsdp::fsdp_options_schema(),
                             [](const train_fsdp::FsdpOptions& options, const ComponentContext& context) {
                               return std::make_shared<DroppingCheckpoint>(options, context);
                             });
}

void register_gather_into(PluginRegistrar& registrar) {
  registrar.add<TrainEngine>("broken_gather_into", "fsdp gathering one element past its listed offsets",
                             train_fsdp::fsdp_options_schema(),
                             [](const train_fsdp::FsdpOptions& options, const ComponentContext& context) {
                               return std::make_shared<ShiftedGatherInto>(options, context);
                             });
}

void register_load_weights(PluginRegistrar& registrar) {
  registrar.add<InferenceEngine>("broken_load_weights", "native that ignores load_weights",
                                 OptionsSchema<infer_native::NativeEngineOptions>(),
                                 [](const infer_native::NativeEngineOptions& options, const ComponentContext& context) {
                                   return std::make_shared<IgnoresLoadWeights>(options, context);
                                 });
}

void register_wake_up(PluginRegistrar& registrar) {
  registrar.add<InferenceEngine>("broken_wake_up", "native whose log-probs are one ulp off after wake_up",
                                 OptionsSchema<infer_native::NativeEngineOptions>(),
                                 [](const infer_native::NativeEngineOptions& options, const ComponentContext& context) {
                                   return std::make_shared<RoundsDifferentlyAfterWakeUp>(options, context);
                                 });
}

void register_swap_bound(PluginRegistrar& registrar) {
  registrar.add<ShardingManager>(
      "broken_swap_bound", "naive, claiming the bucketed manager's memory bound",
      hybrid_engine::hybrid_options_schema(),
      [](const hybrid_engine::HybridOptions& options) { return std::make_unique<OverclaimedBound>(options); });
}

}  // namespace broken
