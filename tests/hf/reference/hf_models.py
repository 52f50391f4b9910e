#!/usr/bin/env python3
"""Hugging Face transformers as the authority for rlcore's models (tests/hf/).

  hf_models.py make CASE.json DIR   a tiny random model of CASE's family, written
                                    with save_pretrained to DIR, plus DIR/reference/:
                                    logits, per-token log-probs and greedy tokens
                                    on CASE's inputs (left padding included)
  hf_models.py logits DIR INPUTS.json OUT.bin
                                    loads DIR (e.g. written by rlcore) with
                                    transformers and writes its logits
  hf_models.py chat_ids DIR RECORDS.jsonl KWARGS_JSON
                                    per record, the prompt ids verl's dataset makes:
                                    apply_chat_template(prompt, add_generation_prompt=True,
                                    **KWARGS), then encode without special tokens
  hf_models.py chat_model FAMILY TOKENIZER_DIR DIR
                                    a tiny random FAMILY model sized to the real
                                    tokenizer in TOKENIZER_DIR (tokenizer.json[.gz],
                                    tokenizer_config.json, copied unchanged), as a
                                    user's first checkpoint looks
  hf_models.py tokenizer TOKENIZER_DIR DIR
                                    the real tokenizer alone, unpacked into DIR
  hf_models.py chat_render_ids DIR CONVERSATION.json
                                    the ids of a whole conversation ({"messages",
                                    "tools", "add_generation_prompt", "kwargs"}):
                                    apply_chat_template, then encode without
                                    special tokens (the agent loop's re-render)

CASE: {"family": "llama|qwen2|qwen3|qwen3_moe|mistral|mixtral|gemma2|deepseek_v3", "config": {overrides},
"seed": int, "max_shard_size": optional, "input_ids": [[...]],
"attention_mask": [[...]], "new_tokens": int}. Arrays are raw little-endian
float32 / int64, shapes in reference/outputs.json.
"""
import gzip
import json
import os
import shutil
import sys

import torch
import transformers

FAMILIES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
    "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
    "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM),
    "deepseek_v3": (transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM),
}

TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=112, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256, initializer_range=0.2,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)


def write(path, tensor):
    with open(path, "wb") as out:
        out.write(tensor.contiguous().numpy().tobytes())


def forward_outputs(model, ids, mask):
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
    logprobs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return logits, logprobs


def make(case_path, out_dir):
    case = json.load(open(case_path))
    config_class, model_class = FAMILIES[case["family"]]
    settings = dict(TINY)
    settings.update(case.get("config", {}))
    config = config_class(**settings)
    config._attn_implementation = "eager"
    torch.manual_seed(case.get("seed", 0))
    model = model_class(config).eval()
    with torch.no_grad():  # norms start at 1 (or 0 for gemma): perturb them so they matter
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                param.add_(torch.randn_like(param) * 0.1)
            elif name.endswith("mlp.gate.weight"):  # a router: decisive, so no two experts nearly tie
                # (DeepSeek's sigmoid would saturate to exact ties at 1.0 with larger logits)
                param.normal_(0.0, 0.3 if case["family"] == "deepseek_v3" else 1.0)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # DeepSeek's choice bias: make it matter
                buffer.normal_(0.0, 0.3)
    model.save_pretrained(out_dir, safe_serialization=True,
                          max_shard_size=case.get("max_shard_size", "5GB"))
    ids = torch.tensor(case["input_ids"], dtype=torch.long)
    mask = torch.tensor(case["attention_mask"], dtype=torch.long)
    logits, logprobs = forward_outputs(model, ids, mask)
    reference = os.path.join(out_dir, "reference")
    os.makedirs(reference, exist_ok=True)
    write(os.path.join(reference, "logits.bin"), logits)
    write(os.path.join(reference, "logprobs.bin"), logprobs)
    generated = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                               max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"],
                               pad_token_id=settings["pad_token_id"], eos_token_id=None)
    new = generated[:, ids.shape[1]:]
    outputs = {"logits": list(logits.shape), "logprobs": list(logprobs.shape),
               "greedy": new.tolist(), "max_abs_logit": float(logits.abs().max())}
    if case["family"] == "deepseek_v3":  # group-limited routing: the routers' own choices
        chosen = []
        hooks = [module.register_forward_hook(lambda _m, _i, out: chosen.append(out[2].sort(dim=-1).values.tolist()))
                 for module in model.modules() if isinstance(module, transformers.models.deepseek_v3.
                                                             modeling_deepseek_v3.DeepseekV3TopkRouter)]
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
        for hook in hooks:
            hook.remove()
        outputs["experts"] = chosen
    elif getattr(config, "num_experts_per_tok", None):  # a mixture of experts: each sparse layer's choices
        with torch.no_grad():
            routed_out = model(input_ids=ids, attention_mask=mask, output_router_logits=True)
            routed = routed_out.router_logits
        outputs["aux_loss"] = float(routed_out.aux_loss)
        outputs["experts"] = [torch.topk(torch.softmax(layer.float(), dim=-1), config.num_experts_per_tok,
                                         dim=-1).indices.sort(dim=-1).values.tolist() for layer in routed]
    json.dump(outputs, open(os.path.join(reference, "outputs.json"), "w"))


