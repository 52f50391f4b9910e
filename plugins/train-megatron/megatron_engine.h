// MegatronEngine: the `megatron` TrainEngine. Tensor x pipeline x data
// parallel in Megatron-core's layout: each rank holds fp32 master weights,
// gradients and AdamW state of its TP shards of its pipeline stage's
// parameters (rlcore/model/megatron_layout.h); micro-batches flow through the
// stages GPipe-style (every forward, then every backward); gradients are
// averaged over dp. See docs/train-megatron.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train-common/lr_schedule.h"
#include "train-common/micro_batch_routing.h"
#include "train-common/micro_batches.h"
#include "megatron_options.h"
#include "parallel_groups.h"
#include "rlcore/capabilities.h"
#include "rlcore/model/megatron_layout.h"
#include "rlcore/model/transformer.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"
#include "train-common/shard_state.h"
#include "stage_model.h"

namespace rlcore::train_megatron {

class MegatronEngine final : public TrainEngine,
                             public DataParallel,
                             public TensorParallel,
                             public PipelineParallel,
                             public OffloadsState,
                             public ComputesSumPiSquared,
                             public ReplaysRouting {
 public:
  // Reads context.model_path (HF config.json + safetensors); each rank reads
  // only the tensors of its stage and keeps its TP shards. Collective.
  MegatronEngine(const MegatronOptions& options, const ComponentContext& context);

  ModelOutput forward(const Batch& batch, const ForwardOptions& options) override;
  ModelOutput forward_with_sum_pi_squared(const Batch& batch, const ForwardOptions& options,
                                          at::Tensor& sum_pi_squared) override;
  TrainStepOutput train_step(const Batch& batch, const ForwardOptions& options, const LossFunction& loss) override;

  std::vector<ParameterShard> parameter_shards() const override;
  // Megatron names, canonical (tp = 1) layout, fp32; gathered inside the tp x pp replica.
  void for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) override;

  void save_checkpoint(const std::string& dir) override;
  void load_checkpoint(const std::string& dir) override;
  void export_hf(const std::string& dir) override;

  void offload(OffloadSet what) override;
  void reload(OffloadSet what) override;
  TrainMemory memory() const override;

  // Routing replay of a mixture of experts (megatron_compute.cc); ConfigError for a dense model.
  void set_routing_replay(bool replay, bool record) override;
  at::Tensor take_routing() override;

  int64_t step() const override { return step_; }

  const model::ModelConfig& model_config() const { return config_; }

 private:
  // A parameter piece this rank holds.
  struct LocalParam {
    model::megatron::MegatronParam meta;
    train_common::ShardState state;
    bool counted_in_norm = true;  // false for replicated copies on tp ranks > 0 and the tied output copy
    bool tied_output = false;     // the last stage's copy of the tied word embeddings
    bool expert = false;          // split over ep: averaged over edp, its norm summed over ep
  };
  using MicroBatch = train_common::MicroBatch;
  struct PipelineResult;
  struct MetricSums;

  int64_t owner_stage(const model::megatron::MegatronParam& param) const;
  // The ep rank holding an expert's weights (this rank's for any other parameter).
  int64_t owner_ep_rank(const model::megatron::MegatronParam& param) const;
  // Whether this rank holds (a TP shard of) `param`: its stage's, and its experts.
  bool holds(const model::megatron::MegatronParam& param) const;
  void load_initial_weights(const std::string& model_path);
  // The compute-dtype tensors of every local parameter (leaves with gradients when asked).
  std::vector<at::Tensor> compute_weights(bool requires_grad) const;
  at::Tensor weight(const std::vector<at::Tensor>& weights, const std::string& name) const;
  LayerWeights layer_weights(const std::vector<at::Tensor>& weights, int64_t layer) const;
  at::Tensor output_weight(const std::vector<at::Tensor>& weights) const;

  PipelineResult run_pipeline(std::vector<MicroBatch>& micro, const ForwardOptions& options, const LossFunction* loss,
                              const GlobalBatchInfo& global, const std::vector<at::Tensor>& weights,
                              bool sum_pi_squared = false);
  // The router's losses of each micro-batch on this stage (coefficient-weighted,
  // for the backward; undefined with both coefficients 0), and their metrics.
  std::vector<at::Tensor> add_router_losses(const std::vector<MicroBatch>& micro,
                                            const std::vector<model::MoeRouting>& routing, MetricSums& metrics);
  ModelOutput forward_outputs(const Batch& batch, const ForwardOptions& options, at::Tensor* sum_pi_squared);
  // Every micro-batch's routing in the column's layout, [rows, L, sparse layers,
  // top_k] int16 on the CPU: each stage's layers, assembled over pp. Collective over pp.
  at::Tensor stacked_routing(const std::vector<MicroBatch>& micro, const std::vector<model::MoeRouting>& routing) const;
  void accumulate_gradients(const std::vector<at::Tensor>& leaves);
  void reduce_gradients();
  // Sums the gradients of the parameters `which` selects over `group` and divides by dp.
  void average_over(const CommGroup& group, const std::function<bool(const LocalParam&)>& which);
  double clip_and_step();
  void zero_grads();

  // The canonical full tensor of `param` (one of master / exp_avg / exp_avg_sq
  // chosen by `part`), assembled on every rank of the replica.
  at::Tensor gather_full(const model::megatron::MegatronParam& param,
                         const std::function<const at::Tensor&(const LocalParam&)>& part) const;

  std::vector<train_common::ShardState*> shard_states();  // in model order

  MegatronOptions options_;
  std::string model_path_;
  bool trainable_;
  at::Device device_;
  train_common::StatePlacement placement_;  // offload and reload, beside the compute stream
  at::ScalarType compute_dtype_;
  model::ModelConfig config_;
  ParallelGroups groups_;
  StageModel stage_;
  model::Transformer skeleton_;  // meta device: masks and rotary angles only
  int64_t first_layer_ = 0, end_layer_ = 0;
  std::vector<LocalParam> params_;
  std::map<std::string, size_t> index_;  // name -> params_ index (the tied output copy is not indexed)
  train_common::LrSchedule schedule_;
  train_common::RoutingReplay routing_replay_;
  at::Tensor recorded_routing_;  // the last recording forward()'s (take_routing)
  int64_t step_ = 0;
  int64_t adam_steps_ = 0;
};

}  // namespace rlcore::train_megatron
