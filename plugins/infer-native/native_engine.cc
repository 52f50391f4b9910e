// NativeEngine: checkpoint loading (whole or one tensor-parallel shard),
// request validation and chunking, and the weight lifecycle (weight_meta /
// load_weights / sleep / wake_up).
#include "native_engine.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "checkpoint_loader.h"
#include "request_checks.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/model/tensor_parallel.h"
#include "sampling.h"
#include "tensor_parallel_model.h"

namespace rlcore::infer_native {
namespace {

at::ScalarType resolve_dtype(const std::string& option, const model::ModelConfig& config) {
  if (option == "float32") return at::kFloat;
  if (option == "bfloat16") return at::kBFloat16;
  if (option != "auto") throw ConfigError("infer-native: unknown dtype '" + option + "' (auto, float32, bfloat16)");
  // float16 checkpoints run in float32: half matmuls are slow or missing on CPU.
  return config.dtype() == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
}

// The kRolloutTpGroup of `comm`, checked against the option and the model.
CommGroup tensor_parallel_group(int64_t tp_size, const CommContext* comm, const model::ModelConfig& config,
                                const std::string& model_path) {
  const std::string key = "infer-native tensor_model_parallel_size " + std::to_string(tp_size);
  try {
    model::validate_tp(config, tp_size);
  } catch (const ValueError& e) {
    throw ConfigError(key + ": " + e.what() + " (" + model_path + "/config.json)");
  }
  if (comm == nullptr || !comm->has_group(kRolloutTpGroup)) {
    throw ConfigError(key + " needs the process group '" + kRolloutTpGroup +
                      "' (the trainer adds it to the actor pool's mesh; a hand-written pool mesh needs a '" +
                      kRolloutTpGroup + "' dimension of that size)");
  }
  const CommGroup& group = comm->group(kRolloutTpGroup);
  const std::vector<int64_t>& ranks = group.ranks();
  if (group.size() != tp_size) {
    throw ConfigError(key + ": the '" + kRolloutTpGroup + "' group of rank " + std::to_string(comm->rank()) + " has " +
                      std::to_string(group.size()) + " ranks");
  }
  for (size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i] != ranks[0] + static_cast<int64_t>(i)) {
      throw ConfigError(key + ": the '" + kRolloutTpGroup + "' group of rank " + std::to_string(comm->rank()) +
                        " must be consecutive pool ranks, got " + c10::str(at::IntArrayRef(ranks)));
    }
  }
  return group;
}

// FNV-1a over the words of a request: equal requests on every TP rank hash equally.
class RequestHash {
 public:
  void add(uint64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      value_ = (value_ ^ ((word >> (8 * byte)) & 0xff)) * 1099511628211ULL;
    }
  }
  void add_double(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    add(bits);
  }
  int64_t value() const { return static_cast<int64_t>(value_); }

 private:
  uint64_t value_ = 14695981039346656037ULL;
};

}  // namespace

NativeEngine::NativeEngine(const NativeEngineOptions& options, const ComponentContext& context) : options_(options) {
  const model::ModelConfig config = model::ModelConfig::from_checkpoint_dir(context.model_path, "infer-native");
  dtype_ = resolve_dtype(options.dtype, config);
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : config.max_position_embeddings;
  if (max_model_len_ > config.max_position_embeddings) {
    throw ConfigError("infer-native: max_model_len " + std::to_string(max_model_len_) +
                      " exceeds the model's max_position_embeddings " + std::to_string(config.max_position_embeddings) +
                      " (" + context.model_path + "/config.json)");
  }
  const at::Device device =
      resolve_device(context.device, context.comm != nullptr ? context.comm->local_rank() : 0, "infer-native device");
  check_dtype_supported(device, dtype_, "infer-native dtype");
  const at::TensorOptions tensor_options = at::TensorOptions().dtype(dtype_).device(device);
  model_ = std::make_unique<model::Transformer>(config, model::ModelHead::kCausalLm, tensor_options);
  if (options.tensor_model_parallel_size > 1) {
    tp_group_ = tensor_parallel_group(options.tensor_model_parallel_size, context.comm, config, context.model_path);
    make_tensor_parallel(*model_, *tp_group_);
  }
  local_specs_ = local_parameter_specs(config, tp_size());
  load_checkpoint_weights(*model_, context.model_path, tp_rank(), tp_size());
  request_seeds_ = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(options.seed));
  // Graphs would also record the TP all-reduces, which rlcore has not done yet.
  if (!options.enforce_eager && DeviceGraph::supported(device) && tp_size() == 1) {
    decode_mode_ = DecodeMode::kDeviceGraph;
  }
  requests_ = std::make_unique<Scheduler>(*model_, scheduler_options());
}

