#!/usr/bin/python3
# Eager-PyTorch baseline for bench_generation: the rlcore Llama/Qwen decoder and
# an HF-generate-style greedy loop with a static KV cache, timed; prints JSON.
#
# Run with Debian's python3-torch (/usr/bin/python3). No packages beyond torch:
# the checkpoint's safetensors are parsed by hand. Prompts and the timing
# definitions are the same as bench/generation_bench.cc's, so the numbers compare.
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
COMPUTE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def prompt_token(row, position, vocab_size):
    # Must match prompt_token() in bench/generation_bench.cc.
    return (row * 7919 + position * 131 + 17) % vocab_size


def read_safetensors(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {info['dtype']}")
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        flat = torch.frombuffer(data, dtype=dtype, count=count, offset=base + begin) if count else torch.empty(0, dtype=dtype)
        if flat.numel() * flat.element_size() != end - begin:
            raise ValueError(f"{path}: tensor '{name}' has {end - begin} bytes for shape {info['shape']}")
        tensors[name] = flat.view(info["shape"])
    return tensors


def read_checkpoint(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(read_safetensors(os.path.join(model_dir, name)))
    return tensors


def rms_norm(x, weight, eps):
    # HF LlamaRMSNorm: fp32 statistics, cast back before the weight multiply.
    xf = x.to(torch.float32)
    variance = xf.pow(2).mean(-1, keepdim=True)
    return weight * (xf * torch.rsqrt(variance + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Decoder:
    """The decoder of libs/model/include/rlcore/model/transformer.h with HF's op order."""

    def __init__(self, model_dir, dtype):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.model_type = c["model_type"]
        self.vocab_size = c["vocab_size"]
        self.hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        self.num_layers = c["num_hidden_layers"]
        self.eps = c["rms_norm_eps"]
        self.scaling = self.head_dim ** -0.5
        self.dtype = dtype
        scaling = c.get("rope_scaling") or {}
        rope_type = scaling.get("rope_type", scaling.get("type", "default"))
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (c.get("rope_theta", 10000.0) ** exponent)
        if rope_type == "linear":
            self.inv_freq = self.inv_freq / scaling["factor"]
        elif rope_type != "default":
            raise ValueError(f"{model_dir}/config.json: rope_scaling type '{rope_type}' is not in this baseline")

        raw = read_checkpoint(model_dir)
        w = {name: t.to(dtype).contiguous() for name, t in raw.items()}
        del raw
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = self.embed if c.get("tie_word_embeddings", False) else w["lm_head.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(self.num_layers):
            p = f"model.layers.{i}."
            self.layers.append({k: w.get(p + k) for k in (
                "input_layernorm.weight", "post_attention_layernorm.weight",
                "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                "self_attn.k_proj.weight", "self_attn.k_proj.bias",
                "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                "self_attn.o_proj.weight", "self_attn.o_proj.bias",
                "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")})

    def make_cache(self, batch, max_len):
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        return [(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype))
                for _ in range(self.num_layers)]

    def cos_sin(self, positions):
        freqs = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(self.dtype).unsqueeze(1), angles.sin().to(self.dtype).unsqueeze(1)

    def attention(self, x, layer, cache, start, cos, sin):
        b, t, _ = x.shape
        q = F.linear(x, layer["self_attn.q_proj.weight"], layer["self_attn.q_proj.bias"])
        k = F.linear(x, layer["self_attn.k_proj.weight"], layer["self_attn.k_proj.bias"])
        v = F.linear(x, layer["self_attn.v_proj.weight"], layer["self_attn.v_proj.bias"])
        q = q.view(b, t, self.heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if layer["self_attn.q_norm.weight"] is not None:
            q = rms_norm(q, layer["self_attn.q_norm.weight"], self.eps)
            k = rms_norm(k, layer["self_attn.k_norm.weight"], self.eps)
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k_cache, v_cache = cache
        end = start + t
        k_cache[:, :, start:end] = k
        v_cache[:, :, start:end] = v
        k = k_cache[:, :, :end]
        v = v_cache[:, :, :end]
        # HF eager attention: repeat_kv, fp32 softmax.
        groups = self.heads // self.kv_heads
        if groups > 1:
            k = k[:, :, None].expand(b, self.kv_heads, groups, end, self.head_dim).reshape(b, self.heads, end, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, groups, end, self.head_dim).reshape(b, self.heads, end, self.head_dim)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        if t > 1:  # prefill: causal mask (a decode step sees every cached slot)
            future = torch.ones(t, end, dtype=torch.bool).triu(start + 1)
            scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return F.linear(out, layer["self_attn.o_proj.weight"], layer["self_attn.o_proj.bias"])

    def forward(self, ids, cache, start):
        """ids [B, T] written to cache slots [start, start + T); last position's logits."""
        b, t = ids.shape
        positions = torch.arange(start, start + t).unsqueeze(0).expand(b, t)
        cos, sin = self.cos_sin(positions)
        h = F.embedding(ids, self.embed)
        for layer, layer_cache in zip(self.layers, cache):
            h = h + self.attention(rms_norm(h, layer["input_layernorm.weight"], self.eps), layer, layer_cache, start, cos, sin)
            x = rms_norm(h, layer["post_attention_layernorm.weight"], self.eps)
            h = h + F.linear(F.silu(F.linear(x, layer["mlp.gate_proj.weight"])) * F.linear(x, layer["mlp.up_proj.weight"]),
                             layer["mlp.down_proj.weight"])
        h = rms_norm(h[:, -1:], self.norm, self.eps)  # HF generate keeps only the last logits
        return F.linear(h, self.lm_head)[:, 0]


def greedy(logits):
    # The engine returns each token's log-prob (RL needs it), so the baseline computes it too.
    logits = logits.float()
    tokens = logits.argmax(-1)
    logprobs = F.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, logprobs


def generate(model, prompts, max_tokens):
    """Prefill, then one token per step to exactly max_tokens (no stop tokens).
    Returns (tokens [B, max_tokens], seconds)."""
    start_time = time.perf_counter()
    b, prompt_len = prompts.shape
    cache = model.make_cache(b, prompt_len + max_tokens - 1)
    token, _ = greedy(model.forward(prompts, cache, 0))
    generated = [token]
    position = prompt_len
    for _ in range(max_tokens - 1):
        token, _ = greedy(model.forward(token.unsqueeze(1), cache, position))
        generated.append(token)
        position += 1
    tokens = torch.stack(generated, dim=1)
    return tokens, time.perf_counter() - start_time


def run(args):
    torch.set_num_threads(args.threads)
    dtype = COMPUTE_DTYPES[args.dtype]
    load_start = time.perf_counter()
    model = Decoder(args.model, dtype)
    load_s = time.perf_counter() - load_start
    results = []
    with torch.inference_mode():
        for batch in args.batches:
            prompts = torch.tensor([[prompt_token(r, t, model.vocab_size) for t in range(args.prompt_len)]
                                    for r in range(batch)], dtype=torch.int64)
            generate(model, prompts, min(4, args.max_tokens))  # warm-up: allocator, thread pool
            # Best of the repeats, and ms/step = (T(max_tokens) - T(1)) / (max_tokens - 1) with
            # T(1) a separate prefill-only run: the C++ side can only time whole generate() calls.
            prefill_s, total_s, tokens = float("inf"), float("inf"), None
            for _ in range(args.repeats):
                prefill_s = min(prefill_s, generate(model, prompts, 1)[1])
                run_tokens, run_s = generate(model, prompts, args.max_tokens)
                if run_s < total_s:
                    tokens, total_s = run_tokens, run_s
            results.append(timing_result(batch, prefill_s, total_s, args.max_tokens, tokens))
    return {
        "implementation": "eager-pytorch",
        "torch_version": torch.__version__,
        "model": args.model,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "prompt_len": args.prompt_len,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "load_s": load_s,
        "results": results,
    }


def timing_result(batch, prefill_s, total_s, max_tokens, tokens):
    """One batch's timings as bench_generation reads them: ms/step = (T(max_tokens) - T(1)) / (max_tokens - 1)."""
    steps = max_tokens - 1
    return {
        "batch": batch,
        "prefill_s": prefill_s,
        "total_s": total_s,
        "ms_per_step": 1000.0 * max(0.0, total_s - prefill_s) / steps if steps else 0.0,
        "tokens_per_s": batch * max_tokens / total_s,
        "row0_tokens": tokens[0].tolist(),
    }


def print_json_result(script, run, args):
    """Prints run(args) as JSON (exit status 0), or the error naming the model (1)."""
    try:
        out = run(args)
    except (OSError, ValueError, KeyError) as e:
        print(f"{script}: {args.model}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


def parse_arguments(description, default_dtype, extra=None):
    """The arguments bench_generation passes to a baseline; `extra(parser)` adds a script's own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", required=True, help="HF checkpoint directory (config.json + safetensors)")
    parser.add_argument("--dtype", choices=sorted(COMPUTE_DTYPES), default=default_dtype)
    parser.add_argument("--batches", default="1", help="comma-separated batch sizes")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    if extra:
        extra(parser)
    args = parser.parse_args()
    args.batches = [int(b) for b in args.batches.split(",") if b]
    if args.prompt_len < 1 or args.max_tokens < 1 or args.repeats < 1 or args.threads < 1 or not args.batches:
        parser.error("--prompt-len, --max-tokens, --repeats, --threads and --batches must be positive")
    return args


def main():
    args = parse_arguments(__doc__, "float32")
    return print_json_result("generate_baseline.py", run, args)

if __name__ == "__main__":
    sys.exit(main())
