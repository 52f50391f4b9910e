#!/usr/bin/env python3
"""transformers' rendering of a checkpoint's chat template on a corpus of
conversations: the authority tests/core/chat/chat_template_test.cc compares with.

Usage: chat_template_reference.py TOKENIZER_CONFIG.json CONVERSATIONS.json
Prints {"<case name>": "<rendered text>" or {"error": "<message>"}, ...}.
"""
import json
import sys

from transformers.utils.chat_template_utils import render_jinja_template

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def special_tokens(config):
    tokens = {}
    for name in SPECIAL_TOKENS:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            tokens[name] = str(value)
    return tokens


def main(config_path, corpus_path):
    config = json.load(open(config_path, encoding="utf-8"))
    corpus = json.load(open(corpus_path, encoding="utf-8"))
    out = {}
    for case in corpus["cases"]:
        kwargs = {**special_tokens(config), **case.get("extra", {})}
        try:
            rendered, _ = render_jinja_template(conversations=[case["messages"]], tools=case.get("tools"),
                                                chat_template=config["chat_template"],
                                                add_generation_prompt=case["add_generation_prompt"], **kwargs)
            out[case["name"]] = rendered[0]
        except Exception as error:  # the template's raise_exception: compared as an error
            out[case["name"]] = {"error": str(error)}
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