def logits(model_dir, inputs_path, out_path):
    inputs = json.load(open(inputs_path))
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    ids = torch.tensor(inputs["input_ids"], dtype=torch.long)
    mask = torch.tensor(inputs["attention_mask"], dtype=torch.long)
    write(out_path, forward_outputs(model, ids, mask)[0])


def unpack_tokenizer(tokenizer_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    packed = os.path.join(tokenizer_dir, "tokenizer.json.gz")
    if os.path.exists(packed):
        with gzip.open(packed) as src, open(os.path.join(out_dir, "tokenizer.json"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copy(os.path.join(tokenizer_dir, "tokenizer.json"), out_dir)
    shutil.copy(os.path.join(tokenizer_dir, "tokenizer_config.json"), out_dir)
    return transformers.AutoTokenizer.from_pretrained(out_dir)


def chat_model(family, tokenizer_dir, out_dir):
    tokenizer = unpack_tokenizer(tokenizer_dir, out_dir)
    config_class, model_class = FAMILIES[family]
    settings = dict(TINY)
    settings.update(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                    initializer_range=0.02, tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model_class(config_class(**settings)).save_pretrained(out_dir, safe_serialization=True)


def chat_ids(model_dir, records_path, kwargs_json):
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    kwargs = json.loads(kwargs_json)
    out = []
    for line in open(records_path, encoding="utf-8"):
        prompt = json.loads(line)["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
        out.append(tokenizer.encode(text, add_special_tokens=False))
    print(json.dumps(out))


def chat_render_ids(model_dir, conversation_path):
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    conversation = json.load(open(conversation_path, encoding="utf-8"))
    text = tokenizer.apply_chat_template(conversation["messages"], tools=conversation.get("tools"),
                                         add_generation_prompt=conversation.get("add_generation_prompt", False),
                                         tokenize=False, **conversation.get("kwargs", {}))
    print(json.dumps(tokenizer.encode(text, add_special_tokens=False)))


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "make":
        make(sys.argv[2], sys.argv[3])
    elif command == "logits":
        logits(sys.argv[2], sys.argv[3], sys.argv[4])
    elif command == "chat_ids":
        chat_ids(sys.argv[2], sys.argv[3], sys.argv[4])
    elif command == "chat_model":
        chat_model(sys.argv[2], sys.argv[3], sys.argv[4])
    elif command == "tokenizer":
        unpack_tokenizer(sys.argv[2], sys.argv[3])
    elif command == "chat_render_ids":
        chat_render_ids(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {command!r}")
