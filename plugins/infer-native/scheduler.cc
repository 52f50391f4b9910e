// The continuous-batching loop: admit (prefill + join), sample, leave, feed.
#include "scheduler.h"

#include <algorithm>
#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "kv_join.h"
#include "rlcore/error.h"
#include "rlcore/model/routing.h"

namespace rlcore::infer_native {
namespace {

at::Tensor index_tensor(const std::vector<int64_t>& indices, const at::Device& device) {
  return at::tensor(indices, at::kLong).to(device);
}

// Left-padded [P, L] ids and mask, as HF generate() pads.
std::pair<at::Tensor, at::Tensor> left_pad(const std::vector<const std::vector<int32_t>*>& prompts) {
  int64_t longest = 0;
  for (const auto* prompt : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt->size()));
  const auto rows = static_cast<int64_t>(prompts.size());
  at::Tensor ids = at::zeros({rows, longest}, at::kLong);
  at::Tensor mask = at::zeros({rows, longest}, at::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    const auto& prompt = *prompts[r];
    const int64_t pad = longest - static_cast<int64_t>(prompt.size());
    for (size_t t = 0; t < prompt.size(); ++t) {
      ids_a[r][pad + static_cast<int64_t>(t)] = prompt[t];
      mask_a[r][pad + static_cast<int64_t>(t)] = 1;
    }
  }
  return {ids, mask};
}

bool is_stop(int32_t token, const std::vector<int32_t>& stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

bool same_draw(const SamplingParams& a, const SamplingParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p;
}

// Appends to each sequence of `rows` at `index` (the rows of `sampled`, in
// order) the most likely tokens it asked for.
void record_top(const SampledTokens& sampled, const std::vector<std::unique_ptr<Sequence>>& rows,
                const std::vector<int64_t>& index) {
  if (!sampled.top_tokens.defined()) return;
  const at::Tensor tokens = sampled.top_tokens.to(at::kCPU).contiguous();
  const at::Tensor logprobs = sampled.top_logprobs.to(at::kCPU).contiguous();
  const int64_t width = tokens.size(1);
  for (size_t i = 0; i < index.size(); ++i) {
    Sequence& seq = *rows[static_cast<size_t>(index[i])];
    if (seq.top_logprobs <= 0) continue;
    const int64_t k = std::min(seq.top_logprobs, width);
    const int64_t* ids = tokens.data_ptr<int64_t>() + static_cast<int64_t>(i) * width;
    const float* values = logprobs.data_ptr<float>() + static_cast<int64_t>(i) * width;
    TopLogprobs top;
    top.token_ids.assign(ids, ids + k);
    top.logprobs.assign(values, values + k);
    seq.top.push_back(std::move(top));
  }
}

// One token per row, each row drawn with its own sequence's parameters and
// random stream (rows of equal parameters in one call; a left row gets 0);
// rows that ask for them record their most likely tokens.
SampledTokens sample_rows(const at::Tensor& logits, const std::vector<std::unique_ptr<Sequence>>& rows) {
  const auto batch = static_cast<int64_t>(rows.size());
  at::Tensor uniforms = at::zeros({batch}, at::kDouble);
  double* u = uniforms.data_ptr<double>();
  // A left row or a greedy one draws nothing: every sequence's stream stays its own.
  std::vector<std::vector<int64_t>> groups;
  std::vector<const SamplingParams*> group_params;
  std::vector<int64_t> group_top;  // the most top log-probs a row of the group asks for
  for (int64_t r = 0; r < batch; ++r) {
    if (!rows[r]) continue;
    const SamplingParams& params = rows[r]->sampling;
    if (!is_greedy(params)) u[r] = rows[r]->rng.uniform();
    size_t g = 0;
    while (g < groups.size() && !same_draw(*group_params[g], params)) ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      group_params.push_back(&params);
      group_top.push_back(0);
    }
    groups[g].push_back(r);
    group_top[g] = std::max(group_top[g], rows[r]->top_logprobs);
  }
  if (groups.size() == 1 && static_cast<int64_t>(groups[0].size()) == batch) {
    SampledTokens out = sample_tokens(logits, *group_params[0], uniforms, group_top[0]);
    record_top(out, rows, groups[0]);
    return out;
  }
  SampledTokens out{at::zeros({batch}, logits.options().dtype(at::kLong)),
                    at::zeros({batch}, logits.options().dtype(at::kFloat))};
  for (size_t g = 0; g < groups.size(); ++g) {
    const at::Tensor index = index_tensor(groups[g], logits.device());
    const SampledTokens part = sample_tokens(logits.index_select(0, index), *group_params[g],
                                             uniforms.index_select(0, index.cpu()), group_top[g]);
    record_top(part, rows, groups[g]);
    out.tokens.index_copy_(0, index, part.tokens);
    out.logprobs.index_copy_(0, index, part.logprobs);
  }
  return out;
}

}  // namespace

