"""Load for `rlcore serve` from the official openai client (bench/run_serve_load_bench.sh).

N clients, spread over P processes (each an asyncio loop with one AsyncOpenAI,
max_retries=0), each send one greedy completion of --max-tokens tokens
(ignore_eos) at the same moment, whole or streamed. Prints one JSON line: the
time until the last answer, TTFT and inter-token latency percentiles (streamed),
the errors, and the tokens received.

With --idle K the coordinator first opens K keep-alive connections (one
GET /health each, then silence) and holds them through the round.
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import resource
import socket
import statistics
import time


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def one_request(client, k, args):
    from openai import APIError  # imported here: only the worker processes need it

    record = {"error": None, "tokens": 0, "ttft": None, "itl": []}
    start = time.perf_counter()
    kwargs = dict(model=args.model, prompt=f"Question {k}: what is {k} plus {k}?", max_tokens=args.max_tokens,
                  temperature=0, extra_body={"ignore_eos": True})
    try:
        if args.stream:
            last = None
            stream = await client.completions.create(stream=True, **kwargs)
            async for chunk in stream:
                if not chunk.choices:
                    continue
                now = time.perf_counter()
                if last is None:
                    record["ttft"] = now - start
                else:
                    record["itl"].append(now - last)
                last = now
                record["tokens"] += 1
        else:
            answer = await client.completions.create(**kwargs)
            record["tokens"] = answer.usage.completion_tokens
    except (APIError, OSError) as error:  # APIConnectionError is an APIError
        record["error"] = f"{type(error).__name__}: {error}"
    record["end"] = time.perf_counter()
    return record


def worker(first, count, args, barrier, results):
    import httpx2 as httpx  # the openai client's transport in this venv

    from openai import AsyncOpenAI

    async def run():
        limits = httpx.Limits(max_connections=count + 8, max_keepalive_connections=count + 8)
        async with AsyncOpenAI(base_url=args.server + "/v1", api_key="none", max_retries=0, timeout=3600,
                               http_client=httpx.AsyncClient(limits=limits, timeout=3600)) as client:
            barrier.wait()  # every process's clients start together
            t0 = time.perf_counter()
            records = await asyncio.gather(*(one_request(client, first + i, args) for i in range(count)))
            for record in records:
                record["end"] -= t0
            return records

    results.put(asyncio.run(run()))


def hold_idle(server, count):
    host, port = server.removeprefix("http://").rsplit(":", 1)
    held = []
    for _ in range(count):
        conn = socket.create_connection((host, int(port)))
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: bench\r\n\r\n")
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += conn.recv(4096)
        held.append(conn)
    return held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--idle", type=int, default=0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    held = hold_idle(args.server, args.idle)
    processes = max(1, min(args.processes, args.clients))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    shares = [args.clients // processes + (1 if p < args.clients % processes else 0) for p in range(processes)]
    workers, first = [], 0
    for share in shares:
        workers.append(ctx.Process(target=worker, args=(first, share, args, barrier, results)))
        first += share
    for process in workers:
        process.start()
    barrier.wait()
    records = []
    for _ in workers:
        records.extend(results.get())
    for process in workers:
        process.join()
    for conn in held:
        conn.close()

    ttfts = [r["ttft"] for r in records if r["ttft"] is not None]
    itls = [gap for r in records for gap in r["itl"]]
    errors = [r["error"] for r in records if r["error"]]
    print(json.dumps({
        "clients": args.clients,
        "stream": args.stream,
        "idle": args.idle,
        "all_done_s": max(r["end"] for r in records),
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "itl_p50_s": percentile(itls, 50),
        "itl_p99_s": percentile(itls, 99),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "tokens": sum(r["tokens"] for r in records),
        "mean_tokens": statistics.mean(r["tokens"] for r in records),
    }))


if __name__ == "__main__":
    main()
