// The rollout's log-probs against the trainer's (see rollout_probs.h).
#include "trainer/rollout_probs.h"

#include <sstream>

#include <ATen/ATen.h>

#include "rlcore/columns.h"
#include "rlcore/error.h"

namespace rlcore::trainer {

void add_rollout_probs_diff(const Batch& batch, StepMetrics& metrics, bool check_exact, int64_t step, int64_t version) {
  const at::Tensor mask = batch.tensor(columns::kResponseMask).to(at::kBool);
  const at::Tensor rollout = batch.tensor(columns::kRolloutLogProbs);
  const at::Tensor trainer = batch.tensor(columns::kOldLogProbs);
  const at::Tensor diff = (rollout.exp() - trainer.exp()).abs().masked_select(mask);
  if (diff.numel() == 0) return;
  metrics["training/rollout_probs_diff_max"] = diff.max().item<double>();
  metrics["training/rollout_probs_diff_mean"] = diff.mean().item<double>();
  at::Tensor compared = mask;
  if (batch.contains(kSampledByVersion)) {
    compared = mask.logical_and(batch.tensor(kSampledByVersion).eq(version).unsqueeze(1));
  }
  metrics["training/rollout_logprob_compared"] = static_cast<double>(compared.sum().item<int64_t>());
  const at::Tensor mismatched = rollout.ne(trainer).logical_and(compared);
  const int64_t mismatches = mismatched.sum().item<int64_t>();
  metrics["training/rollout_logprob_mismatches"] = static_cast<double>(mismatches);
  if (!check_exact || mismatches == 0) return;
  const at::Tensor first = mismatched.nonzero().select(0, 0);
  const int64_t row = first[0].item<int64_t>(), token = first[1].item<int64_t>();
  std::ostringstream message;
  message.precision(9);
  message << "trainer.check_exact_logprobs: step " << step << ", sample " << row;
  if (batch.contains(columns::kUid))
    message << " (prompt uid " << batch.tensor(columns::kUid)[row].item<int64_t>() << ")";
  message << ", response token " << token << ": the rollout's log-prob " << rollout[row][token].item<float>()
          << " is not the trainer's " << trainer[row][token].item<float>() << " (weights version " << version << "; "
          << mismatches << " of the step's " << metrics["training/rollout_logprob_compared"]
          << " compared response tokens differ)";
  throw Error(message.str());
}

}  // namespace rlcore::trainer
