// The `bucketed` and `naive` sharding managers.
//   bucketed: one bucket per PP stage, allocated at to_rollout, filled tensor
//     by tensor as the trainer gathers its units, adopted by the engine
//     (zero-copy); to_train puts the engine to sleep, so no rollout byte stays.
//     A train engine that GathersIntoBuffers gathers each unit laid out as the
//     bucket is straight into it (DirectGatherPlan). With a LoRA actor, swaps
//     after the first rebuild only the adapted weights from a cache of the
//     frozen base (LoraSwap).
//   naive: the full-gather baseline: every full training tensor is gathered
//     and kept, then converted into separate tensors the awake engine copies;
//     the rollout keeps its own full copy between swaps.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bucket_memory.h"
#include "direct_gather.h"
#include "hybrid_options.h"
#include "lora_swap.h"
#include "rlcore/device.h"
#include "rlcore/sharding_manager.h"
#include "swap_plan.h"

namespace rlcore::hybrid_engine {

enum class SwapMode { kBucketed, kNaive };

// Both managers: one swap algorithm, two modes.
class HybridShardingManager : public ShardingManager {
 public:
  void attach(HybridEngines engines) override;
  SwapStats to_rollout(int64_t version) override;
  SwapStats to_train() override;
  bool in_rollout() const override { return in_rollout_; }
  const MemoryLedger& ledger() const override { return ledger_; }

  const SwapPlan& plan() const { return plan_; }
  // Which of the train engine's gathers land in the bucket (empty: none can).
  const DirectGatherPlan& direct_gathers() const { return direct_; }

 protected:
  HybridShardingManager(const HybridOptions& options, SwapMode mode);

 private:
  // Gathers (through `walk`: the engine's for_each_full_parameter or an
  // equivalent), converts into `outputs` (one per planned tensor) and times it.
  // A visited tensor that already is its output (gathered in place) is not copied.
  void fill(std::vector<at::Tensor>& outputs, SwapStats& stats,
            const std::function<void(const FullParameterVisitor&)>& walk);
  // The bucketed swap's fill: from the engine (straight into `bucket` where
  // direct_ allows), or with LoRA through the base cache.
  void fill_bucket(const at::Tensor& bucket, std::vector<at::Tensor>& outputs, SwapStats& stats);
  // direct_ for the attached engines (empty where the engine, adaptor or layout rule it out).
  DirectGatherPlan plan_direct() const;
  void hand_over(const std::vector<at::Tensor>& outputs, int64_t version, SwapStats& stats);
  void note_train_state();
  // The swap's planned (ledger) and measured (device) peaks into `stats`.
  void note_peaks(const PeakMemoryMeter& meter, SwapStats& stats) const;
  void require_attached(const char* method) const;

  OffloadSet offload_;
  std::string lora_base_cache_;  // auto | true | false
  bool gather_into_bucket_;
  SwapMode mode_;
  BucketMemory bucket_memory_;
  HybridEngines engines_;
  SwapPlan plan_;
  DirectGatherPlan direct_;
  std::unique_ptr<LoraSwap> lora_;  // bucketed mode, a LoRA actor, lora_base_cache on (or auto and sharded)
  // What of a gathered tensor came from other ranks (full minus this rank's piece).
  int64_t received_bytes(const std::string& name, const at::Tensor& full) const;

  std::map<std::string, int64_t> local_numel_;  // this rank's piece of each training tensor
  at::Device device_ = at::kCPU;
  MemoryLedger ledger_;
  bool in_rollout_ = false;
};

// Claims BoundedSwapMemory: a swap's ledger peak stays within train state +
// rollout weights + one bucket (rlcore conformance checks it).
class BucketedShardingManager final : public HybridShardingManager, public BoundedSwapMemory {
 public:
  explicit BucketedShardingManager(const HybridOptions& options)
      : HybridShardingManager(options, SwapMode::kBucketed) {}
};

// Claims no bound: it keeps a gathered copy and the rollout's own copy.
class NaiveShardingManager final : public HybridShardingManager {
 public:
  explicit NaiveShardingManager(const HybridOptions& options) : HybridShardingManager(options, SwapMode::kNaive) {}
};

std::unique_ptr<HybridShardingManager> make_sharding_manager(const HybridOptions& options, SwapMode mode);

}  // namespace rlcore::hybrid_engine
