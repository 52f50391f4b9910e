// The LoRA swap cache (see lora_swap.h).
#include "lora_swap.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::hybrid_engine {

std::unique_ptr<LoraSwap> LoraSwap::for_engine(TrainEngine& train, const SwapPlan& plan) {
  auto* adapters = capability<TrainsLowRankAdapters>(train);
  if (adapters == nullptr || adapters->adapted_parameters().empty()) return nullptr;
  return std::unique_ptr<LoraSwap>(new LoraSwap(*adapters, plan));
}

LoraSwap::LoraSwap(TrainsLowRankAdapters& adapters, const SwapPlan& plan)
    : adapters_(adapters), plan_(plan), rebuilt_(plan.tensors.size(), false), frozen_(plan.tensors.size()) {
  for (const std::string& name : adapters.adapted_parameters()) adapted_.insert(name);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    for (const std::string& source : plan.tensors[i].sources) {
      if (adapted_.count(source)) rebuilt_[i] = true;
    }
    if (!rebuilt_[i]) continue;
    for (const std::string& source : plan.tensors[i].sources) bases_[source] = at::Tensor();
  }
}

at::Tensor LoraSwap::keep(const at::Tensor& tensor) {
  bytes_ += static_cast<int64_t>(tensor.numel()) * static_cast<int64_t>(tensor.element_size());
  if (tensor.is_cpu()) return tensor.clone();
  at::Tensor host = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  return host.copy_(tensor);
}

void LoraSwap::visit_and_keep_bases(const FullParameterVisitor& visit) {
  bytes_ = 0;
  adapters_.for_each_full_base_parameter([&](const std::string& name, const at::Tensor& base) {
    auto kept = bases_.find(name);
    if (kept != bases_.end()) kept->second = keep(base);
    visit(name, adapted_.count(name) ? adapters_.merged_parameter(name, base) : base);
  });
}

void LoraSwap::keep_frozen(const std::vector<at::Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!rebuilt_[i]) frozen_[i] = keep(outputs[i]);
  }
  for (const auto& [name, base] : bases_) {
    if (!base.defined()) throw ValueError("sharding_manager: the train engine never visited LoRA base '" + name + "'");
  }
  cached_ = true;
}

void LoraSwap::fill_from_cache(const WeightAdaptor& adaptor, const RolloutLayout& layout,
                               std::vector<at::Tensor>& outputs) {
  for (size_t i = 0; i < plan_.tensors.size(); ++i) {
    const PlannedTensor& planned = plan_.tensors[i];
    if (!rebuilt_[i]) {
      outputs[i].copy_(frozen_[i], /*non_blocking=*/true);
      continue;
    }
    std::vector<at::Tensor> sources;
    for (const std::string& name : planned.sources) {
      const at::Tensor base = bases_.at(name).to(outputs[i].device(), /*non_blocking=*/true);
      sources.push_back(adapted_.count(name) ? adapters_.merged_parameter(name, base) : base);
    }
    adaptor.convert(planned.meta, layout, sources, outputs[i]);
  }
}

}  // namespace rlcore::hybrid_engine
