// DeviceGraph over the device backend's recorded graphs.
#include "rlcore/device_graph.h"

#include "device/backend.h"
#include "rlcore/error.h"

namespace rlcore {

bool DeviceGraph::supported(const at::Device& device) { return device.is_cuda() && device_backend::has_cuda(); }

DeviceGraph::DeviceGraph() = default;
DeviceGraph::~DeviceGraph() = default;
DeviceGraph::DeviceGraph(DeviceGraph&&) noexcept = default;
DeviceGraph& DeviceGraph::operator=(DeviceGraph&&) noexcept = default;

void DeviceGraph::record(const at::Device& device, const std::function<void()>& work) {
  graph_.reset();
  if (!supported(device)) {
    throw Error("DeviceGraph: cannot record on " + device.str() +
                (device.is_cuda() ? " in a build without CUDA" : ": graphs need a CUDA device"));
  }
  graph_ = device_backend::record_graph(device.has_index() ? device.index() : 0, work);
}

void DeviceGraph::replay() {
  if (!graph_) throw Error("DeviceGraph::replay: nothing recorded");
  graph_->replay();
}

}  // namespace rlcore