void NativeEngine::check_ready(const char* call) const {
  if (asleep_) {
    throw ValueError(std::string("infer-native: ") + call +
                     " called while the engine is asleep; call wake_up() and load_weights() first");
  }
  if (!not_loaded_.empty()) {
    throw ValueError(std::string("infer-native: ") + call +
                     " after wake_up() before every weight was reloaded: " + std::to_string(not_loaded_.size()) +
                     " parameter(s) still missing, e.g. '" + *not_loaded_.begin() + "'");
  }
}

SchedulerOptions NativeEngine::scheduler_options() const {
  SchedulerOptions options;
  options.max_num_seqs = options_.max_num_seqs;
  options.share_prefill = options_.enable_prefix_caching;
  options.static_batches = options_.static_batching;
  options.mode = decode_mode_;
  return options;
}

uint64_t NativeEngine::request_seed(int64_t seed) {
  return seed >= 0 ? static_cast<uint64_t>(seed) : request_seeds_.get<at::CPUGeneratorImpl>()->random64();
}

// A thin layer over the scheduler: every sample a sequence, all queued at
// once; max_num_seqs of them run at a time and the rest join as slots free up.
GenerationOutput NativeEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                        const SamplingParams& sampling) {
  std::lock_guard<FifoMutex> lock(mutex_);
  check_ready("generate()");
  last_decode_stats_ = DecodeStats();
  // Before validating: a rank that threw alone would leave the others waiting in a collective.
  if (tp_group_) check_same_request_across_tp(prompts, sampling);
  validate_sampling(sampling);
  check_prompts(prompts, model_->config().vocab_size, max_model_len_);

  const uint64_t seed = request_seed(sampling.seed);
  SchedulerOptions options = scheduler_options();
  options.record_routing = record_routing_;
  if (record_routing_ && options.mode == DecodeMode::kDeviceGraph) options.mode = DecodeMode::kShapeStatic;
  Scheduler scheduler(*model_, options);
  std::vector<Sequence*> order;  // prompt-major: prompt i's sample j at i * n + j
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto prompt = std::make_shared<const std::vector<int32_t>>(prompts[i]);
    const int64_t room = max_model_len_ - static_cast<int64_t>(prompts[i].size());
    for (int64_t j = 0; j < sampling.n; ++j) {
      auto seq = std::make_unique<Sequence>("", prompt, sampling, std::min(sampling.max_tokens, room), seed,
                                            static_cast<int64_t>(order.size()));
      seq->prompt_tokens = static_cast<int64_t>(prompts[i].size());
      order.push_back(seq.get());
      scheduler.add(std::move(seq));
    }
  }
  std::vector<std::unique_ptr<Sequence>> done;
  done.reserve(order.size());
  while (!scheduler.idle()) {
    for (auto& seq : scheduler.step(version_).finished) done.push_back(std::move(seq));
  }
  last_decode_stats_ = scheduler.take_stats();

  GenerationOutput output;
  output.weight_version = version_;
  routing_.clear();
  for (Sequence* seq : order) {
    if (record_routing_) routing_.push_back(at::cat(seq->routed));
    output.token_ids.push_back(std::move(seq->generated.token_ids));
    output.logprobs.push_back(std::move(seq->generated.logprobs));
    output.finish_reasons.push_back(seq->finish_reason);
  }
  return output;
}

