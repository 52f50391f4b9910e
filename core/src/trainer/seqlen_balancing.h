// verl's sequence-length balancing (trainer.balance_batch): the batch's rows
// reordered so each data-parallel rank gets about the same work, with the
// imbalance before and after as metrics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace rlcore::trainer {

// verl's calculate_workload: the relative cost of a row of `tokens` tokens
// (dense blocks of a 7B model plus attention): 24576 * tokens + tokens^2.
int64_t sequence_workload(int64_t tokens);

// verl's get_seqlen_balanced_partitions: `values` split into `k` parts of
// about equal sums by the largest differencing method (Karmarkar-Karp), each
// part's indices sorted; with `equal_size` every part has values.size() / k
// items (ValueError when that does not divide, or when there are fewer values than parts).
std::vector<std::vector<int64_t>> balanced_partitions(const std::vector<int64_t>& values, int64_t k, bool equal_size);

struct BalancedOrder {
  // The rows in their new order: rank r's rows are [r * B / dp, (r + 1) * B / dp).
  std::vector<int64_t> order;
  // verl's global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}: tokens per rank
  // before (the rows as they were) and after balancing.
  std::map<std::string, double> metrics;
};

// verl's _balance_batch for `dp_size` ranks over the rows of `attention_mask`
// [B, L]: equal-sized parts balanced by workload, each part's rows ordered
// light, heavy, ..., heavy, light (smaller micro-batches at both ends).
BalancedOrder balance_batch_order(const at::Tensor& attention_mask, int64_t dp_size);

}  // namespace rlcore::trainer
