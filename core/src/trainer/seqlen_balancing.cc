// Karmarkar-Karp partitioning and the balanced row order, as verl computes them
// (verl/utils/seqlen_balancing.py, ray_trainer._balance_batch).
#include "trainer/seqlen_balancing.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <utility>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::trainer {
namespace {

// One part being built: its items (index, value) and their sum.
struct Part {
  int64_t sum = 0;
  std::vector<std::pair<int64_t, int64_t>> items;

  // verl's Set.__lt__: by sum, then item count, then the items themselves.
  bool operator<(const Part& other) const {
    if (sum != other.sum) return sum < other.sum;
    if (items.size() != other.items.size()) return items.size() < other.items.size();
    return items < other.items;
  }
};

// k parts, largest first.
struct PartialSolution {
  std::vector<Part> parts;

  int64_t spread() const { return parts.front().sum - parts.back().sum; }
  void sort_parts() {
    std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return b < a; });
  }
  // The largest of `other`'s parts joins this one's smallest, and so on.
  void merge(const PartialSolution& other) {
    const size_t k = parts.size();
    for (size_t i = 0; i < k; ++i) {
      const Part& from = other.parts[k - 1 - i];
      parts[i].items.insert(parts[i].items.end(), from.items.begin(), from.items.end());
      parts[i].sum += from.sum;
    }
    sort_parts();
  }
};

// verl's State.__lt__ (heapq pops the least): the largest spread first, then the largest top part.
bool pops_first(const PartialSolution& a, const PartialSolution& b) {
  if (a.spread() != b.spread()) return a.spread() > b.spread();
  return b.parts.front() < a.parts.front();
}

// std::priority_queue pops its greatest element: a is "less" when it pops after b.
struct PopsAfter {
  bool operator()(const PartialSolution& a, const PartialSolution& b) const { return pops_first(b, a); }
};

}  // namespace

int64_t sequence_workload(int64_t tokens) { return 24576 * tokens + tokens * tokens; }

std::vector<std::vector<int64_t>> balanced_partitions(const std::vector<int64_t>& values, int64_t k, bool equal_size) {
  const auto n = static_cast<int64_t>(values.size());
  if (k < 1 || n < k) {
    throw ValueError("balancing " + std::to_string(n) + " rows over " + std::to_string(k) +
                     " ranks: every rank needs a row");
  }
  if (equal_size && n % k != 0) {
    throw ValueError("balancing " + std::to_string(n) + " rows into " + std::to_string(k) +
                     " equal parts: the rows must divide evenly");
  }
  std::vector<std::pair<int64_t, int64_t>> sorted;  // (value, index), ascending
  for (int64_t i = 0; i < n; ++i) sorted.emplace_back(values[static_cast<size_t>(i)], i);
  std::sort(sorted.begin(), sorted.end());

  std::priority_queue<PartialSolution, std::vector<PartialSolution>, PopsAfter> heap;
  const int64_t group = equal_size ? k : 1;
  for (int64_t offset = 0; offset < n; offset += group) {
    PartialSolution solution;
    solution.parts.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < group; ++i) {
      const auto& [value, index] = sorted[static_cast<size_t>(offset + i)];
      solution.parts[static_cast<size_t>(i)].items.emplace_back(index, value);
      solution.parts[static_cast<size_t>(i)].sum += value;
    }
    solution.sort_parts();
    heap.push(std::move(solution));
  }
  while (heap.size() > 1) {
    PartialSolution first = heap.top();
    heap.pop();
    const PartialSolution second = heap.top();
    heap.pop();
    first.merge(second);
    heap.push(std::move(first));
  }
  std::vector<std::vector<int64_t>> out;
  for (const Part& part : heap.top().parts) {
    std::vector<int64_t> indices;
    for (const auto& item : part.items) indices.push_back(item.first);
    std::sort(indices.begin(), indices.end());
    out.push_back(std::move(indices));
  }
  return out;
}

BalancedOrder balance_batch_order(const at::Tensor& attention_mask, int64_t dp_size) {
  const at::Tensor lengths = attention_mask.reshape({attention_mask.size(0), -1}).sum(-1).to(at::kCPU, at::kLong);
  const std::vector<int64_t> tokens(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
  std::vector<int64_t> workloads;
  for (const int64_t t : tokens) workloads.push_back(sequence_workload(t));
  std::vector<std::vector<int64_t>> parts = balanced_partitions(workloads, dp_size, /*equal_size=*/true);

  BalancedOrder out;
  for (std::vector<int64_t>& part : parts) {
    std::sort(part.begin(), part.end(), [&](int64_t a, int64_t b) {
      return std::make_pair(workloads[static_cast<size_t>(a)], a) <
             std::make_pair(workloads[static_cast<size_t>(b)], b);
    });
    // Light, heavier, ..., heaviest, ..., lighter: smaller micro-batches at both ends (pipeline bubbles).
    std::vector<int64_t> odd;
    for (size_t i = 0; i < part.size(); ++i) {
      if (i % 2 == 0) {
        out.order.push_back(part[i]);
      } else {
        odd.push_back(part[i]);
      }
    }
    out.order.insert(out.order.end(), odd.rbegin(), odd.rend());
  }
  // verl's log_seqlen_unbalance: consecutive blocks of rows as they came, then the parts.
  const auto per_rank = static_cast<int64_t>(tokens.size()) / dp_size;
  int64_t before_min = 0, before_max = 0, total = 0;
  for (int64_t r = 0; r < dp_size; ++r) {
    const int64_t sum = std::accumulate(tokens.begin() + r * per_rank, tokens.begin() + (r + 1) * per_rank, int64_t{0});
    before_min = r == 0 ? sum : std::min(before_min, sum);
    before_max = r == 0 ? sum : std::max(before_max, sum);
    total += sum;
  }
  int64_t after_min = 0, after_max = 0;
  for (size_t r = 0; r < parts.size(); ++r) {
    int64_t sum = 0;
    for (const int64_t row : parts[r]) sum += tokens[static_cast<size_t>(row)];
    after_min = r == 0 ? sum : std::min(after_min, sum);
    after_max = r == 0 ? sum : std::max(after_max, sum);
  }
  out.metrics = {{"global_seqlen/min", static_cast<double>(before_min)},
                 {"global_seqlen/max", static_cast<double>(before_max)},
                 {"global_seqlen/minmax_diff", static_cast<double>(before_max - before_min)},
                 {"global_seqlen/balanced_min", static_cast<double>(after_min)},
                 {"global_seqlen/balanced_max", static_cast<double>(after_max)},
                 {"global_seqlen/mean", static_cast<double>(total) / static_cast<double>(dp_size)}};
  return out;
}

}  // namespace rlcore::trainer