// Rank-divergent requests would deadlock or mix different batches in the
// row-parallel all-reduces: compare every rank's request hash first.
void NativeEngine::check_same_request_across_tp(const std::vector<std::vector<int32_t>>& prompts,
                                                const SamplingParams& sampling) const {
  RequestHash hash;
  hash.add(prompts.size());
  for (const auto& prompt : prompts) {
    hash.add(prompt.size());
    for (int32_t token : prompt) hash.add(static_cast<uint64_t>(token));
  }
  hash.add(static_cast<uint64_t>(sampling.n));
  hash.add(static_cast<uint64_t>(sampling.max_tokens));
  hash.add_double(sampling.temperature);
  hash.add(static_cast<uint64_t>(sampling.top_k));
  hash.add_double(sampling.top_p);
  hash.add(static_cast<uint64_t>(sampling.seed));  // -1: drawn from request_seeds_, in step on every rank
  for (int32_t token : sampling.stop_token_ids) hash.add(static_cast<uint64_t>(token));
  const std::vector<at::Tensor> hashes = tp_group_->all_gather(at::full({1}, hash.value(), at::kLong));
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (!at::equal(hashes[r], hashes[0])) {
      throw ValueError("infer-native: tensor-parallel rank " + std::to_string(r) + " of the '" + kRolloutTpGroup +
                       "' group got different prompts or sampling params than rank 0; every rank of a TP group "
                       "must generate the same request");
    }
  }
}

std::vector<WeightMeta> NativeEngine::weight_meta() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  std::vector<WeightMeta> meta;
  for (const auto& spec : local_specs_) meta.push_back({spec.name, spec.shape, dtype_});
  return meta;
}

void NativeEngine::load_weights(const NamedTensorList& weights, int64_t version) {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (asleep_) throw ValueError("infer-native: load_weights() called while the engine is asleep; call wake_up() first");
  std::map<std::string, at::Tensor*> slots;
  for (const auto& [name, slot] : model_->parameter_slots()) slots.emplace(name, slot);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& spec : local_specs_) shapes.emplace(spec.name, spec.shape);

  NamedTensorList copied;
  std::vector<std::pair<at::Tensor*, at::Tensor>> adopted;
  std::vector<std::pair<at::Tensor*, at::Tensor>> replaced;  // slot, old value: restored if the copy fails
  for (const auto& [name, tensor] : weights) {
    auto slot = slots.find(name);
    const bool known = slot != slots.end() && tensor.defined() && tensor.sizes() == at::IntArrayRef(shapes.at(name));
    // Only a slot without storage (after wake_up_unallocated) adopts: an awake
    // engine keeps copying into its own storage, as callers expect.
    const bool unallocated = known && slot->second->sizes() != tensor.sizes();
    if (unallocated && adoptable(tensor, *slot->second)) {
      adopted.emplace_back(slot->second, tensor);
      continue;
    }
    copied.emplace_back(name, tensor);
    // An unallocated slot, or one sharing a caller's storage, gets storage of its own to copy into.
    if (known && (slot->second->sizes() != tensor.sizes() || adopted_.count(name))) {
      replaced.emplace_back(slot->second, *slot->second);
      *slot->second = at::empty(shapes.at(name), slot->second->options());
    }
  }
  try {
    model_->load(copied, model::LoadMode::kPartial);
  } catch (const ValueError& e) {
    for (auto& [slot, old] : replaced) *slot = old;
    throw ValueError(std::string("infer-native load_weights: ") + e.what());
  }
  for (auto& [slot, tensor] : adopted) *slot = tensor;
  for (const auto& entry : weights) {
    not_loaded_.erase(entry.first);
    adopted_.erase(entry.first);
  }
  for (const auto& [slot, tensor] : adopted) {
    for (const auto& [name, s] : slots)
      if (s == slot) adopted_.insert(name);
  }
  version_ = version;
}

