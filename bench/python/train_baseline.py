#!/usr/bin/python3
# Eager-PyTorch baseline for bench_train_fsdp: one training step of the rlcore
# Llama/Qwen decoder (HF's op order) with fp32 master weights, the same
# policy-gradient loss, global-norm clipping and torch.optim.AdamW, in fp32 or
# under torch.autocast(bfloat16), optionally with per-layer activation
# checkpointing (what the fsdp engine does); timed, prints JSON.
#
# Run with Debian's python3-torch (/usr/bin/python3). The batch is built from
# the same formula as bench/train_fsdp_bench.cc's (train_token), so both sides
# train on identical tokens.
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

# Checkpoint reading and the HF building blocks are the generation baseline's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generate_baseline import print_json_result, read_checkpoint, rms_norm, rotate_half  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def train_token(row, position, vocab_size):
    # Must match train_token() in bench/train_fsdp_bench.cc.
    return 1 + (row * 7919 + position * 131 + 17) % (vocab_size - 1)


def advantage(row, position):
    # Must match advantage() in bench/train_fsdp_bench.cc.
    return ((row * 31 + position * 17) % 13) / 6.0 - 1.0


class TrainModel:
    """fp32 leaf parameters (the masters) and HF Llama's forward as functions."""

    def __init__(self, model_dir, checkpointing):
        self.checkpointing = checkpointing
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.heads
        self.eps = c["rms_norm_eps"]
        self.vocab_size = c["vocab_size"]
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (c.get("rope_theta", 10000.0) ** exponent)
        raw = read_checkpoint(model_dir)
        self.params = {name: t.to(torch.float32).clone().requires_grad_(True)
                       for name, t in raw.items() if not name.endswith("rotary_emb.inv_freq")}
        del raw
        self.tied = c.get("tie_word_embeddings", False)
        self.num_layers = c["num_hidden_layers"]

    def p(self, name):
        return self.params.get(name)

    def attention(self, x, prefix, cos, sin):
        b, t, _ = x.shape
        q = F.linear(x, self.p(prefix + "q_proj.weight"), self.p(prefix + "q_proj.bias"))
        k = F.linear(x, self.p(prefix + "k_proj.weight"), self.p(prefix + "k_proj.bias"))
        v = F.linear(x, self.p(prefix + "v_proj.weight"), self.p(prefix + "v_proj.bias"))
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        if groups > 1:  # HF repeat_kv
            k = k[:, :, None].expand(b, self.kv_heads, groups, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, groups, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return F.linear(out, self.p(prefix + "o_proj.weight"), self.p(prefix + "o_proj.bias"))

    def layer(self, h, i, cos, sin):
        pre = f"model.layers.{i}."
        h = h + self.attention(rms_norm(h, self.p(pre + "input_layernorm.weight"), self.eps),
                               pre + "self_attn.", cos, sin)
        x = rms_norm(h, self.p(pre + "post_attention_layernorm.weight"), self.eps)
        return h + F.linear(F.silu(F.linear(x, self.p(pre + "mlp.gate_proj.weight")))
                            * F.linear(x, self.p(pre + "mlp.up_proj.weight")), self.p(pre + "mlp.down_proj.weight"))

    def log_probs(self, ids, prompt_len, responses):
        """Log-probs of `responses` (positions P + t - 1 only reach the head, as in the engine)."""
        b, t = ids.shape
        positions = torch.arange(t).unsqueeze(0).expand(b, t)
        freqs = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        # Under autocast this is HF's mixed precision: fp32 residual stream and norms, bf16 matmuls.
        h = F.embedding(ids, self.p("model.embed_tokens.weight"))
        cos, sin = angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)
        for i in range(self.num_layers):
            if self.checkpointing:  # HF gradient_checkpointing_enable(use_reentrant=False), as verl sets it
                h = torch.utils.checkpoint.checkpoint(self.layer, h, i, cos, sin, use_reentrant=False)
            else:
                h = self.layer(h, i, cos, sin)
        h = rms_norm(h[:, prompt_len - 1:prompt_len - 1 + responses.shape[1]], self.p("model.norm.weight"), self.eps)
        head = self.p("model.embed_tokens.weight") if self.tied else self.p("lm_head.weight")
        logits = F.linear(h, head).float()
        return F.log_softmax(logits, dim=-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)


def run(args):
    torch.set_num_threads(args.threads)
    model = TrainModel(args.model, args.checkpointing)
    length = args.prompt + args.response
    ids = torch.tensor([[train_token(r, t, model.vocab_size) for t in range(length)] for r in range(args.batch)])
    adv = torch.tensor([[advantage(r, t) for t in range(args.response)] for r in range(args.batch)])
    responses = ids[:, args.prompt:]
    params = list(model.params.values())
    adamw = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.01)
    autocast = args.dtype == "bfloat16"

    def step():
        adamw.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logp = model.log_probs(ids, args.prompt, responses)
        loss = -(logp * adv).sum() / adv.numel()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        adamw.step()
        return loss.item()

    step()  # warm-up: allocator, thread pool, autocast cache
    best, loss = math.inf, None
    for _ in range(args.steps):
        start = time.perf_counter()
        loss = step()
        best = min(best, time.perf_counter() - start)
    return {"implementation": "eager-pytorch", "torch_version": torch.__version__, "dtype": args.dtype,
            "checkpointing": args.checkpointing,
            "threads": torch.get_num_threads(), "seconds": best, "last_loss": loss,
            "parameters": sum(p.numel() for p in params),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            # fp32 parameters, gradients and both AdamW moments, as the C++ rows count them.
            "state_mb": 16 * sum(p.numel() for p in params) / 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="HF checkpoint directory (config.json + safetensors)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--response", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpointing", action="store_true",
                        help="recompute each decoder layer in the backward pass (activation checkpointing)")
    args = parser.parse_args()
    if min(args.batch, args.prompt, args.response, args.steps, args.threads) < 1:
        parser.error("--batch, --prompt, --response, --steps and --threads must be positive")
    return print_json_result("train_baseline.py", run, args)


if __name__ == "__main__":
    sys.exit(main())
