"""verl's own math graders, the reference for tests/plugins/reward/math_dapo_parity_test.cc and
prime_math_parity_test.cc. Usage: verl_math_graders.py {math_dapo|prime} CORPUS.json, where the
corpus is a JSON list of {"response", "ground_truth"[, "strict_box_verify"]}. Prints
{"verl": VERSION, "results": [...]}, one result per case, in order:
  math_dapo: verl's compute_score dict {"score", "acc", "pred"} (pred may be null);
  prime:     {"score": float(res[0]) as default_compute_score returns it, "pred": the extracted answer}.
"""
import json
import os
import sys
from importlib.metadata import version

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "core", "algorithms",
                                "reference"))
import verl_stubs  # noqa: E402,F401  (before verl)


def math_dapo_results(cases):
    from verl.utils.reward_score import math_dapo

    out = []
    for case in cases:
        res = math_dapo.compute_score(case["response"], case["ground_truth"],
                                      strict_box_verify=case.get("strict_box_verify", False))
        out.append({"score": res["score"], "acc": bool(res["acc"]), "pred": res["pred"]})
    return out


def prime_results(cases):
    from verl.utils.reward_score import prime_math

    out = []
    for case in cases:
        correct, _, pred = prime_math.compute_score(case["response"], case["ground_truth"])
        out.append({"score": float(correct), "pred": pred})
    return out


def main():
    grader, corpus = sys.argv[1], sys.argv[2]
    with open(corpus, encoding="utf-8") as f:
        cases = json.load(f)
    results = {"math_dapo": math_dapo_results, "prime": prime_results}[grader](cases)
    json.dump({"verl": version("verl"), "results": results}, sys.stdout, ensure_ascii=True)


if __name__ == "__main__":
    main()
