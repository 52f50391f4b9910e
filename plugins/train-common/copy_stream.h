// Host <-> device copies of training state on a side stream, so that on a GPU
// offload and reload run beside the kernels of the compute stream instead of
// stalling it. A copy to the device hands back a fence that the compute stream
// waits on before it touches the copy (Placed::device() does so); a copy to the
// host is readable after synchronize(). On the CPU every copy is synchronous
// and every fence already passed.
//
// Device-generic (c10's stream and event interface), so the same code serves
// both flavours and any libtorch from 1.13 on.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace c10 {
class Event;
}

namespace rlcore::train_common {

// The end of one copy to the device, as seen by the compute stream.
class CopyFence {
 public:
  // Makes the current (compute) stream wait for the copy; the host does not
  // block. Passing a fence twice, or an empty one, does nothing.
  void wait();
  bool pending() const { return event_ != nullptr; }

 private:
  friend class CopyStream;
  std::shared_ptr<c10::Event> event_;
};

class CopyStream {
 public:
  explicit CopyStream(const at::Device& device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // A device copy of `host`, written on the side stream once the compute
  // stream's work queued so far is done; readable after `fence` is waited.
  at::Tensor to_device(const at::Tensor& host, CopyFence& fence);
  // A host copy of `on_device` (pinned memory, for fast copies back), read on
  // the side stream once the compute stream's queued work is done; readable,
  // and `on_device` free to go, after synchronize().
  at::Tensor to_host(const at::Tensor& on_device);
  // Blocks the host until every copy started so far has landed.
  void synchronize();
  // The stream the copies run on; none on the CPU.
  const std::optional<c10::Stream>& side_stream() const { return side_; }

 private:
  void follow_compute_stream();

  at::Device device_;
  std::optional<c10::Stream> side_;  // none on the CPU: copies are synchronous
  std::vector<at::Tensor> reading_;  // sources of copies to the host still in flight
};

}  // namespace rlcore::train_common
