// The tiny random models the conformance checks run on, made on the fly: a
// Llama-shaped decoder small enough that every check takes well under a second.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"

namespace rlcore::conformance {

// 2 layers, hidden 32, 4 heads (2 kv), vocab 320 (the built-in tokenizer's), tied
// embeddings, eos 319; weights spread enough (initializer_range 0.1) that greedy
// choices are far from ties.
model::ModelConfig tiny_model_config();
model::NamedTensors tiny_model_weights(uint64_t seed);
// An HF checkpoint directory (config, model.safetensors, tokenizer files) of tiny_model_weights(seed).
void write_tiny_model(const std::filesystem::path& dir, uint64_t seed);

// Largest |a - b| (as float64); infinity when the shapes differ.
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);
// True when dtype, shape and every byte agree.
bool bit_equal(const at::Tensor& a, const at::Tensor& b);

// The largest of several measured errors, with the name of the worst one.
struct Worst {
  double error = 0;
  std::string what;
  void add(const std::string& name, double value);
};

// Compares two named tensor lists by name. Returns "" when the names and shapes
// agree (adding each difference to `worst`), else what differs.
std::string compare_named(const model::NamedTensors& candidate, const model::NamedTensors& expected, Worst& worst);

}  // namespace rlcore::conformance
