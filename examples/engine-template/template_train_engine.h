// `template_train`: a single-process TrainEngine on the SDK's Transformer with
// AdamW and global-norm gradient clipping, as small as a conforming engine gets.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "rlcore/model/transformer.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"

namespace engine_template {

struct TrainOptions {
  struct Optim {
    double lr = 1e-6;
    double weight_decay = 0.01;
  } optim;
  double grad_clip = 1.0;  // <= 0: no clipping
};

rlcore::OptionsSchema<TrainOptions> train_options_schema();

class TemplateTrainEngine final : public rlcore::TrainEngine {
 public:
  TemplateTrainEngine(const TrainOptions& options, const rlcore::ComponentContext& context);

  rlcore::ModelOutput forward(const rlcore::Batch& batch, const rlcore::ForwardOptions& options) override;
  rlcore::TrainStepOutput train_step(const rlcore::Batch& batch, const rlcore::ForwardOptions& options,
                                     const rlcore::LossFunction& loss) override;
  std::vector<rlcore::ParameterShard> parameter_shards() const override;
  void for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) override;
  void save_checkpoint(const std::string& dir) override;
  void load_checkpoint(const std::string& dir) override;
  void export_hf(const std::string& dir) override;
  void offload(rlcore::OffloadSet what) override;
  void reload(rlcore::OffloadSet what) override;
  rlcore::TrainMemory memory() const override;
  int64_t step() const override { return step_; }

 private:
  rlcore::ModelOutput compute(const rlcore::Batch& batch, const rlcore::ForwardOptions& options) const;
  void optimizer_step(double grad_scale);

  TrainOptions options_;
  std::string model_path_;
  bool trainable_;
  rlcore::model::Transformer model_;
  std::vector<at::Tensor> exp_avg_;
  std::vector<at::Tensor> exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace engine_template
