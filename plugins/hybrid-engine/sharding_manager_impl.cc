// The sharding managers: planning at attach, the two swaps, their stats, the
// ledger (planned memory) and the measured memory peak of each swap.
#include "sharding_manager_impl.h"

#include <ATen/ATen.h>

#include "identity_adaptor.h"
#include "rlcore/device.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"

namespace rlcore::hybrid_engine {
namespace {

using Clock = std::chrono::steady_clock;

int64_t tensor_bytes(const at::Tensor& t) {
  return static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
}

// The engine gathered `full` straight into `out` (a direct gather): nothing to convert.
bool gathered_in_place(const at::Tensor& full, const at::Tensor& out) {
  return full.data_ptr() == out.data_ptr() && full.scalar_type() == out.scalar_type() && full.sizes() == out.sizes() &&
         full.strides() == out.strides();
}

}  // namespace

HybridShardingManager::HybridShardingManager(const HybridOptions& options, SwapMode mode)
    : offload_(offload_set(options)),
      lora_base_cache_(options.lora_base_cache),
      gather_into_bucket_(options.gather_into_bucket),
      mode_(mode),
      bucket_memory_(bucket_release(options)) {}

std::unique_ptr<HybridShardingManager> make_sharding_manager(const HybridOptions& options, SwapMode mode) {
  if (mode == SwapMode::kBucketed) return std::make_unique<BucketedShardingManager>(options);
  return std::make_unique<NaiveShardingManager>(options);
}

void HybridShardingManager::require_attached(const char* method) const {
  if (!engines_.train || !engines_.rollout || !engines_.adaptor || !engines_.offloader) {
    throw ValueError(std::string("sharding_manager.") + method + ": attach() was not called with all four engines");
  }
}

void HybridShardingManager::attach(HybridEngines engines) {
  engines_ = std::move(engines);
  require_attached("attach");
  plan_ = plan_swap(engines_.rollout->weight_meta(), *engines_.adaptor, engines_.layout);
  // A rank may hold no piece of some tensors; sources are checked as they are visited (fill()).
  bool sharded = false;  // a gather needs other ranks
  for (const ParameterShard& shard : engines_.train->parameter_shards()) {
    local_numel_[shard.name] = shard.local.numel();
    device_ = shard.local.device();
    int64_t full = 1;
    for (int64_t d : shard.shape) full *= d;
    sharded = sharded || shard.local.numel() < full;
  }
  lora_.reset();
  const bool cache = lora_base_cache_ == "true" || (lora_base_cache_ == "auto" && sharded);
  if (mode_ == SwapMode::kBucketed && cache) lora_ = LoraSwap::for_engine(*engines_.train, plan_);
  direct_ = plan_direct();
  if (mode_ == SwapMode::kBucketed) {
    engines_.rollout->sleep();
    ledger_.set("rollout_weights", 0);
  } else {
    ledger_.set("rollout_weights", plan_.bucket_bytes);
  }
  note_train_state();
  in_rollout_ = false;
}

DirectGatherPlan HybridShardingManager::plan_direct() const {
  auto* gatherer = capability<GathersIntoBuffers>(*engines_.train);
  // Only the identity adaptor over whole tensors promises that a bucket tensor is a plain copy of its source.
  const bool plain_copies = dynamic_cast<const IdentityAdaptor*>(engines_.adaptor.get()) != nullptr &&
                            engines_.layout.tp_size == 1 && engines_.layout.pp_size == 1;
  if (mode_ != SwapMode::kBucketed || !gather_into_bucket_ || lora_ || !gatherer || !plain_copies) return {};
  return plan_direct_gathers(plan_, gatherer->full_parameter_gathers());
}

int64_t HybridShardingManager::received_bytes(const std::string& name, const at::Tensor& full) const {
  auto local = local_numel_.find(name);
  const int64_t mine = local == local_numel_.end() ? 0 : local->second;
  return (static_cast<int64_t>(full.numel()) - mine) * static_cast<int64_t>(full.element_size());
}

void HybridShardingManager::note_train_state() {
  const TrainMemory memory = engines_.train->memory();
  ledger_.set("train_state", memory.param_bytes + memory.grad_bytes + memory.optimizer_bytes);
}

void HybridShardingManager::note_peaks(const PeakMemoryMeter& meter, SwapStats& stats) const {
  stats.planned_peak_bytes = ledger_.peak();
  stats.measured_peak_bytes = meter.peak_above_start();
  stats.measured_per_swap = meter.per_phase();
}

void HybridShardingManager::fill_bucket(const at::Tensor& bucket, std::vector<at::Tensor>& outputs, SwapStats& stats) {
  if (!lora_ && direct_.direct_count() > 0) {
    auto destination = [&](size_t gather) {
      const DirectGather& placed = direct_.gathers.at(gather);
      if (!placed.direct()) return at::Tensor();
      const int64_t bytes = placed.numel * static_cast<int64_t>(c10::elementSize(placed.dtype));
      return bucket.narrow(0, placed.byte_offset, bytes).view(placed.dtype);
    };
    fill(outputs, stats, [&](const FullParameterVisitor& visit) {
      capability<GathersIntoBuffers>(*engines_.train)->for_each_full_parameter_into(destination, visit);
    });
    return;
  }
  if (!lora_) {
    fill(outputs, stats, [this](const FullParameterVisitor& visit) { engines_.train->for_each_full_parameter(visit); });
    return;
  }
  if (!lora_->cached()) {
    fill(outputs, stats, [this](const FullParameterVisitor& visit) { lora_->visit_and_keep_bases(visit); });
    lora_->keep_frozen(outputs);
    ledger_.set("lora_cache", device_.is_cpu() ? lora_->bytes() : 0);
    return;
  }
  const auto start = Clock::now();
  lora_->fill_from_cache(*engines_.adaptor, engines_.layout, outputs);
  stats.bytes_moved += plan_.bucket_bytes;
  stats.convert_s += seconds_since(start);
}

void HybridShardingManager::fill(std::vector<at::Tensor>& outputs, SwapStats& stats,
                                 const std::function<void(const FullParameterVisitor&)>& walk) {
  std::map<size_t, std::vector<at::Tensor>> pending;  // tensor -> its sources gathered so far
  int64_t pending_bytes = 0;
  std::vector<bool> filled(plan_.tensors.size(), false);
  const auto start = Clock::now();
  walk([&](const std::string& name, const at::Tensor& full) {
    const auto visit_start = Clock::now();
    stats.bytes_gathered += received_bytes(name, full);
    auto targets = plan_.targets_of.find(name);
    if (targets == plan_.targets_of.end()) return;  // e.g. a head the rollout does not serve
    for (size_t index : targets->second) {
      const PlannedTensor& planned = plan_.tensors[index];
      if (gathered_in_place(full, outputs[index])) {
        stats.bytes_moved += planned.bytes;
        filled[index] = true;
        continue;
      }
      std::vector<at::Tensor>& sources = pending[index];
      sources.push_back(full);
      pending_bytes += tensor_bytes(full);
      ledger_.set("gathered", pending_bytes);
      if (sources.size() < planned.sources.size()) continue;
      engines_.adaptor->convert(planned.meta, engines_.layout, sources, outputs[index]);
      stats.bytes_moved += planned.bytes;
      for (const at::Tensor& s : sources) pending_bytes -= tensor_bytes(s);
      pending.erase(index);
      filled[index] = true;
    }
    ledger_.set("gathered", pending_bytes);
    stats.convert_s += seconds_since(visit_start);
  });
  stats.gather_s = seconds_since(start) - stats.convert_s;
  for (size_t i = 0; i < filled.size(); ++i) {
    if (!filled[i]) {
      throw ValueError("sharding_manager: rollout tensor '" + plan_.tensors[i].meta.name +
                       "' was not built: the training engine never visited all of its sources");
    }
  }
}

void HybridShardingManager::hand_over(const std::vector<at::Tensor>& outputs, int64_t version, SwapStats& stats) {
  const auto start = Clock::now();
  NamedTensorList named;
  for (size_t i = 0; i < outputs.size(); ++i) named.emplace_back(plan_.tensors[i].meta.name, outputs[i]);
  auto* adopter = capability<AdoptsWeights>(*engines_.rollout);
  if (mode_ == SwapMode::kBucketed) {
    if (adopter) {
      adopter->wake_up_unallocated();
    } else {
      engines_.rollout->wake_up();
    }
  }
  engines_.rollout->load_weights(named, version);
  if (engines_.rollout->weight_version() != version) {
    throw ValueError("sharding_manager: the rollout reports weight version " +
                     std::to_string(engines_.rollout->weight_version()) + " after loading version " +
                     std::to_string(version));
  }
  stats.copy_s = seconds_since(start);
}

SwapStats HybridShardingManager::to_rollout(int64_t version) {
  require_attached("to_rollout");
  if (in_rollout_)
    throw ValueError("sharding_manager.to_rollout: already in rollout mode (version " +
                     std::to_string(engines_.rollout->weight_version()) + ")");
  const PeakMemoryMeter meter(device_);  // before the clock: reading the baseline takes a while on the CPU
  const auto start = Clock::now();
  ledger_.reset_peak();
  SwapStats stats;
  stats.version = version;
  std::vector<at::Tensor> outputs;
  if (mode_ == SwapMode::kBucketed) {
    // One allocation, exactly the rollout's shard; the engine adopts views of it.
    at::Tensor bucket = bucket_memory_.allocate(plan_.bucket_bytes, device_);
    ledger_.set("bucket", plan_.bucket_bytes);
    outputs = bucket_views(plan_, bucket);
    fill_bucket(bucket, outputs, stats);
    hand_over(outputs, version, stats);
    outputs.clear();
    bucket.reset();
    auto* adopter = capability<AdoptsWeights>(*engines_.rollout);
    ledger_.set("bucket", 0);
    ledger_.set("rollout_weights", adopter ? adopter->weight_bytes_held() : plan_.bucket_bytes);
  } else {
    // Naive: materialise every full tensor first, then convert each into its own tensor.
    std::vector<at::Tensor> gathered(plan_.tensors.size());
    for (size_t i = 0; i < plan_.tensors.size(); ++i) {
      gathered[i] = at::empty(plan_.tensors[i].meta.shape,
                              at::TensorOptions().dtype(plan_.tensors[i].meta.dtype).device(device_));
    }
    ledger_.set("bucket", plan_.bucket_bytes);
    std::vector<std::pair<std::string, at::Tensor>> full_model;
    int64_t full_bytes = 0;
    const auto gather_start = Clock::now();
    engines_.train->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
      stats.bytes_gathered += received_bytes(name, full);
      full_model.emplace_back(name, full.clone());
      full_bytes += tensor_bytes(full);
      ledger_.set("gathered", full_bytes);
    });
    stats.gather_s = seconds_since(gather_start);
    const auto convert_start = Clock::now();
    std::map<std::string, at::Tensor> by_name(full_model.begin(), full_model.end());
    for (size_t i = 0; i < plan_.tensors.size(); ++i) {
      std::vector<at::Tensor> sources;
      for (const std::string& s : plan_.tensors[i].sources) sources.push_back(by_name.at(s));
      engines_.adaptor->convert(plan_.tensors[i].meta, engines_.layout, sources, gathered[i]);
      stats.bytes_moved += plan_.tensors[i].bytes;
    }
    stats.convert_s = seconds_since(convert_start);
    hand_over(gathered, version, stats);
  }
  ledger_.set("gathered", 0);
  ledger_.set("bucket", 0);
  const auto offload_start = Clock::now();
  engines_.offloader->offload(*engines_.train, offload_);
  stats.offload_s = seconds_since(offload_start);
  note_train_state();
  in_rollout_ = true;
  stats.seconds = seconds_since(start);
  note_peaks(meter, stats);
  return stats;
}

SwapStats HybridShardingManager::to_train() {
  require_attached("to_train");
  if (!in_rollout_) throw ValueError("sharding_manager.to_train: not in rollout mode");
  const PeakMemoryMeter meter(device_);
  const auto start = Clock::now();
  ledger_.reset_peak();
  SwapStats stats;
  stats.version = engines_.rollout->weight_version();
  // Release the rollout first, so the reloaded training state never overlaps it.
  if (mode_ == SwapMode::kBucketed) {
    engines_.rollout->sleep();
    ledger_.set("rollout_weights", 0);
  }
  const auto reload_start = Clock::now();
  engines_.offloader->reload(*engines_.train, offload_);
  stats.reload_s = seconds_since(reload_start);
  note_train_state();
  in_rollout_ = false;
  stats.seconds = seconds_since(start);
  note_peaks(meter, stats);
  return stats;
}

}  // namespace rlcore::hybrid_engine
