#!/usr/bin/env python3
"""Golden logits for model_transformer_test.cc: the Hugging Face Llama / Qwen2 /
Qwen3 eager forward written out in plain torch (no transformers needed).

Usage: hf_decoder_reference.py MANIFEST.json
The manifest lists cases: {"config": <HF config.json>, "weights_file", "weights":
[{"name", "shape", "offset"}] (raw little-endian float32), "input_ids",
"attention_mask", "output"}. Logits [B, T, vocab] are written to "output" as raw
float32. Written from the transformers modeling code, independently of rlcore's
C++ (repeat_kv, additive finfo.min mask, HF-style position ids).
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps):
    input_dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    batch, kv_heads, slen, head_dim = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(batch, kv_heads, n_rep, slen, head_dim)
    return x.reshape(batch, kv_heads * n_rep, slen, head_dim)


def inv_freq(cfg, head_dim):
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = cfg.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "linear":
        return inv / scaling["factor"]
    if rope_type == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_len = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv
        inv_llama = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, inv_llama)
    assert rope_type == "default", rope_type
    return inv


def expected_names(cfg):
    """The parameter names HF's modules would register, from the config alone."""
    model_type = cfg["model_type"]
    qkv_bias = model_type == "qwen2" or cfg.get("attention_bias", False)
    o_bias = model_type != "qwen2" and cfg.get("attention_bias", False)
    mlp_bias = model_type == "llama" and cfg.get("mlp_bias", False)
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    if not cfg.get("tie_word_embeddings", False):
        names.append("lm_head.weight")
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
        for proj, bias in (("q", qkv_bias), ("k", qkv_bias), ("v", qkv_bias), ("o", o_bias)):
            names.append(f"{p}self_attn.{proj}_proj.weight")
            if bias:
                names.append(f"{p}self_attn.{proj}_proj.bias")
        for proj in ("gate", "up", "down"):
            names.append(f"{p}mlp.{proj}_proj.weight")
            if mlp_bias:
                names.append(f"{p}mlp.{proj}_proj.bias")
        if model_type == "qwen3":
            names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
    return set(names)


def forward(cfg, w, input_ids, attention_mask):
    model_type = cfg["model_type"]
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    eps = cfg["rms_norm_eps"]
    batch, seq = input_ids.shape

    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    inv = inv_freq(cfg, head_dim)
    freqs = (inv[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]

    min_value = torch.finfo(torch.float32).min
    causal = torch.full((seq, seq), min_value).triu(1)[None, None].expand(batch, 1, seq, seq).clone()
    mask = causal.masked_fill(attention_mask[:, None, None, :] == 0, min_value)

    def linear(x, name):
        return F.linear(x, w[name + ".weight"], w.get(name + ".bias"))

    h = w["model.embed_tokens.weight"][input_ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        residual = h
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = linear(x, p + "self_attn.q_proj").view(batch, seq, heads, head_dim)
        k = linear(x, p + "self_attn.k_proj").view(batch, seq, kv_heads, head_dim)
        v = linear(x, p + "self_attn.v_proj").view(batch, seq, kv_heads, head_dim)
        if model_type == "qwen3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, heads // kv_heads)
        v = repeat_kv(v, heads // kv_heads)
        scores = torch.matmul(q, k.transpose(2, 3)) * head_dim**-0.5 + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, heads * head_dim)
        h = residual + linear(out, p + "self_attn.o_proj")
        residual = h
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        x = linear(F.silu(linear(x, p + "mlp.gate_proj")) * linear(x, p + "mlp.up_proj"), p + "mlp.down_proj")
        h = residual + x
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return F.linear(h, head)


def main(manifest_path):
    root = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        manifest = json.load(f)
    for case in manifest["cases"]:
        cfg = case["config"]
        with open(os.path.join(root, case["weights_file"]), "rb") as f:
            blob = bytearray(f.read())
        w = {}
        for entry in case["weights"]:
            count = math.prod(entry["shape"])
            flat = torch.frombuffer(blob, dtype=torch.float32, count=count, offset=entry["offset"])
            w[entry["name"]] = flat.view(entry["shape"]).clone()
        expected = expected_names(cfg)
        if set(w) != expected:
            sys.exit(f"{cfg['model_type']}: parameter names differ from HF's: "
                     f"unexpected {sorted(set(w) - expected)}, missing {sorted(expected - set(w))}")
        ids = torch.tensor(case["input_ids"], dtype=torch.long)
        mask = torch.tensor(case["attention_mask"], dtype=torch.long)
        with torch.no_grad():
            logits = forward(cfg, w, ids, mask).contiguous()
        with open(os.path.join(root, case["output"]), "wb") as f:
            f.write(logits.numpy().astype("<f4").tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
