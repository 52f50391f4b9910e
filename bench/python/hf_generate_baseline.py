#!/usr/bin/env python3
# Hugging Face `transformers` baseline for bench_generation (a GPU, or the CPU for MoE): eager
# attention, greedy `generate` with a KV cache, the same prompts and timing
# definitions as bench/generation_bench.cc; prints the same JSON as
# generate_baseline.py. Needs torch with CUDA and transformers (the GPU image's
# python3 has both; bench/run_gpu_bench.sh runs it).
import sys
import time

import torch
from transformers import AutoModelForCausalLM

# The prompts, the timing definitions and the JSON of the CPU baseline beside this file.
from generate_baseline import COMPUTE_DTYPES, parse_arguments, print_json_result, prompt_token, timing_result


def timed(fn, device):
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda _: None)
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def run(args):
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=COMPUTE_DTYPES[args.dtype],
                                                 attn_implementation="eager").to(device).eval()
    load_s = time.perf_counter() - start
    vocab = model.config.vocab_size
    results = []
    for batch in args.batches:
        ids = torch.tensor([[prompt_token(r, t, vocab) for t in range(args.prompt_len)] for r in range(batch)],
                           device=device)
        mask = torch.ones_like(ids)

        def generate(tokens):
            # min_new_tokens: every row runs the full length, as rlcore's does without stop tokens.
            return model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=tokens,
                                  min_new_tokens=tokens, pad_token_id=0)

        with torch.inference_mode():
            generate(min(4, args.max_tokens))  # warm-up
            prefill_s = min(timed(lambda: generate(1), device)[0] for _ in range(args.repeats))
            total_s, tokens = float("inf"), None
            for _ in range(args.repeats):
                elapsed, out = timed(lambda: generate(args.max_tokens), device)
                if elapsed < total_s:
                    total_s, tokens = elapsed, out[:, args.prompt_len:]
        results.append(timing_result(batch, prefill_s, total_s, args.max_tokens, tokens))
    return {
        "implementation": "transformers-eager",
        "torch_version": torch.__version__,
        "model": args.model,
        "dtype": args.dtype,
        "device": str(device),
        "prompt_len": args.prompt_len,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "load_s": load_s,
        "results": results,
    }


def main():
    args = parse_arguments(__doc__, "bfloat16", lambda p: p.add_argument("--device", default="cpu"))
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("hf_generate_baseline.py: no GPU is visible to torch", file=sys.stderr)
        return 1
    return print_json_result("hf_generate_baseline.py", run, args)


if __name__ == "__main__":
    sys.exit(main())
