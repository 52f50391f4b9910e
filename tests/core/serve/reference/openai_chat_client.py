#!/usr/bin/env python3
"""The official openai client's chat API against a running `rlcore serve`: the
same seeded chat request answered whole and streamed, and the prompt ids
/tokenize gives for the messages next to what transformers' apply_chat_template
gives for the served checkpoint. Prints JSON: {"whole": [{content, finish_reason}],
"stream": [...], "whole_usage", "stream_usage", "roles", "tokenize_ids",
"transformers_ids", "template_error": {status, message}}.

Usage: openai_chat_client.py PORT MODEL CHECKPOINT_DIR
"""
import json
import sys
import urllib.error
import urllib.request

import transformers
from openai import OpenAI

MESSAGES = [{"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "Question: 12 + 3 = ?"}]


def post(port, path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def main(port, model, checkpoint):
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
    request = dict(model=model, messages=MESSAGES, max_tokens=8, n=2, temperature=1.0, seed=11)
    whole = client.chat.completions.create(**request)
    contents, finish, roles, usage = {}, {}, {}, None
    for chunk in client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(exclude_none=True)
        for choice in chunk.choices:
            if choice.delta.role:
                roles[choice.index] = choice.delta.role
            contents[choice.index] = contents.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason is not None:
                finish[choice.index] = choice.finish_reason
    _, tokenized = post(port, "/tokenize", {"model": model, "messages": MESSAGES, "add_generation_prompt": True})
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    text = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    print(json.dumps({
        "whole": [{"content": c.message.content, "finish_reason": c.finish_reason} for c in whole.choices],
        "whole_roles": [c.message.role for c in whole.choices],
        "whole_usage": whole.usage.model_dump(exclude_none=True),
        "stream": [{"content": contents[i], "finish_reason": finish.get(i)} for i in sorted(contents)],
        "stream_usage": usage,
        "roles": [roles.get(i) for i in sorted(contents)],
        "tokenize_ids": tokenized["tokens"],
        "transformers_ids": tokenizer.encode(text, add_special_tokens=False),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
