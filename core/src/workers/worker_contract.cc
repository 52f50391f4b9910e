// stream's reply as rows (StreamReply in worker_contract.h).
#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {
namespace {

constexpr const char* kTokenIds = "stream_token_ids";
constexpr const char* kLogprobs = "stream_logprobs";
constexpr const char* kVersions = "stream_weight_versions";
constexpr const char* kLengths = "stream_lengths";
constexpr const char* kStopped = "stream_stopped";

}  // namespace

Batch StreamReply::to_batch() const {
  const auto rows = static_cast<int64_t>(finished.size());
  if (rows == 0) return Batch();
  int64_t longest = 0;
  for (const auto& f : finished) longest = std::max(longest, static_cast<int64_t>(f.tokens.size()));
  at::Tensor ids = at::full({rows, longest}, -1, at::kInt);
  at::Tensor logprobs = at::zeros({rows, longest}, at::kFloat);
  at::Tensor versions = at::full({rows, longest}, -1, at::kLong);
  at::Tensor lengths = at::empty({rows}, at::kLong);
  at::Tensor stopped = at::empty({rows}, at::kLong);
  at::Tensor request = at::empty({rows}, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    const Finished& f = finished[static_cast<size_t>(r)];
    const auto length = static_cast<int64_t>(f.tokens.size());
    std::copy_n(f.tokens.token_ids.begin(), length, ids.data_ptr<int32_t>() + r * longest);
    std::copy_n(f.tokens.logprobs.begin(), length, logprobs.data_ptr<float>() + r * longest);
    std::copy_n(f.tokens.weight_versions.begin(), length, versions.data_ptr<int64_t>() + r * longest);
    lengths.data_ptr<int64_t>()[r] = length;
    stopped.data_ptr<int64_t>()[r] = f.stopped ? 1 : 0;
    request.data_ptr<int64_t>()[r] = f.id;
  }
  Batch out(rows);
  out.set(kRequestId, request);
  out.set(kTokenIds, ids);
  out.set(kLogprobs, logprobs);
  out.set(kVersions, versions);
  out.set(kLengths, lengths);
  out.set(kStopped, stopped);
  return out;
}

StreamReply StreamReply::from_reply(const Batch& rows, const StreamStatus& status) {
  StreamReply reply;
  reply.unfinished = status.unfinished;
  if (rows.size() == 0) return reply;
  const at::Tensor ids = rows.tensor(kTokenIds).to(at::kInt).contiguous();
  const at::Tensor logprobs = rows.tensor(kLogprobs).to(at::kFloat).contiguous();
  const at::Tensor versions = rows.tensor(kVersions).to(at::kLong).contiguous();
  const at::Tensor lengths = rows.tensor(kLengths).to(at::kLong).contiguous();
  const at::Tensor stopped = rows.tensor(kStopped).to(at::kLong).contiguous();
  const at::Tensor request = rows.tensor(kRequestId).to(at::kLong).contiguous();
  const int64_t width = ids.size(1);
  for (int64_t r = 0; r < rows.size(); ++r) {
    const int64_t length = lengths.data_ptr<int64_t>()[r];
    if (length < 0 || length > width)
      throw FormatError("rollout.stream: row " + std::to_string(r) + " has length " + std::to_string(length) + " of " +
                        std::to_string(width));
    Finished f;
    f.id = request.data_ptr<int64_t>()[r];
    f.stopped = stopped.data_ptr<int64_t>()[r] != 0;
    const int32_t* id = ids.data_ptr<int32_t>() + r * width;
    const float* lp = logprobs.data_ptr<float>() + r * width;
    const int64_t* v = versions.data_ptr<int64_t>() + r * width;
    f.tokens.token_ids.assign(id, id + length);
    f.tokens.logprobs.assign(lp, lp + length);
    f.tokens.weight_versions.assign(v, v + length);
    reply.finished.push_back(std::move(f));
  }
  return reply;
}

}  // namespace rlcore::workers
