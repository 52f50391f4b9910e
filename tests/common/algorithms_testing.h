// Helpers for the algorithm tests: small tensors from nested vectors and back,
// and the plain-loop reference statistics the expected values are built from.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "error_of.h"

namespace rlcore_test {

using Row = std::vector<double>;
using Matrix = std::vector<Row>;

inline at::Tensor tensor(const Matrix& rows, at::ScalarType dtype = at::kDouble) {
  const int64_t b = static_cast<int64_t>(rows.size());
  const int64_t t = b == 0 ? 0 : static_cast<int64_t>(rows[0].size());
  at::Tensor out = at::empty({b, t}, at::kDouble);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < t; ++j) out[i][j] = rows[i][j];
  }
  return out.to(dtype);
}

inline at::Tensor tensor(const Row& row, at::ScalarType dtype = at::kDouble) {
  at::Tensor out = at::empty({static_cast<int64_t>(row.size())}, at::kDouble);
  for (size_t i = 0; i < row.size(); ++i) out[static_cast<int64_t>(i)] = row[i];
  return out.to(dtype);
}

inline at::Tensor index_tensor(const std::vector<int64_t>& ids) {
  at::Tensor out = at::empty({static_cast<int64_t>(ids.size())}, at::kLong);
  for (size_t i = 0; i < ids.size(); ++i) out[static_cast<int64_t>(i)] = ids[i];
  return out;
}

inline Matrix matrix(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
  Matrix out(d.size(0), Row(d.size(1)));
  for (int64_t i = 0; i < d.size(0); ++i) {
    for (int64_t j = 0; j < d.size(1); ++j) out[i][j] = d[i][j].item<double>();
  }
  return out;
}

inline double scalar(const at::Tensor& t) { return t.detach().to(at::kDouble).item<double>(); }

// Every element within `tolerance` (absolute) of the expected one.
inline void check_close(const at::Tensor& actual, const Matrix& expected, double tolerance = 1e-9) {
  const Matrix got = matrix(actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == expected[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) {
      INFO("row " << i << " column " << j << ": got " << got[i][j] << ", expected " << expected[i][j]);
      CHECK(std::abs(got[i][j] - expected[i][j]) <= tolerance);
    }
  }
}

inline bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

// ---- plain-loop references --------------------------------------------------

inline Row row_sums(const Matrix& m) {
  Row out;
  for (const auto& row : m) {
    double s = 0;
    for (double v : row) s += v;
    out.push_back(s);
  }
  return out;
}

// Members of each group, by row.
inline std::map<int64_t, std::vector<size_t>> groups_of(const std::vector<int64_t>& index) {
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < index.size(); ++i) groups[index[i]].push_back(i);
  return groups;
}

inline double mean_of(const Row& scores, const std::vector<size_t>& rows) {
  double s = 0;
  for (size_t r : rows) s += scores[r];
  return s / static_cast<double>(rows.size());
}

// Unbiased (n - 1) standard deviation, as torch.std.
inline double std_of(const Row& scores, const std::vector<size_t>& rows) {
  const double mean = mean_of(scores, rows);
  double ss = 0;
  for (size_t r : rows) ss += (scores[r] - mean) * (scores[r] - mean);
  return std::sqrt(ss / static_cast<double>(rows.size() - 1));
}

// (v - masked mean) / sqrt(unbiased masked var + 1e-8) at every position;
// like verl, each masked mean divides by (count + 1e-8).
inline Matrix whiten_ref(const Matrix& values, const Matrix& mask) {
  double sum = 0, count = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < values[i].size(); ++j) {
      if (mask[i][j] != 0) {
        sum += values[i][j];
        count += 1;
      }
    }
  }
  const double mean = sum / (count + 1e-8);
  double ss = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < values[i].size(); ++j) {
      if (mask[i][j] != 0) ss += (values[i][j] - mean) * (values[i][j] - mean);
    }
  }
  const double var = ss / (count + 1e-8) * (count / (count - 1));
  Matrix out = values;
  for (auto& row : out) {
    for (double& v : row) v = (v - mean) / std::sqrt(var + 1e-8);
  }
  return out;
}

inline Matrix times_mask(const Matrix& values, const Matrix& mask) {
  Matrix out = values;
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = 0; j < out[i].size(); ++j) out[i][j] *= mask[i][j] != 0 ? 1.0 : 0.0;
  }
  return out;
}

// Row scalar broadcast over the row's masked positions.
inline Matrix broadcast(const Row& scalar, const Matrix& mask) {
  Matrix out = mask;
  for (size_t i = 0; i < out.size(); ++i) {
    for (double& v : out[i]) v = v != 0 ? scalar[i] : 0.0;
  }
  return out;
}

}  // namespace rlcore_test
