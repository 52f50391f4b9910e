"""A PEFT adapter made by PEFT itself, for rlcore's lora_adapter_path: wraps the
base model with LoraConfig(r, lora_alpha, target_modules, exclude_modules,
init_lora_weights=False, so B is not zero), saves it to ADAPTER_DIR
(save_pretrained) and writes to OUT the logits of the input_ids in INPUTS
("logits") and, for each adapted module, a 1 ("module.<name>").

TARGETS and EXCLUDES are JSON: a string (PEFT: a regular expression, or
all-linear) or a list of names; EXCLUDES may be null.

usage: peft_make_adapter.py BASE_DIR ADAPTER_DIR INPUTS.safetensors OUT.safetensors R ALPHA TARGETS EXCLUDES [RSLORA]
(RSLORA: 1 for use_rslora=True)
"""
import json
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main(base_dir, adapter_dir, inputs_path, out_path, rank, alpha, targets, excludes, rslora="0"):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(r=int(rank), lora_alpha=float(alpha), target_modules=json.loads(targets),
                        exclude_modules=json.loads(excludes), use_rslora=rslora == "1", init_lora_weights=False,
                        task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    model.eval()
    model.save_pretrained(adapter_dir)
    input_ids = load_file(inputs_path)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits.float()
    out = {"logits": logits.contiguous()}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and "default" in module.lora_A:
            out["module." + name.removeprefix("base_model.model.")] = torch.ones(1)
    save_file(out, out_path)


if __name__ == "__main__":
    if len(sys.argv) not in (9, 10):
        sys.exit(__doc__)
    main(*sys.argv[1:])
