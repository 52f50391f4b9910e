"""verl's sequence-length balancing (verl/utils/seqlen_balancing.py and the row order of
ray_trainer._balance_batch), the reference for tests/core/trainer/seqlen_balancing_test.cc.
Prints {"verl": VERSION, "cases": [...]}: seeded long-tailed token counts (ties among them) for
several batch and dp sizes, verl's partitions of their workloads (equal sizes and not), the row
order _balance_batch gives, and log_seqlen_unbalance's metrics.
"""
import json
import os
import sys
from importlib.metadata import version

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../algorithms/reference"))
import verl_stubs  # noqa: F401,E402  (before verl)
import torch  # noqa: E402
from verl.utils.seqlen_balancing import (  # noqa: E402
    calculate_workload,
    get_seqlen_balanced_partitions,
    log_seqlen_unbalance,
)


def balance_batch_order(tokens, dp_size):
    # ray_trainer._balance_batch (keep_minibatch false, no prefix grouper), its ordering lines.
    workload = calculate_workload(torch.tensor(tokens)).tolist()
    partitions = get_seqlen_balanced_partitions(workload, k_partitions=dp_size, equal_size=True)
    for i, partition in enumerate(partitions):
        partition.sort(key=lambda x: (workload[x], x))
        partitions[i] = partition[::2] + partition[1::2][::-1]
    return [j for partition in partitions for j in partition], partitions


def main():
    generator = torch.Generator().manual_seed(20261129)
    cases = []
    for rows, dp in [(8, 2), (16, 4), (24, 2), (64, 8), (30, 3), (12, 4)]:
        # Long-tailed lengths, a prompt of 5..20 tokens plus a response up to 200, some ties.
        prompt = torch.randint(5, 21, (rows,), generator=generator)
        response = (torch.rand(rows, generator=generator) ** 3 * 200).long() + 1
        tokens = (prompt + response).tolist()
        tokens[1] = tokens[0]
        workload = calculate_workload(torch.tensor(tokens)).tolist()
        order, partitions = balance_batch_order(tokens, dp)
        cases.append({
            "tokens": tokens, "dp": dp, "workload": workload,
            "partitions_equal": get_seqlen_balanced_partitions(workload, dp, True),
            "partitions_free": get_seqlen_balanced_partitions(tokens, dp, False),
            "order": order,
            "metrics": log_seqlen_unbalance(tokens, partitions, "global_seqlen"),
        })
    print(json.dumps({"verl": version("verl"), "cases": cases}))


if __name__ == "__main__":
    main()