Scheduler::Scheduler(const model::Transformer& model, SchedulerOptions options) : model_(model), options_(options) {
  if (options_.max_num_seqs < 1) {
    throw ValueError("infer-native: max_num_seqs must be >= 1, got " + std::to_string(options_.max_num_seqs));
  }
  if (options_.record_routing && !model_.config().is_moe()) {
    throw ValueError("infer-native: recording the routing needs a mixture of experts; " + model_.config().model_type +
                     " has no sparse layers");
  }
}

model::MoeRouting* Scheduler::recording(model::MoeRouting* routing) const {
  return options_.record_routing ? routing : nullptr;
}

void Scheduler::add(std::unique_ptr<Sequence> sequence) { waiting_.push_back(std::move(sequence)); }

DecodeStats Scheduler::take_stats() { return std::exchange(stats_, DecodeStats()); }

bool Scheduler::contains(const std::string& id) const { return find(id) != nullptr; }

Sequence* Scheduler::find(const std::string& id) const {
  auto is = [&id](const std::unique_ptr<Sequence>& seq) { return seq && seq->id == id; };
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), is); it != waiting_.end()) return it->get();
  if (auto it = std::find_if(rows_.begin(), rows_.end(), is); it != rows_.end()) return it->get();
  return nullptr;
}

void Scheduler::reset_batch() {
  stepper_.reset();
  rows_.clear();
  cache_ = model::KvCache();
  logits_ = at::Tensor();
  live_ = 0;
}

at::Tensor Scheduler::compact() {
  std::vector<int64_t> keep;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r]) keep.push_back(static_cast<int64_t>(r));
  }
  if (keep.size() == rows_.size()) return {};
  if (keep.empty()) {
    reset_batch();
    return {};
  }
  const at::Tensor index = index_tensor(keep, cache_.valid.device());
  stepper_->keep_rows(index);
  std::vector<std::unique_ptr<Sequence>> kept;
  kept.reserve(keep.size());
  for (int64_t r : keep) kept.push_back(std::move(rows_[r]));
  rows_.swap(kept);
  return index;
}

