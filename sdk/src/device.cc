// Which device a worker runs on: parsing trainer.device / --device, the
// checks that say why a device cannot be had, and binding a GPU.
#include "rlcore/device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "device/backend.h"
#include "rlcore/error.h"
#include "rlcore/plugin_abi.h"

namespace rlcore {
namespace {

struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kCuda } kind = Kind::kCpu;
  int64_t index = -1;  // cuda:N; -1: the worker's local rank
};

DeviceRequest parse_request(const std::string& requested, const std::string& key) {
  if (requested == "auto") return {DeviceRequest::Kind::kAuto, -1};
  if (requested == "cpu") return {DeviceRequest::Kind::kCpu, -1};
  if (requested == "cuda") return {DeviceRequest::Kind::kCuda, -1};
  const std::string prefix = "cuda:";
  const std::string digits = requested.substr(std::min(prefix.size(), requested.size()));
  if (requested.rfind(prefix, 0) == 0 && !digits.empty() && digits.size() < 6 &&
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return {DeviceRequest::Kind::kCuda, std::stoll(digits)};
  }
  throw ConfigError("key " + key + ": unknown device '" + requested + "' (expected auto, cpu, cuda or cuda:N)");
}

std::string visible_devices_env() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible ? std::string("CUDA_VISIBLE_DEVICES=") + visible : "CUDA_VISIBLE_DEVICES unset";
}

// Throws unless this build has CUDA and sees at least one GPU; returns how many.
int64_t require_gpus(const std::string& requested, const std::string& key) {
  if (!device_backend::has_cuda()) {
    throw ConfigError("key " + key + "=" + requested + ": this rlcore build has no CUDA (libtorch " +
                      RLCORE_TORCH_VERSION +
                      ", CPU); build the CUDA flavour with `bash scripts/build.sh --cuda` "
                      "(docs/gpu.md), or set " +
                      key + "=cpu");
  }
  const int64_t count = device_backend::device_count();
  if (count == 0) {
    throw ConfigError("key " + key + "=" + requested + ": this rlcore build has CUDA but this process sees no GPU (" +
                      visible_devices_env() + "); check `nvidia-smi` and CUDA_VISIBLE_DEVICES, or set " + key + "=cpu");
  }
  return count;
}

// Whether `request` means a GPU on this machine (auto: when one is there).
bool wants_cuda(const DeviceRequest& request) {
  if (request.kind == DeviceRequest::Kind::kAuto)
    return device_backend::has_cuda() && device_backend::device_count() > 0;
  return request.kind == DeviceRequest::Kind::kCuda;
}

}  // namespace

bool cuda_build() { return device_backend::has_cuda(); }

int64_t cuda_device_count() { return device_backend::device_count(); }

at::Device resolve_device(const std::string& requested, int64_t local_rank, const std::string& key) {
  const DeviceRequest request = parse_request(requested, key);
  if (!wants_cuda(request)) return at::Device(at::kCPU);
  const int64_t count = require_gpus(requested, key);
  // One visible GPU is this worker's, whatever its local rank: a launcher that
  // gives each task its own GPU (srun --gpus-per-task 1) shows it as cuda:0.
  const int64_t index = request.index >= 0 ? request.index : count == 1 ? 0 : local_rank;
  if (index >= count) {
    const std::string which = request.index >= 0 ? "GPU " + std::to_string(index)
                                                 : "GPU " + std::to_string(index) + " (this worker's local rank)";
    throw ConfigError("key " + key + "=" + requested + ": " + which + " is past the " + std::to_string(count) +
                      " GPU(s) this process sees (cuda:0..cuda:" + std::to_string(count - 1) + ", " +
                      visible_devices_env() + ")");
  }
  device_backend::set_device(index);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void check_device_slots(const std::string& requested, int64_t workers, const std::string& key,
                        const std::string& workers_key) {
  const DeviceRequest request = parse_request(requested, key);
  if (!wants_cuda(request)) return;
  const int64_t count = require_gpus(requested, key);
  if (request.index >= 0) {
    // One named GPU for every worker: it only has to exist (binding it here
    // would give the controller a CUDA context it never uses).
    if (request.index < count) return;
    throw ConfigError("key " + key + "=" + requested + ": this process sees " + std::to_string(count) + " GPU(s) (" +
                      visible_devices_env() + ")");
  }
  if (workers > count) {
    throw ConfigError("key " + key + "=" + requested + ": " + std::to_string(workers) + " workers on this host (" +
                      workers_key + ") need one GPU each, but this process sees " + std::to_string(count) + " (" +
                      visible_devices_env() + "); lower " + workers_key + " to " + std::to_string(count) +
                      " workers at most, or make more GPUs visible");
  }
}

void check_dtype_supported(const at::Device& device, at::ScalarType dtype, const std::string& key) {
  if (!device.is_cuda() || dtype != at::kBFloat16) return;
  const int64_t index = device.has_index() ? device.index() : 0;
  const auto [major, minor] = device_backend::compute_capability(index);
  if (major >= 8) return;
  throw ConfigError("key " + key + "=bfloat16: cuda:" + std::to_string(index) + " (" +
                    device_backend::device_name(index) + ", compute capability " + std::to_string(major) + "." +
                    std::to_string(minor) + ") has no bfloat16; it needs compute capability 8.0 or newer. Use float32");
}

}  // namespace rlcore
