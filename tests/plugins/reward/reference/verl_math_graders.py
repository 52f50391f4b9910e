"""verl's own answer graders, the reference for tests/plugins/reward/math_dapo_grader_test.cc,
prime_math_grader_test.cc and search_r1_grader_test.cc. Usage: verl_math_graders.py
{math_dapo|prime|search_r1} CORPUS.json, where the corpus is a JSON list of {"response",
"ground_truth"[, "strict_box_verify"]}. Prints, as its last line, {"verl": VERSION, "results":
[...]}, one result per case, in order:
  math_dapo: verl's compute_score dict {"score", "acc", "pred"} (pred may be null);
  prime:     {"score": float(res[0]) as default_compute_score returns it, "pred": the extracted answer};
  search_r1: {"score": search_r1_like_qa_em.compute_score, "normalized": normalize_answer(response)}
             (the ground truth as the dataset holds it: {"target": [...]}).
verl's prime_math runs here with sympy 1.14 and pylatexenc 2.10 and without antlr4 (sympy's parse_latex
then fails, and verl's symbolic_equal falls back to parse_expr), as scripts/python-requirements.txt pins them.
"""
import contextlib
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
    # prime_math turns LaTeX into text with pylatexenc before sympy: the real one, not a stub.
    verl_stubs.STUBBED.discard("pylatexenc")
    try:
        import pylatexenc  # noqa: F401
    except ImportError:
        sys.exit("pylatexenc is missing: run `bash scripts/setup_python.sh` (scripts/python-requirements.txt pins it)")
    from verl.utils.reward_score import prime_math

    out = []
    for case in cases:
        correct, _, pred = prime_math.compute_score(case["response"], case["ground_truth"])
        out.append({"score": float(correct), "pred": pred})
    return out


def search_r1_results(cases):
    from verl.utils.reward_score import search_r1_like_qa_em

    return [{"score": float(search_r1_like_qa_em.compute_score(case["response"], case["ground_truth"])),
             "normalized": search_r1_like_qa_em.normalize_answer(case["response"])} for case in cases]


def main():
    grader, corpus = sys.argv[1], sys.argv[2]
    with open(corpus, encoding="utf-8") as f:
        cases = json.load(f)
    # verl prints (sympy errors, timeouts): keep stdout for the result, the last line.
    with contextlib.redirect_stdout(sys.stderr):
        results = {"math_dapo": math_dapo_results, "prime": prime_results,
                   "search_r1": search_r1_results}[grader](cases)
    sys.stdout.write("\n" + json.dumps({"verl": version("verl"), "results": results}, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
