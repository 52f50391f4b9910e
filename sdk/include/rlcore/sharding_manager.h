// ShardingManager: the `sharding_manager` plugin kind. Switches colocated
// training and inference engines between training (training state resident,
// rollout asleep) and rollout (inference weights resident, training state
// optionally offloaded), carrying a weight version on every swap.
//
//   auto scope = RolloutScope(manager, version);  // to_rollout(version)
//   engine.generate(...);                         // reports `version`
//   // scope ends: to_train()
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "rlcore/capabilities.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"
#include "rlcore/offloader.h"
#include "rlcore/train_engine.h"
#include "rlcore/weight_adaptor.h"

namespace rlcore {

// Live bytes of the tensors the hybrid engine knows about, by category, with
// the peak of their sum. The manager sets each category whenever it changes:
// "train_state" (TrainEngine::memory() param + grad + optimizer bytes on the
// device), "rollout_weights" (the inference engine's parameter storage),
// "bucket" (a bucket the manager allocated and has not yet handed over) and
// "gathered" (the full training tensors held between gather and convert).
// Host (offloaded) memory and the KV cache, which lives only inside
// generate(), are not counted.
class RLCORE_API MemoryLedger {
 public:
  void set(const std::string& category, int64_t bytes);
  int64_t live() const;
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live(); }
  const std::map<std::string, int64_t>& categories() const { return live_; }

 private:
  std::map<std::string, int64_t> live_;
  int64_t peak_ = 0;
};

// Per swap: seconds per phase, bytes, and its memory peak twice: planned
// (the ledger, from tensor sizes) and measured (rlcore/device.h).
struct SwapStats {
  int64_t version = 0;
  double seconds = 0;              // the whole swap
  double gather_s = 0;             // collectives assembling full training tensors
  double convert_s = 0;            // WeightAdaptor::convert into the bucket
  double copy_s = 0;               // handing the bucket to the engine (load_weights)
  double offload_s = 0;            // training state to host
  double reload_s = 0;             // training state back
  int64_t bytes_moved = 0;         // inference bytes written into buckets
  int64_t bytes_gathered = 0;      // bytes received from other ranks
  int64_t planned_peak_bytes = 0;  // MemoryLedger peak during the swap (all it counts, train state too)
  // Measured: the device's peak during the swap above its use when the swap
  // began (PeakMemoryMeter: CUDA allocator peak; CPU resident high-water mark).
  int64_t measured_peak_bytes = 0;
  bool measured_per_swap = true;  // false: the peak could not be reset (CPU: /proc/self/clear_refs)
};

// AdoptsWeights, the inference engine capability the manager uses, is in rlcore/capabilities.h.

// What the manager works on; all colocated in this process.
struct HybridEngines {
  std::shared_ptr<TrainEngine> train;
  std::shared_ptr<InferenceEngine> rollout;
  std::shared_ptr<WeightAdaptor> adaptor;
  std::shared_ptr<Offloader> offloader;
  RolloutLayout layout;
};

class RLCORE_API ShardingManager {
 public:
  static constexpr const char* kKind = "sharding_manager";

  virtual ~ShardingManager();

  // Plans the swap from engines.rollout->weight_meta(); allocates nothing.
  // The engines start in training mode (the rollout is put to sleep).
  virtual void attach(HybridEngines engines) = 0;
  // Fills the rollout with the training weights, tagged `version`, and
  // offloads training state as configured. Collective over the training
  // engine's groups.
  virtual SwapStats to_rollout(int64_t version) = 0;
  // Reloads training state and releases every rollout byte (sleep()).
  virtual SwapStats to_train() = 0;
  virtual bool in_rollout() const = 0;
  virtual const MemoryLedger& ledger() const = 0;
};

// RAII: to_rollout on construction, to_train on destruction. A failure while
// leaving is kept (a destructor must not throw) and rethrown by finish().
class RLCORE_API RolloutScope {
 public:
  RolloutScope(ShardingManager& manager, int64_t version);
  ~RolloutScope();
  RolloutScope(const RolloutScope&) = delete;
  RolloutScope& operator=(const RolloutScope&) = delete;

  const SwapStats& entered() const { return entered_; }
  // Leaves now (to_train) and returns its stats; throws what to_train threw.
  SwapStats finish();

 private:
  ShardingManager& manager_;
  SwapStats entered_;
  bool finished_ = false;
};

}  // namespace rlcore
