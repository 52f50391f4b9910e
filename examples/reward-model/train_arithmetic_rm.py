"""Trains a reward model for the quickstart's arithmetic task, for
docs/reward-model.md's end-to-end run (rlcore does not train reward models).

  .venv/bin/python examples/reward-model/train_arithmetic_rm.py \
      --base runs/quickstart/sft/hf --data runs/quickstart/data --out runs/quickstart/rm

A Qwen2ForSequenceClassification (one label) starts from the SFT checkpoint's
trunk and learns, with a binary cross-entropy loss, whether "a+b=#### c" is
right: half the examples carry the true sum, half a sum off by 1 to 10 or with
two digits swapped. Its logit is the reward. The checkpoint is saved without a
chat template, so rlcore's reward model reads the policy's prompt text followed
by the response, the text the policy itself sees with prompt_template: plain.
"""
import argparse
import json
import os
import random
import shutil

import torch
from safetensors.torch import load_file
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification


def load_problems(path):
    problems = []
    for line in open(path):
        row = json.loads(line)
        problems.append((row["prompt"][0]["content"], int(row["reward_model"]["ground_truth"])))
    return problems


def wrong_answer(truth, rng):
    digits = str(truth)
    if len(digits) > 1 and rng.random() < 0.3:
        i = rng.randrange(len(digits) - 1)
        swapped = digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:]
        if swapped != digits and not swapped.startswith("0"):
            return int(swapped)
    return max(0, truth + rng.choice([d for d in range(-10, 11) if d != 0]))


def make_batch(problems, size, rng, tokenizer, pad_id):
    texts, labels = [], []
    for _ in range(size):
        prompt, truth = rng.choice(problems)
        right = rng.random() < 0.5
        texts.append(f"{prompt}#### {truth if right else wrong_answer(truth, rng)}")
        labels.append(1.0 if right else 0.0)
    ids = [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    width = max(len(row) for row in ids)
    input_ids = torch.full((size, width), pad_id)
    mask = torch.zeros((size, width), dtype=torch.long)
    for i, row in enumerate(ids):  # left padding: the last token is the last column
        input_ids[i, width - len(row):] = torch.tensor(row)
        mask[i, width - len(row):] = 1
    return input_ids, mask, torch.tensor(labels)


def scores(model, input_ids, mask):
    position_ids = (mask.cumsum(1) - 1).clamp(min=0)
    hidden = model.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids).last_hidden_state
    return model.score(hidden[:, -1]).squeeze(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    config = Qwen2Config.from_pretrained(args.base)
    config.num_labels = 1
    config.architectures = ["Qwen2ForSequenceClassification"]
    config.pad_token_id = config.eos_token_id
    model = Qwen2ForSequenceClassification(config)
    trunk = {k[len("model."):]: v for k, v in load_file(os.path.join(args.base, "model.safetensors")).items()
             if k.startswith("model.")}
    model.model.load_state_dict(trunk)
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.base, "tokenizer.json"))

    train = load_problems(os.path.join(args.data, "train.jsonl"))
    val = load_problems(os.path.join(args.data, "val.jsonl"))
    val_rng = random.Random(0)
    val_batch = make_batch(val, 600, val_rng, tokenizer, config.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for step in range(1, args.steps + 1):
        model.train()
        input_ids, mask, labels = make_batch(train, args.batch, rng, tokenizer, config.pad_token_id)
        loss = loss_fn(scores(model, input_ids, mask), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == args.steps:
            model.eval()
            with torch.no_grad():
                predicted = scores(model, val_batch[0], val_batch[1]) > 0
            accuracy = (predicted.float() == val_batch[2]).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} held-out accuracy {accuracy:.3f}", flush=True)

    model.save_pretrained(args.out, safe_serialization=True)
    shutil.copy(os.path.join(args.base, "tokenizer.json"), args.out)
    with open(os.path.join(args.base, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    tokenizer_config.pop("chat_template", None)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
