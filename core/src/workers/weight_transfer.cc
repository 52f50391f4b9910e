// The actor's weights to a standalone rollout pool (see weight_transfer.h).
//
// Each bucket goes as three broadcasts from bridge rank 0: its header's
// length (int64; 0 ends the transfer), the header (JSON: each parameter's name,
// dtype, shape and byte offset) and the bucket's bytes, on the parameters'
// device (NCCL for CUDA tensors, Gloo on the CPU).
#include "workers/weight_transfer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"

namespace rlcore::workers {
namespace {

constexpr int64_t kAlignment = 16;  // typed views of a byte bucket need aligned offsets
constexpr int64_t kAbortMark = -1;  // in place of a header length: the sender failed

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

int64_t byte_size(const at::Tensor& tensor) { return tensor.numel() * static_cast<int64_t>(tensor.element_size()); }

// One parameter of a bucket, as its header describes it.
struct BucketEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  int64_t offset = 0;

  int64_t bytes() const {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    return numel * static_cast<int64_t>(at::elementSize(dtype));
  }
};

std::vector<BucketEntry> parse_header(const std::string& text) {
  std::vector<BucketEntry> entries;
  for (const auto& item : nlohmann::json::parse(text)) {
    entries.push_back(BucketEntry{item.at("name").get<std::string>(),
                                  static_cast<at::ScalarType>(item.at("dtype").get<int>()),
                                  item.at("shape").get<std::vector<int64_t>>(), item.at("offset").get<int64_t>()});
  }
  return entries;
}

// The sender's bucket: each parameter is copied into it as it is visited (the
// visit frees its tensor afterwards); one buffer serves every bucket of a transfer.
class OutgoingBucket {
 public:
  OutgoingBucket(const CommGroup& bridge, int64_t bucket_bytes) : bridge_(bridge), bucket_bytes_(bucket_bytes) {}

  void add(const std::string& name, const at::Tensor& tensor) {
    const int64_t bytes = byte_size(tensor);
    if (used_ > 0 && (used_ + bytes > bucket_bytes_ || tensor.device() != buffer_.device())) flush();
    const int64_t needed = std::max(bucket_bytes_, aligned(bytes));  // a larger parameter goes alone
    if (!buffer_.defined() || buffer_.device() != tensor.device() || buffer_.numel() < needed) {
      buffer_ = at::empty({needed}, at::TensorOptions().dtype(at::kByte).device(tensor.device()));
    }
    header_.push_back({{"name", name},
                       {"dtype", static_cast<int>(tensor.scalar_type())},
                       {"shape", tensor.sizes().vec()},
                       {"offset", used_}});
    buffer_.narrow(0, used_, bytes).view(tensor.scalar_type()).copy_(tensor.detach().reshape({-1}));
    used_ = aligned(used_ + bytes);
    ++stats_.tensors;
  }

  // Sends what is pending, then the end mark.
  WeightTransferStats finish() {
    flush();
    send_length(0);
    return stats_;
  }

  // Tells the receivers the transfer stopped (they throw instead of waiting
  // in a broadcast that never comes). Only between buckets.
  void abort() { send_length(kAbortMark); }

 private:
  void send_length(int64_t value) {
    at::Tensor length = at::full({1}, value, at::kLong);
    bridge_.broadcast(length, 0);
  }

  void flush() {
    if (used_ == 0) return;
    const std::string text = header_.dump();
    send_length(static_cast<int64_t>(text.size()));
    at::Tensor header = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
    std::memcpy(header.data_ptr(), text.data(), text.size());
    bridge_.broadcast(header, 0);
    at::Tensor bucket = buffer_.narrow(0, 0, used_);
    bridge_.broadcast(bucket, 0);
    stats_.bytes += used_;
    ++stats_.buckets;
    header_ = nlohmann::json::array();
    used_ = 0;
  }

  const CommGroup& bridge_;
  int64_t bucket_bytes_;
  at::Tensor buffer_;
  nlohmann::json header_ = nlohmann::json::array();
  int64_t used_ = 0;
  WeightTransferStats stats_;
};

// The rollout's targets and which arrived parameters they are built from.
class TargetAssembler {
 public:
  TargetAssembler(InferenceEngine& engine, const WeightAdaptor& adaptor, const RolloutLayout& layout, int64_t version)
      : engine_(engine), adaptor_(adaptor), layout_(layout), version_(version), targets_(engine.weight_meta()) {
    for (size_t t = 0; t < targets_.size(); ++t) {
      sources_.push_back(adaptor_.sources(targets_[t], layout_));
      for (const auto& source : sources_.back()) users_[source].insert(t);
    }
  }

  // A parameter arrived: every target it completes is converted (loaded at the next flush).
  void arrive(const std::string& name, const at::Tensor& tensor) {
    const auto users = users_.find(name);
    if (users == users_.end()) return;  // the engine has no target built from it (e.g. a tied head)
    arrived_[name] = tensor;
    for (size_t t : std::set<size_t>(users->second)) {
      std::vector<at::Tensor> full;
      for (const auto& source : sources_[t]) {
        const auto found = arrived_.find(source);
        if (found == arrived_.end()) break;
        full.push_back(found->second);
      }
      if (full.size() != sources_[t].size()) continue;
      convert(t, full);
    }
  }

