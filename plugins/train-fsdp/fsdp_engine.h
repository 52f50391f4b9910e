// FsdpEngine: the `fsdp` TrainEngine. ZeRO-3 over the dp group: every unit
// (embeddings, each decoder layer, final norm + head) is one flat fp32 buffer
// of which each rank keeps a 1/N slice plus its gradient and AdamW state.
// Units are all-gathered for compute and freed right after; see
// docs/train-fsdp.md for the schedule and the memory model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train-common/adamw.h"
#include "dp_comm.h"
#include "fsdp_options.h"
#include "lora_adapters.h"
#include "train-common/lr_schedule.h"
#include "train-common/micro_batch_routing.h"
#include "train-common/micro_batches.h"
#include "sequence_parallel.h"
#include "train-common/router_losses.h"
#include "mixed_precision.h"
#include "rlcore/capabilities.h"
#include "rlcore/model/transformer.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"
#include "train-common/shard_state.h"
#include "unit_layout.h"

namespace rlcore::train_fsdp {

class GatheredUnit;
class GradWorkspace;
struct UnitGrad;

class FsdpEngine final : public TrainEngine,
                         public DataParallel,
                         public OffloadsState,
                         public ComputesSumPiSquared,
                         public TrainsLowRankAdapters,
                         public GathersIntoBuffers,
                         public ReplaysRouting {
 public:
  // Reads context.model_path (config.json + safetensors); each rank copies
  // only its slices. A value head missing from the checkpoint is initialised
  // from options.seed. Collective over the dp group (it ends with a barrier).
  FsdpEngine(const FsdpOptions& options, const ComponentContext& context);

  ModelOutput forward(const Batch& batch, const ForwardOptions& options) override;
  ModelOutput forward_with_sum_pi_squared(const Batch& batch, const ForwardOptions& options,
                                          at::Tensor& sum_pi_squared) override;
  TrainStepOutput train_step(const Batch& batch, const ForwardOptions& options, const LossFunction& loss) override;

  std::vector<ParameterShard> parameter_shards() const override;
  // With LoRA, the adapted projections' merged W + (alpha / r) B A under the base names (the rollout's
  // weights, the HF export); parameter_shards() stays the frozen base.
  void for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) override;
  // LoRA (lora.lora_rank > 0): the adapted projections' weight names; empty without LoRA.
  std::vector<std::string> adapted_parameters() const override;
  void for_each_full_base_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) override;
  // Local: every rank holds all adapters.
  at::Tensor merged_parameter(const std::string& name, const at::Tensor& base) override;
  // One gather per unit: its flat buffer, padded to a multiple of the dp size.
  std::vector<Gather> full_parameter_gathers() const override;
  // Destinations are used over several ranks; one rank visits its own (already full) shards, and a
  // unit with a LoRA adapter is gathered into memory of its own (its weights are merged in fp32).
  void for_each_full_parameter_into(const std::function<at::Tensor(size_t gather)>& destination,
                                    const std::function<void(const std::string&, const at::Tensor&)>& visit) override;

  void save_checkpoint(const std::string& dir) override;
  void load_checkpoint(const std::string& dir) override;
  void export_hf(const std::string& dir) override;

  void offload(OffloadSet what) override;
  void reload(OffloadSet what) override;
  TrainMemory memory() const override;

  // Routing replay of a mixture of experts (fsdp_compute.cc); ConfigError for a dense model.
  void set_routing_replay(bool replay, bool record) override;
  at::Tensor take_routing() override;

  int64_t step() const override { return step_; }

  const model::ModelConfig& model_config() const { return config_; }
  const LoraAdapters& lora() const { return lora_; }

 private:
  friend class GatheredUnit;
  using MicroBatch = train_common::MicroBatch;
  // What the forward of train_step keeps of one decoder layer for its backward:
  // the inputs (per micro-batch); without checkpointing also the outputs with
  // their autograd graph and the gathered unit those graphs hold.
  struct LayerStash {
    std::vector<at::Tensor> inputs;
    std::vector<at::Tensor> outputs;
    std::unique_ptr<GatheredUnit> unit;
  };
  // Bytes of the tensors a stash keeps (without checkpointing the outputs stand for their graphs).
  static double stashed_bytes(const std::vector<LayerStash>& stash);

  int64_t embed_unit() const { return 0; }
  int64_t layer_unit(int64_t layer) const { return 1 + layer; }
  int64_t head_unit() const { return static_cast<int64_t>(layouts_.size()) - 1; }
  bool tied() const;
  // False with LoRA: the base weights are frozen (no gradient, no AdamW state) and only the adapters train.
  bool base_trains() const { return !lora_.enabled(); }

  // Every full parameter, gathered unit by unit; with `merge`, LoRA merged into the adapted ones.
  void visit_full_parameters(const std::function<void(const std::string&, const at::Tensor&)>& visit, bool merge);
  // Visits the parameters of `unit` in `full` (its flat buffer).
  void visit_unit(int64_t unit, const at::Tensor& full,
                  const std::function<void(const std::string&, const at::Tensor&)>& visit, bool merge) const;
  bool unit_has_adapter(int64_t unit) const;
  void init_shards();
  void load_initial_weights();
  std::vector<train_common::ShardState*> shard_states();  // in unit order
  // The unit's full flat buffer (padded) in `dtype`, gathered from every rank
  // (the shards are cast before the gather: 16-bit halves the traffic).
  at::Tensor gather_full(int64_t unit, at::ScalarType dtype = at::kFloat) const;
  // The same into `into` (see GathersIntoBuffers); returns the unit's part of it.
  at::Tensor gather_into(int64_t unit, const at::Tensor& into) const;
  // ValueError naming the unit unless `into` can take its gather.
  void check_destination(int64_t unit, const at::Tensor& into) const;
  // Points the skeleton's parameter slots at `params` (the unit's, in order) / back at meta placeholders.
  void install(int64_t unit, const std::vector<at::Tensor>& params);
  void uninstall(int64_t unit);
  // Averages a unit's full gradient over dp (in the reduce dtype) and adds this rank's slice to its grad shard
  // (copies it into a cleared one). `full_grad` is overwritten.
  void reduce_gradient(int64_t unit, at::Tensor full_grad);

  // Embeddings and every layer; with `stash` (training) what the backward
  // needs of each layer is kept there, recorded with autograd when
  // checkpointing is off.
  std::vector<at::Tensor> forward_trunk(std::vector<MicroBatch>& micro, std::vector<LayerStash>* stash);
  // With `sum_pi_squared`, also Σπ² at each response position into it.
  ModelOutput head_outputs(const MicroBatch& micro, const at::Tensor& hidden, const ForwardOptions& options,
                           at::Tensor* sum_pi_squared = nullptr) const;
  ModelOutput forward_outputs(const Batch& batch, const ForwardOptions& options, at::Tensor* sum_pi_squared);
  // The micro-batches of `batch`: packed when use_remove_padding, a slice of each with sequence parallelism.
  std::vector<MicroBatch> micro_batches(const Batch& batch, const ForwardOptions& options) const;
  // Per-prediction outputs of head_outputs -> [rows, R] (gathered over the sp group first).
  at::Tensor to_rows(const MicroBatch& micro, const at::Tensor& values) const;
  // With `router_loss` (one per micro-batch), each sparse layer's backward adds
  // its part of the router losses, from the router logits in `routing`.
  void backward_trunk(std::vector<MicroBatch>& micro, std::vector<LayerStash>& stash,
                      std::vector<at::Tensor> grad_hidden, GradWorkspace& workspace,
                      train_common::MicroBatchRouting* routing = nullptr,
                      const std::vector<train_common::MicroBatchRouterLoss>* router_loss = nullptr);
  int64_t max_padded_numel() const;
  // Where `unit`'s gradient of this step goes (see UnitGrad), and its reduction once complete.
  UnitGrad start_unit_grad(int64_t unit, GradWorkspace& workspace, int slot);
  void finish_unit_grad(int64_t unit, UnitGrad& grad);
  double clip_and_step();  // returns the global grad norm
  double lora_clip_and_step();
  // Advances the lr schedule; this update's AdamW settings (clipping included),
  // or nullopt for a non-finite norm, whose update is skipped.
  std::optional<train_common::AdamWHyper> begin_update(double grad_norm);
  void zero_grads();                 // logically: see grad_cleared_
  void materialize_cleared_grads();  // writes the zeros of the units no reduce_gradient reached

  FsdpOptions options_;
  std::string model_path_;
  model::ModelHead head_;
  bool trainable_;
  at::Device device_;
  train_common::StatePlacement placement_;  // offload and reload, beside the compute stream
  MixedPrecision precision_;                // param: compute dtype of gathered units; reduce: of the gradient average
  DpComm dp_;
  std::unique_ptr<UlyssesParallel> ulysses_;  // null without sequence parallelism
  model::ModelConfig config_;
  // Parameters live on the meta device except while their unit is installed.
  model::Transformer skeleton_;
  LoraAdapters lora_;  // installs its forward on the skeleton's targeted Linears
  std::vector<UnitLayout> layouts_;
  std::vector<std::vector<at::Tensor*>> slots_;  // per unit, per parameter
  std::vector<std::vector<at::Tensor>> placeholders_;
  std::vector<train_common::ShardState> shards_;
  train_common::LrSchedule schedule_;
  train_common::RoutingReplay routing_replay_;
  at::Tensor recorded_routing_;  // the last recording forward()'s (take_routing)
  int64_t step_ = 0;             // train_step calls (drives the lr schedule)
  int64_t adam_steps_ = 0;       // updates applied (a step with a non-finite norm is skipped)
  // Per unit: the gradient shard is logically zero but not written (zero_grads()
  // only sets these); the next reduce_gradient copies instead of adding, so no
  // step spends a pass over 4 bytes per parameter on zeroing.
  std::vector<bool> grad_cleared_;
};

}  // namespace rlcore::train_fsdp
