"""Reference side of tests/e2e/reward_model_e2e_test.cc, with transformers.

  make BASE OUT [--no-chat-template]
      OUT: a Qwen2ForSequenceClassification reward model (one label): BASE's
      trunk and tokenizer, a seeded random `score` head. Without a chat
      template when asked (rlcore then reads prompt text + response).
  score RM DUMP
      Prints "scores: " and, as a JSON list, transformers' score of each line of DUMP (a
      trainer.rollout_data_dir file of a plain-prompt run) as verl's reward
      loop builds it: RM's chat template over [user: input, assistant: output],
      no generation prompt, the leading bos text removed, then tokenized with
      special tokens; the score head at the last token.
"""
import json
import os
import shutil
import sys

import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification
from safetensors.torch import load_file


def make(base, out, chat_template):
    config = Qwen2Config.from_pretrained(base)
    config.num_labels = 1
    config.architectures = ["Qwen2ForSequenceClassification"]
    config.pad_token_id = config.eos_token_id
    torch.manual_seed(7)
    model = Qwen2ForSequenceClassification(config)
    trunk = {k[len("model."):]: v for k, v in load_file(os.path.join(base, "model.safetensors")).items()
             if k.startswith("model.")}
    model.model.load_state_dict(trunk)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 0.1)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(os.path.join(base, "tokenizer.json"), out)
    with open(os.path.join(base, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    if not chat_template:
        tokenizer_config.pop("chat_template", None)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2)


def score(rm_dir, dump):
    tokenizer = AutoTokenizer.from_pretrained(rm_dir)
    model = Qwen2ForSequenceClassification.from_pretrained(rm_dir, torch_dtype=torch.float32).eval()
    scores = []
    for line in open(dump):
        row = json.loads(line)
        chat = [{"role": "user", "content": row["input"]}, {"role": "assistant", "content": row["output"]}]
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=False, tokenize=False)
        if tokenizer.bos_token is not None and text.startswith(tokenizer.bos_token):
            text = text[len(tokenizer.bos_token):]
        ids = torch.tensor([tokenizer(text).input_ids])
        with torch.no_grad():
            hidden = model.model(input_ids=ids).last_hidden_state
            scores.append(model.score(hidden[:, -1]).item())
    print("scores: " + json.dumps(scores))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], "--no-chat-template" not in sys.argv[4:])
    elif sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")
