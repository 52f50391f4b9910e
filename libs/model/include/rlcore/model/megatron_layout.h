// The Megatron-core parameter layout of the Llama / Qwen / Mixtral / DeepSeek-V3 decoder, and its
// conversion to and from Hugging Face tensors, in one place for the
// train-megatron engine and its weight adaptor.
//
// Names follow Megatron-core's GPT model with the local (non-TE) layer spec:
//   embedding.word_embeddings.weight                      [V, H]  vocab-parallel (dim 0)
//   decoder.layers.N.input_layernorm.weight               [H]     replicated
//   decoder.layers.N.self_attention.linear_qkv.weight     [G*(Q/G+2)*D, H] column (whole query groups)
//   decoder.layers.N.self_attention.linear_qkv.bias       qwen2 / attention_bias
//   decoder.layers.N.self_attention.q_layernorm.weight    qwen3: [D] replicated (also k_layernorm)
//   decoder.layers.N.self_attention.linear_proj.weight    [H, Q*D] row (dim 1); bias replicated
// DeepSeek-V3's latent attention (MLASelfAttention, local spec) instead of linear_qkv:
//   decoder.layers.N.self_attention.linear_q_proj.weight        [Q*(Dn+Dr), H] column (no q_lora_rank), or
//   decoder.layers.N.self_attention.linear_q_down_proj.weight   [Rq, H]  replicated (HF q_a_proj)
//   decoder.layers.N.self_attention.q_layernorm.weight          [Rq]     replicated (HF q_a_layernorm)
//   decoder.layers.N.self_attention.linear_q_up_proj.weight     [Q*(Dn+Dr), Rq] column, whole heads (HF q_b_proj)
//   decoder.layers.N.self_attention.linear_kv_down_proj.weight  [Rkv+Dr, H] replicated (HF kv_a_proj_with_mqa)
//   decoder.layers.N.self_attention.kv_layernorm.weight         [Rkv]    replicated (HF kv_a_layernorm)
//   decoder.layers.N.self_attention.linear_kv_up_proj.weight    [Q*(Dn+Dv), Rkv] column, whole heads (HF kv_b_proj)
//   decoder.layers.N.self_attention.linear_proj.weight          [H, Q*Dv] row
// (Transformer Engine's spec fuses the two norms into linear_{q,kv}_up_proj.layer_norm_weight.)
//   decoder.layers.N.pre_mlp_layernorm.weight             [H]     replicated
//   decoder.layers.N.mlp.linear_fc1.weight                [2I, H] column: gate and up fused
//   decoder.layers.N.mlp.linear_fc2.weight                [H, I]  row; bias replicated
// A sparse (mixture-of-experts) layer has instead of linear_fc1 / linear_fc2:
//   decoder.layers.N.mlp.router.weight                    [E, H]  replicated (HF mlp.gate / block_sparse_moe.gate)
//   decoder.layers.N.mlp.experts.local_experts.K.linear_fc1.weight  [2Im, H] [gate; up] (Mixtral [w1; w3]), whole
//   decoder.layers.N.mlp.experts.local_experts.K.linear_fc2.weight  [H, Im]  down_proj (Mixtral w2), whole
// DeepSeek-V3 adds, replicated like the experts:
//   decoder.layers.N.mlp.router.expert_bias               [E]     HF mlp.gate.e_score_correction_bias
//   decoder.layers.N.mlp.shared_experts.linear_fc1.weight [2Is, H] [gate; up] of mlp.shared_experts, whole
//   decoder.layers.N.mlp.shared_experts.linear_fc2.weight [H, Is]  its down_proj, whole
// Experts are never split over TP (expert tensor parallel size 1). K is the
// global expert index here (Megatron's local index at expert parallel size 1):
// an expert-parallel engine holds a subset of these names.
//   decoder.final_layernorm.weight                        [H]     replicated
//   output_layer.weight                                   [V, H]  vocab-parallel; untied models only
// (Q query heads, G = key/value heads = query groups, D head_dim, I intermediate; latent:
// Dn qk_nope_head_dim, Dr the rotary head_dim, Dv v_head_dim, Rq q_lora_rank, Rkv kv_lora_rank,
// Is = n_shared_experts * moe_intermediate_size.)
//
// A full (tp = 1) tensor is "canonical": linear_qkv is grouped as
// [group][q heads of the group, k, v][D], linear_fc1 is [gate; up]. A rank's
// TP shard of linear_qkv is a contiguous run of whole groups; its shard of
// linear_fc1 is [gate shard; up shard] (Megatron's per-rank fusion), so the
// canonical tensor is not the concatenation of fc1 shards: use tp_shard /
// merge_tp_shards, never a plain split or cat.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/tensor_parallel.h"

namespace rlcore::model::megatron {

struct MegatronParam {
  std::string name;                      // Megatron-core name, global layer index
  std::vector<int64_t> shape;            // canonical (tp = 1) shape
  TpSplit split = TpSplit::kReplicated;  // kColumn: dim 0 (incl. vocab-parallel), kRow: dim 1
  int64_t layer = -1;                    // decoder layer; -1 for embedding, final norm and output layer
  int64_t expert = -1;                   // global expert index of an expert's weight; -1 otherwise
};

// Every parameter of the model in Megatron order: embedding, each layer,
// final norm, output layer (untied only). ConfigError for a config Megatron
// cannot lay out (e.g. heads not divisible into query groups).
std::vector<MegatronParam> megatron_parameters(const ModelConfig& config);

// The parameter named `name`; ValueError naming it when the model has none.
MegatronParam megatron_parameter(const ModelConfig& config, const std::string& name);

// The HF tensors a Megatron parameter is built from, in the order from_hf takes them.
std::vector<std::string> hf_sources(const ModelConfig& config, const std::string& megatron_name);

// The canonical Megatron tensor (new storage) from its HF sources.
at::Tensor from_hf(const ModelConfig& config, const std::string& megatron_name, const std::vector<at::Tensor>& hf);

// The Megatron parameter an HF tensor lives in (model.embed_tokens.weight ->
// embedding.word_embeddings.weight, q_proj.weight -> linear_qkv.weight, ...),
// and the HF tensor cut out of that parameter's canonical tensor (a view,
// except q/k/v of a model with several query groups: those are copies).
std::string megatron_source(const ModelConfig& config, const std::string& hf_name);
at::Tensor to_hf(const ModelConfig& config, const std::string& hf_name, const at::Tensor& megatron_full);

// Rank tp_rank's shard of a canonical tensor (a copy for linear_fc1, a view
// otherwise), and the canonical tensor from every rank's shard in rank order.
// ValueError naming the parameter when tp_size does not divide it.
at::Tensor tp_shard(const ModelConfig& config, const MegatronParam& param, const at::Tensor& full, int64_t tp_rank,
                    int64_t tp_size);
at::Tensor merge_tp_shards(const ModelConfig& config, const MegatronParam& param,
                           const std::vector<at::Tensor>& shards);

// ValueError naming the model field unless tp_size divides the query groups,
// intermediate_size and vocab_size, and pp_size <= num_hidden_layers.
void validate_parallel(const ModelConfig& config, int64_t tp_size, int64_t pp_size);

// The decoder layers [begin, end) pipeline stage pp_rank holds: an even
// split, the first (num_layers % pp_size) stages take one layer more.
std::pair<int64_t, int64_t> pp_layer_range(int64_t num_layers, int64_t pp_rank, int64_t pp_size);

}  // namespace rlcore::model::megatron
