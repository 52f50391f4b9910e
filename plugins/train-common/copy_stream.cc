// Side-stream copies through c10's device-generic stream, event and guard
// interface (the CUDA flavour's CUDA streams; nothing on the CPU).
#include "copy_stream.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace rlcore::train_common {
namespace {

const c10::impl::DeviceGuardImplInterface& guard_impl(const at::Device& device) {
  return *c10::impl::getDeviceGuardImpl(device.type());
}

}  // namespace

void CopyFence::wait() {
  if (!event_) return;
  const at::Device device(event_->device_type(), event_->device_index());
  event_->block(guard_impl(device).getStream(device));
  event_.reset();
}

CopyStream::CopyStream(const at::Device& device) : device_(device) {
  if (!device.is_cpu()) side_ = guard_impl(device).getStreamFromGlobalPool(device);
}

CopyStream::~CopyStream() {
  try {
    synchronize();
  } catch (...) {
    // A failed device: the copies are moot, and a destructor must not throw.
  }
}

void CopyStream::follow_compute_stream() {
  c10::Event compute_done(device_.type());
  compute_done.record(guard_impl(device_).getStream(device_));
  compute_done.block(*side_);
}

at::Tensor CopyStream::to_device(const at::Tensor& host, CopyFence& fence) {
  if (!side_) return host.to(device_, /*non_blocking=*/false, /*copy=*/true);
  // Allocated on the compute stream, which is where the copy is used and freed.
  at::Tensor copy = at::empty(host.sizes(), host.options().device(device_));
  follow_compute_stream();
  {
    const c10::StreamGuard on_side(*side_);
    copy.copy_(host, /*non_blocking=*/host.is_pinned());
  }
  // Should the copy be dropped unwaited, its memory stays taken until the side stream is past it.
  guard_impl(device_).recordDataPtrOnStream(copy.storage().data_ptr(), *side_);
  fence.event_ = std::make_shared<c10::Event>(device_.type());
  fence.event_->record(*side_);
  return copy;
}

at::Tensor CopyStream::to_host(const at::Tensor& on_device) {
  if (!side_) return on_device.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor host = at::empty(on_device.sizes(), on_device.options().device(at::kCPU).pinned_memory(true));
  follow_compute_stream();
  {
    const c10::StreamGuard on_side(*side_);
    host.copy_(on_device, /*non_blocking=*/true);
  }
  reading_.push_back(on_device);
  return host;
}

void CopyStream::synchronize() {
  if (side_) guard_impl(device_).synchronizeStream(*side_);
  reading_.clear();
}

}  // namespace rlcore::train_common
