// Device work recorded once and replayed with one launch: a CUDA graph in the
// CUDA flavour. Replaying skips the per-kernel launch cost that dominates
// small steps (a decode step of a small model is hundreds of launches).
#pragma once

#include <functional>
#include <memory>

#include <c10/core/Device.h>

#include "rlcore/export.h"

namespace rlcore {
namespace device_backend {
class Graph;
}

// Only for work whose every kernel, shape and tensor address is the same on
// each replay: inputs are written into tensors made before recording, outputs
// read from tensors made while recording (Transformer::forward_decode is such
// work). Tensors allocated while recording belong to the graph's own memory
// pool, which lives as long as the DeviceGraph.
class RLCORE_API DeviceGraph {
 public:
  // Whether `device` can record graphs: a CUDA device in the CUDA flavour.
  static bool supported(const at::Device& device);

  DeviceGraph();
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&&) noexcept;
  DeviceGraph& operator=(DeviceGraph&&) noexcept;

  // Records what `work` queues on `device` without running it. Run `work`
  // once before (lazy initialisation, e.g. cuBLAS's workspace, cannot be
  // recorded). Throws Error naming the device and the cause when the device
  // is not supported or recording fails; the graph is then empty.
  void record(const at::Device& device, const std::function<void()>& work);
  // Queues the recorded work on the current stream. Throws Error when empty.
  void replay();
  bool recorded() const { return graph_ != nullptr; }

 private:
  std::unique_ptr<device_backend::Graph> graph_;
};

}  // namespace rlcore
