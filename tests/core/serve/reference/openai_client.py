#!/usr/bin/env python3
"""The official openai client against a running `rlcore serve`: the same seeded
request answered whole and streamed (stream=True, include_usage). Prints JSON:
{"models", "whole": [{text, finish_reason}], "whole_usage", "stream": [...],
"stream_usage", "chunks"}.
With --stream-error, one streamed request to a server whose generation fails:
{"error": exception class, "message", "code", "chunks": chunks seen before it}.

Usage: openai_client.py PORT MODEL [--stream-error]
"""
import json
import sys

from openai import APIError, OpenAI


def stream_error(client, model):
    chunks = 0
    try:
        for _ in client.completions.create(model=model, prompt="x", max_tokens=4, stream=True):
            chunks += 1
    except APIError as error:
        print(json.dumps({"error": type(error).__name__, "message": error.message, "code": error.body.get("code"),
                          "chunks": chunks}))
        return
    print(json.dumps({"error": None, "chunks": chunks}))


def main(port, model, mode=None):
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
    if mode == "--stream-error":
        stream_error(client, model)
        return
    request = dict(model=model, prompt=["Question: 12", "Question: 3"], max_tokens=8, n=2, temperature=1.0,
                   seed=5, logprobs=0)
    whole = client.completions.create(**request)
    texts, finish, usage, chunks = {}, {}, None, 0
    for chunk in client.completions.create(**request, stream=True, stream_options={"include_usage": True}):
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(exclude_none=True)
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            if choice.finish_reason is not None:
                finish[choice.index] = choice.finish_reason
    print(json.dumps({
        "models": [m.id for m in client.models.list()],
        "whole": [{"text": c.text, "finish_reason": c.finish_reason} for c in whole.choices],
        "whole_usage": whole.usage.model_dump(exclude_none=True),
        "stream": [{"text": texts[i], "finish_reason": finish.get(i)} for i in sorted(texts)],
        "stream_usage": usage,
        "chunks": chunks,
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], *sys.argv[3:])
