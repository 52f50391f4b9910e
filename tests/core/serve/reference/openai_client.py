#!/usr/bin/env python3
"""The official openai client against a running `rlcore serve`: the same seeded
request answered whole and streamed (stream=True, include_usage). Prints JSON:
{"models", "whole": [{text, finish_reason}], "whole_usage", "stream": [...],
"stream_usage", "chunks"}.

Usage: openai_client.py PORT MODEL
"""
import json
import sys

from openai import OpenAI


def main(port, model):
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
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
    main(int(sys.argv[1]), sys.argv[2])