bool NativeEngine::adoptable(const at::Tensor& tensor, const at::Tensor& slot) const {
  return tensor.scalar_type() == dtype_ && tensor.device() == slot.device() && tensor.is_contiguous() &&
         !tensor.requires_grad();
}

DecodeStats NativeEngine::last_decode_stats() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return last_decode_stats_;
}

GenerationStats NativeEngine::last_generation_stats() const {
  const DecodeStats stats = last_decode_stats();
  GenerationStats out;
  out.decode_steps = stats.steps;
  out.running_rows = stats.running_rows;
  out.max_running = stats.max_running;
  out.max_waiting = stats.max_waiting;
  out.prefill_rows = stats.prefill_rows;
  out.joins = stats.joins;
  return out;
}

int64_t NativeEngine::weight_version() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return version_;
}

void NativeEngine::sleep() {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (asleep_) return;
  if (!requests_->idle()) {
    throw ValueError("infer-native: sleep() with " + std::to_string(requests_->running() + requests_->waiting()) +
                     " request(s) in flight; abort them first (their KV cache would outlive the weights)");
  }
  bytes_released_ = held_bytes_locked();
  // Dropping the handles frees the memory: the engine owns its parameters,
  // except adopted ones, whose storage the caller releases too.
  const at::Device device = model_->parameter_slots().front().second->device();
  for (auto& [name, slot] : model_->parameter_slots()) *slot = at::empty({0}, slot->options());
  adopted_.clear();
  asleep_ = true;
  // CUDA's caching allocator keeps freed blocks for this process; sleeping is
  // for handing the memory to the trainer, so give the cache back too.
  if (device.is_cuda()) release_cached_memory(device);
}

void NativeEngine::wake_up() {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (!asleep_) return;
  auto slots = model_->parameter_slots();
  // One allocation in parameter order, as a swap bucket lays weights out: q/k/v
  // and gate/up stay adjacent, so they run as one GEMM exactly as before sleep().
  int64_t total = 0;
  for (const auto& spec : local_specs_) total += c10::multiply_integers(spec.shape);
  const at::Tensor flat = at::empty({total}, slots.front().second->options());
  int64_t offset = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t numel = c10::multiply_integers(local_specs_[i].shape);
    *slots[i].second = flat.narrow(0, offset, numel).view(local_specs_[i].shape);
    offset += numel;
    not_loaded_.insert(slots[i].first);
  }
  asleep_ = false;
}

void NativeEngine::wake_up_unallocated() {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (!asleep_) return;
  for (const auto& [name, slot] : model_->parameter_slots()) not_loaded_.insert(name);
  asleep_ = false;
}

bool NativeEngine::asleep() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return asleep_;
}

model::NamedTensors NativeEngine::parameters() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return model_->named_parameters();
}

int64_t NativeEngine::bytes_held() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return held_bytes_locked();
}

int64_t NativeEngine::bytes_released() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  return bytes_released_;
}

int64_t NativeEngine::held_bytes_locked() const {
  // Adopted parameters are views into shared buckets: count each storage once.
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& [name, tensor] : model_->named_parameters()) {
    if (seen.insert(tensor.storage().unsafeGetStorageImpl()).second)
      total += static_cast<int64_t>(tensor.storage().nbytes());
  }
  return total;
}

void NativeEngine::set_record_routing(bool enabled) {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (enabled && !model_->config().is_moe()) {
    throw ConfigError("actor_rollout_ref.rollout.enable_rollout_routing_replay: " + model_->config().model_type +
                      " is not a mixture of experts (no router to record)");
  }
  record_routing_ = enabled;
  routing_.clear();
}

std::vector<at::Tensor> NativeEngine::take_routing() {
  std::lock_guard<FifoMutex> lock(mutex_);
  return std::exchange(routing_, {});
}

}  // namespace rlcore::infer_native
