// The sampled distribution itself: temperature scales the logits, top_k and
// top_p cut the support (in that order, as vLLM), and the draw follows the
// renormalized probabilities. Stratified uniforms make the inverse-CDF draw
// hit each token's share within 1/N; random streams land within 5 sigma.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

#include "sampling.h"

using rlcore::SamplingParams;
using namespace rlcore::infer_native;

namespace {

// Token probabilities chosen so each cut below is unambiguous.
const std::vector<double> kProbs = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02};

SamplingParams params(double temperature, int64_t top_k = -1, double top_p = 1.0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

// Frequencies of each token over `rows` draws of the same logits with `uniforms`.
std::vector<double> frequencies(const SamplingParams& p, const at::Tensor& uniforms) {
  const int64_t rows = uniforms.size(0);
  std::vector<double> logits;
  for (double prob : kProbs) logits.push_back(std::log(prob));
  const at::Tensor batch = at::tensor(logits, at::kFloat).repeat({rows, 1});
  const at::Tensor tokens = sample_tokens(batch, p, uniforms).tokens.contiguous();
  std::vector<double> counts(kProbs.size(), 0.0);
  for (int64_t i = 0; i < rows; ++i) counts.at(static_cast<size_t>(tokens[i].item<int64_t>())) += 1;
  for (double& c : counts) c /= static_cast<double>(rows);
  return counts;
}

at::Tensor stratified(int64_t rows) { return (at::arange(rows, at::kDouble) + 0.5) / static_cast<double>(rows); }

at::Tensor random_uniforms(int64_t rows, uint64_t seed) {
  at::Tensor u = at::empty({rows}, at::kDouble);
  for (int64_t i = 0; i < rows; ++i) u[i] = SequenceRng(seed, i).uniform();
  return u;
}

// kProbs^(1/temperature) over `support`, renormalized; 0 elsewhere.
std::vector<double> expected(double temperature, const std::vector<size_t>& support) {
  std::vector<double> out(kProbs.size(), 0.0);
  double total = 0;
  for (size_t i : support) total += out[i] = std::pow(kProbs[i], 1.0 / temperature);
  for (double& p : out) p /= total;
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance) {
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("token " << i << ": " << got[i] << " vs " << want[i]);
    if (want[i] == 0) {
      CHECK(got[i] == 0);  // outside the support: never drawn
    } else {
      CHECK(std::abs(got[i] - want[i]) <= tolerance);
    }
  }
}

const std::vector<size_t> kAll = {0, 1, 2, 3, 4, 5, 6};

}  // namespace

TEST_CASE("the draw follows softmax(logits / temperature)", "[infer-native][sampling]") {
  constexpr int64_t kRows = 20000;
  for (double temperature : {0.5, 1.0, 2.0}) {
    INFO("temperature " << temperature);
    check_close(frequencies(params(temperature), stratified(kRows)), expected(temperature, kAll), 2.0 / kRows);
  }
  // The temperature really reshapes: sharper below 1, flatter above.
  CHECK(expected(0.5, kAll)[0] > 0.55);
  CHECK(expected(2.0, kAll)[0] < 0.3);
}

TEST_CASE("top_k keeps the k most likely tokens, renormalized", "[infer-native][sampling]") {
  check_close(frequencies(params(1.0, 3), stratified(20000)), expected(1.0, {0, 1, 2}), 2.0 / 20000);
  check_close(frequencies(params(2.0, 2), stratified(20000)), expected(2.0, {0, 1}), 2.0 / 20000);
}

TEST_CASE("top_p keeps the smallest head whose mass reaches p", "[infer-native][sampling]") {
  // Mass before each token: 0, 0.4, 0.65, 0.8, ...: p = 0.6 keeps {0, 1}, p = 0.7 keeps {0, 1, 2}.
  check_close(frequencies(params(1.0, -1, 0.6), stratified(20000)), expected(1.0, {0, 1}), 2.0 / 20000);
  check_close(frequencies(params(1.0, -1, 0.7), stratified(20000)), expected(1.0, {0, 1, 2}), 2.0 / 20000);
  // After top_k = 4 the head renormalizes to 0.444, 0.278, 0.167, 0.111: p = 0.8 keeps three.
  check_close(frequencies(params(1.0, 4, 0.8), stratified(20000)), expected(1.0, {0, 1, 2}), 2.0 / 20000);
}

TEST_CASE("random streams sample within statistical bounds of the same distributions", "[infer-native][sampling]") {
  constexpr int64_t kRows = 20000;
  const at::Tensor uniforms = random_uniforms(kRows, 12345);
  // 5 sigma of a binomial share with the largest variance (p = 0.5).
  const double bound = 5 * std::sqrt(0.25 / kRows);
  check_close(frequencies(params(1.0), uniforms), expected(1.0, kAll), bound);
  check_close(frequencies(params(0.5, 3), uniforms), expected(0.5, {0, 1, 2}), bound);
  check_close(frequencies(params(1.0, -1, 0.7), uniforms), expected(1.0, {0, 1, 2}), bound);
}