  // Loads the targets converted since the last flush in one call (an engine
  // that reloads a server per call, vllm_bridge, reloads once per bucket).
  void flush() {
    if (converted_.empty()) return;
    engine_.load_weights(converted_, version_);
    converted_.clear();
  }

  // Throws ValueError naming the first target still missing a source.
  int64_t finish() const {
    for (size_t t = 0; t < targets_.size(); ++t) {
      if (loaded_.count(t)) continue;
      std::string missing;
      for (const auto& source : sources_[t]) {
        if (!arrived_.count(source)) missing += (missing.empty() ? "" : ", ") + source;
      }
      throw ValueError("weight transfer: the rollout's '" + targets_[t].name + "' needs " + missing +
                       ", which the actor did not send (" + std::to_string(loaded_.size()) + " of " +
                       std::to_string(targets_.size()) + " targets loaded)");
    }
    return static_cast<int64_t>(loaded_.size());
  }

 private:
  void convert(size_t t, const std::vector<at::Tensor>& full) {
    const WeightMeta& target = targets_[t];
    at::Tensor out = at::empty(target.shape, at::TensorOptions().dtype(target.dtype).device(full.front().device()));
    adaptor_.convert(target, layout_, full, out);
    converted_.emplace_back(target.name, out);
    loaded_.insert(t);
    for (const auto& source : sources_[t]) {
      auto& users = users_[source];
      users.erase(t);
      if (users.empty()) arrived_.erase(source);  // no target waits for it any more
    }
  }

  InferenceEngine& engine_;
  const WeightAdaptor& adaptor_;
  RolloutLayout layout_;
  int64_t version_;
  std::vector<WeightMeta> targets_;
  std::vector<std::vector<std::string>> sources_;  // per target
  std::map<std::string, std::set<size_t>> users_;  // source -> targets not loaded yet
  std::map<std::string, at::Tensor> arrived_;      // sources some target still waits for
  std::set<size_t> loaded_;                        // converted (and loaded, or to be at the next flush)
  NamedTensorList converted_;                      // since the last flush
};

}  // namespace

WeightTransferStats send_weights(const ParameterVisitor& for_each_parameter, const CommGroup* bridge,
                                 int64_t bucket_bytes) {
  if (bucket_bytes <= 0) throw ValueError("weight transfer: the bucket size must be positive");
  const auto start = std::chrono::steady_clock::now();
  if (bridge == nullptr) {  // not the sender: only the gather's collectives
    for_each_parameter([](const std::string&, const at::Tensor&) {});
    return WeightTransferStats{};
  }
  OutgoingBucket bucket(*bridge, bucket_bytes);
  // A failure outside add() (the engine's gather) leaves the bridge between
  // buckets, where the receivers can be told; one inside a broadcast cannot be.
  bool between_buckets = true;
  try {
    for_each_parameter([&](const std::string& name, const at::Tensor& tensor) {
      between_buckets = false;
      bucket.add(name, tensor);
      between_buckets = true;
    });
  } catch (...) {
    if (between_buckets) bucket.abort();
    throw;
  }
  WeightTransferStats stats = bucket.finish();
  stats.seconds = seconds_since(start);
  return stats;
}

WeightTransferStats receive_weights(InferenceEngine& engine, const WeightAdaptor& adaptor, const RolloutLayout& layout,
                                    const CommGroup& bridge, const at::Device& device, int64_t version) {
  const auto start = std::chrono::steady_clock::now();
  TargetAssembler targets(engine, adaptor, layout, version);
  WeightTransferStats stats;
  for (;;) {
    at::Tensor length = at::empty({1}, at::kLong);
    bridge.broadcast(length, 0);
    const int64_t header_bytes = length.item<int64_t>();
    if (header_bytes == 0) break;
    if (header_bytes < 0) {
      throw ValueError("weight transfer: the actor stopped sending weights version " + std::to_string(version) +
                       " (its own error says why); this rank's weights are partly that version now");
    }
    at::Tensor header_text = at::empty({header_bytes}, at::kByte);
    bridge.broadcast(header_text, 0);
    const std::vector<BucketEntry> entries =
        parse_header(std::string(static_cast<const char*>(header_text.data_ptr()), static_cast<size_t>(header_bytes)));
    int64_t total = 0;
    for (const BucketEntry& entry : entries) total = std::max(total, aligned(entry.offset + entry.bytes()));
    at::Tensor bucket = at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
    bridge.broadcast(bucket, 0);
    for (const BucketEntry& entry : entries) {
      targets.arrive(entry.name, bucket.narrow(0, entry.offset, entry.bytes()).view(entry.dtype).view(entry.shape));
    }
    targets.flush();
    stats.bytes += total;
    ++stats.buckets;
  }
  stats.tensors = targets.finish();
  stats.seconds = seconds_since(start);
  return stats;
}

}  // namespace rlcore::workers