void Scheduler::admit() {
  if (waiting_.empty() || (options_.static_batches && live_ > 0)) return;
  const int64_t free = options_.max_num_seqs - live_;
  if (free <= 0) return;
  std::vector<std::unique_ptr<Sequence>> joining;
  while (!waiting_.empty() && static_cast<int64_t>(joining.size()) < free) {
    joining.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  // Joining rebuilds the cache anyway: leave out the rows that already left.
  if (live_ > 0) {
    if (const at::Tensor kept = compact(); kept.defined()) logits_ = logits_.index_select(0, kept);
  }

  // One prefill row per distinct prompt (per sequence without sharing).
  std::vector<const std::vector<int32_t>*> prompts;
  std::vector<int64_t> prompt_row;
  std::map<std::vector<int32_t>, int64_t> row_of;
  int64_t longest_remaining = 0;
  for (const auto& seq : joining) {
    const std::vector<int32_t>& prompt = *seq->prefill;
    auto [it, inserted] = row_of.try_emplace(prompt, static_cast<int64_t>(prompts.size()));
    if (inserted || !options_.share_prefill) {
      prompt_row.push_back(static_cast<int64_t>(prompts.size()));
      prompts.push_back(&prompt);
    } else {
      prompt_row.push_back(it->second);
    }
    longest_remaining = std::max(longest_remaining, seq->remaining());
  }
  for (const auto& seq : rows_) longest_remaining = std::max(longest_remaining, seq->remaining());

  const at::Device device = model_.embed_tokens.device();
  const auto [ids, mask] = left_pad(prompts);
  const int64_t prompt_len = ids.size(1);
  const bool alone = live_ == 0;
  // Room for every row's remaining tokens after the aligned slots (the last
  // sampled token is never fed back, so this is one more than needed).
  const int64_t max_len = std::max(alone ? 0 : cache_.used, prompt_len) + longest_remaining;
  model::KvCache prefilled = model_.make_cache(static_cast<int64_t>(prompts.size()), alone ? max_len : prompt_len);
  model::MoeRouting routing;
  at::Tensor logits =
      model_.forward(ids.to(device), prefilled, mask.to(device), {}, /*keep_last=*/1, recording(&routing)).select(1, 0);
  if (options_.record_routing) {
    // Each sequence's prefill is the last tokens of its left-padded row.
    const at::Tensor routed = model::stack_routing(routing, model_.config(), ids.sizes()).cpu();
    for (size_t j = 0; j < joining.size(); ++j) {
      const auto tokens = static_cast<int64_t>(joining[j]->prefill->size());
      joining[j]->routed.push_back(routed[prompt_row[j]].slice(0, prompt_len - tokens));
    }
  }
  ++stats_.prefills;
  stats_.prefill_rows += static_cast<int64_t>(prompts.size());
  if (prompts.size() != joining.size()) {
    const at::Tensor rows = index_tensor(prompt_row, device);
    prefilled.keep_rows(rows);
    logits = logits.index_select(0, rows);
  }

  if (alone) {
    cache_ = std::move(prefilled);
    logits_ = logits;
    rows_ = std::move(joining);
  } else {
    cache_ = join_rows(cache_, prefilled, max_len);
    logits_ = at::cat({logits_, logits});
    for (auto& seq : joining) rows_.push_back(std::move(seq));
    ++stats_.joins;
  }
  live_ = static_cast<int64_t>(rows_.size());
  stepper_.emplace(model_, cache_, options_.mode, stats_);
}

Scheduler::Step Scheduler::step(int64_t weight_version) {
  c10::InferenceMode inference_mode;
  admit();
  stats_.max_waiting = std::max(stats_.max_waiting, static_cast<int64_t>(waiting_.size()));
  Step out;
  if (live_ == 0) return out;

  const SampledTokens sampled = sample_rows(logits_, rows_);
  const at::Tensor tokens_cpu = sampled.tokens.to(at::kCPU);
  const at::Tensor logprobs_cpu = sampled.logprobs.to(at::kCPU);
  const int64_t* tokens = tokens_cpu.data_ptr<int64_t>();
  const float* logprobs = logprobs_cpu.data_ptr<float>();
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (!rows_[r]) continue;
    Sequence& seq = *rows_[r];
    const auto token = static_cast<int32_t>(tokens[r]);
    seq.generated.token_ids.push_back(token);
    seq.generated.logprobs.push_back(logprobs[r]);
    seq.generated.weight_versions.push_back(weight_version);
    out.advanced.push_back(&seq);
    bool done = true;
    if (is_stop(token, seq.sampling.stop_token_ids)) {
      seq.finish_reason = FinishReason::kStop;
    } else if (seq.remaining() <= 0) {
      seq.finish_reason = FinishReason::kLength;
    } else {
      done = false;
    }
    if (done) {
      out.finished.push_back(std::move(rows_[r]));
      --live_;
    }
  }
  if (live_ == 0) {
    reset_batch();
    return out;
  }

  at::Tensor next = sampled.tokens;
  const auto batch = static_cast<int64_t>(rows_.size());
  // Eager steps shrink with every finished row; shape-static ones (a new
  // graph each time) only once half the rows have finished.
  const bool shrink = stepper_->mode() == DecodeMode::kEager ? live_ != batch : 2 * live_ <= batch;
  if (shrink) {
    if (const at::Tensor kept = compact(); kept.defined()) next = next.index_select(0, kept);
  }
  stats_.running_rows += live_;
  stats_.max_running = std::max(stats_.max_running, live_);
  model::MoeRouting routing;
  logits_ = stepper_->step(next, recording(&routing));
  if (options_.record_routing) {
    const auto batch_now = static_cast<int64_t>(rows_.size());
    const at::Tensor routed = model::stack_routing(routing, model_.config(), {batch_now}).cpu();
    for (int64_t r = 0; r < batch_now; ++r) {
      if (rows_[static_cast<size_t>(r)]) rows_[static_cast<size_t>(r)]->routed.push_back(routed.slice(0, r, r + 1));
    }
  }
  return out;
}

std::unique_ptr<Sequence> Scheduler::remove(const std::string& id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> seq = std::move(*it);
      waiting_.erase(it);
      return seq;
    }
  }
  for (auto& row : rows_) {
    if (!row || row->id != id) continue;
    std::unique_ptr<Sequence> seq = std::move(row);
    --live_;
    if (live_ == 0) {
      reset_batch();
    } else if (stepper_->mode() == DecodeMode::kEager) {
      c10::InferenceMode inference_mode;
      if (const at::Tensor kept = compact(); kept.defined()) logits_ = logits_.index_select(0, kept);
    }
    return seq;
  }
  return nullptr;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::remove_all() {
  std::vector<std::unique_ptr<Sequence>> out;
  for (auto& seq : waiting_) out.push_back(std::move(seq));
  waiting_.clear();
  for (auto& row : rows_) {
    if (row) out.push_back(std::move(row));
  }
  reset_batch();
  return out;
}

}  // namespace rlcore::infer_native
