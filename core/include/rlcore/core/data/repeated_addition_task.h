// A built-in task whose responses are long-tailed in length, for measuring
// what a step loses waiting for its longest response (docs/async.md#benchmark):
// "137*4=" -> "137,274,411,548 #### 548", a product worked as running sums. The
// multiplier k is drawn with P(k) proportional to k^-1.5 on 1..max_terms, so most
// responses are a few terms and a few are many. Scored by the `arithmetic`
// grader (the answer after "####"). `rlcore data make --task repeated-addition`.
#pragma once

#include <cstdint>

#include "rlcore/core/data/arithmetic_task.h"
#include "rlcore/export.h"

namespace rlcore::data {

struct RepeatedAdditionTaskOptions {
  int64_t train = 20000;  // training records (drawn with replacement: may repeat)
  int64_t val = 300;      // validation records (distinct, none in train)
  int max_terms = 16;     // the largest multiplier, 1 to 64
  int64_t seed = 1;
};

// "137*4=" (a three-digit, k the multiplier) and its worked response.
struct RepeatedAdditionProblem {
  int64_t a = 0;
  int64_t k = 0;

  int64_t answer() const { return a * k; }
  std::string prompt() const;    // "137*4="
  std::string response() const;  // "137,274,411,548 #### 548"
};

// Deterministic in the options; data_source "arithmetic", extra_info {a, k}.
// Throws ValueError for bad options (max_terms outside 1-64, negative counts,
// a val set over half of the possible problems).
RLCORE_API ArithmeticTaskData make_repeated_addition_task(const RepeatedAdditionTaskOptions& options);

}  // namespace rlcore::data
