// DecodeStepper: the three ways of running a decode step.
#include "decode_step.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::infer_native {

DecodeStats& DecodeStats::operator+=(const DecodeStats& other) {
  steps += other.steps;
  graphs_recorded += other.graphs_recorded;
  graph_replays += other.graph_replays;
  compactions += other.compactions;
  prefills += other.prefills;
  prefill_rows += other.prefill_rows;
  joins += other.joins;
  running_rows += other.running_rows;
  max_running = std::max(max_running, other.max_running);
  max_waiting = std::max(max_waiting, other.max_waiting);
  return *this;
}

DecodeStepper::DecodeStepper(const model::Transformer& model, model::KvCache& cache, DecodeMode mode,
                             DecodeStats& stats)
    : model_(model), cache_(cache), mode_(mode), stats_(stats) {}

at::Tensor DecodeStepper::step(const at::Tensor& tokens, model::MoeRouting* routing) {
  ++stats_.steps;
  if (mode_ == DecodeMode::kEager) {
    return model_.forward(tokens.view({-1, 1}), cache_, {}, {}, /*keep_last=*/1, routing).select(1, 0);
  }
  if (routing != nullptr && mode_ == DecodeMode::kDeviceGraph) {
    throw ValueError("infer-native: recording the routing needs decode steps without CUDA graphs");
  }
  return step_shape_static(tokens, routing);
}

at::Tensor DecodeStepper::step_shape_static(const at::Tensor& tokens, model::MoeRouting* routing) {
  const at::Device device = cache_.valid.device();
  if (!slot_.defined()) slot_ = at::empty({1}, at::TensorOptions().device(device).dtype(at::kLong));
  slot_.fill_(cache_.used);
  at::Tensor logits;
  if (graph_.recorded()) {
    tokens_.copy_(tokens.view({-1, 1}));
    graph_.replay();
    ++stats_.graph_replays;
    logits = logits_;
  } else {
    tokens_ = tokens.view({-1, 1}).clone();
    // This step's result, and in kDeviceGraph the warm-up run recording needs.
    logits = model_.forward_decode(tokens_, cache_, slot_, routing).select(1, 0);
    if (mode_ == DecodeMode::kDeviceGraph) {
      try {
        graph_.record(device, [this] { logits_ = model_.forward_decode(tokens_, cache_, slot_).select(1, 0); });
      } catch (const Error& e) {
        throw Error(std::string(e.what()) +
                    " (decode steps as CUDA graphs; actor_rollout_ref.rollout.enforce_eager=true decodes without)");
      }
      ++stats_.graphs_recorded;
    }
  }
  ++cache_.used;  // forward_decode leaves the host's count to its caller
  return logits;
}

void DecodeStepper::keep_rows(const at::Tensor& rows) {
  cache_.keep_rows(rows);
  ++stats_.compactions;
  graph_ = DeviceGraph();
  tokens_ = at::Tensor();
  logits_ = at::Tensor();
}

}  // namespace rlcore::infer_native
