"""PEFT's view of an rlcore LoRA adapter: loads the base model with transformers,
applies ADAPTER_DIR with PeftModel.from_pretrained, and writes to OUT the logits
of the input_ids in INPUTS ("logits") and the weights of merge_and_unload()
("merged.<HF name>").

usage: peft_adapter.py BASE_DIR ADAPTER_DIR INPUTS.safetensors OUT.safetensors
"""
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main(base_dir, adapter_dir, inputs_path, out_path):
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapter_dir)
    model.eval()
    input_ids = load_file(inputs_path)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits.float()
        merged = model.merge_and_unload()
    out = {"logits": logits.contiguous()}
    for name, tensor in merged.state_dict().items():
        out["merged." + name] = tensor.detach().float().contiguous().clone()
    save_file(out, out_path)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
