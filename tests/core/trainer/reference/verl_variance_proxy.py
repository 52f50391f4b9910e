"""verl's compute_variance_proxy_metrics (verl/trainer/ppo/metric_utils.py), the reference for
tests/core/trainer/step_metrics_test.cc. Prints {"verl": VERSION, "cases": [...]}: seeded batches
(float32, a masked tail per row), with and without rollout IS weights and a gradient norm, and
the metrics verl reports for each.
"""
import json
import os
import sys
from importlib.metadata import version
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../algorithms/reference"))
import verl_stubs  # noqa: F401,E402  (before verl)
import torch  # noqa: E402
from verl.trainer.ppo.metric_utils import compute_variance_proxy_metrics  # noqa: E402


def main():
    generator = torch.Generator().manual_seed(20261126)
    rows, length = 6, 5
    lengths = torch.tensor([1, 5, 3, 4, 2, 5])
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    probs = torch.rand(rows, length, generator=generator) * 0.9 + 0.05
    tensors = {
        "response_mask": mask,
        "old_log_probs": probs.log(),
        "sum_pi_squared": probs.square() + torch.rand(rows, length, generator=generator) * (1 - probs.square()),
        "advantages": torch.randn(rows, length, generator=generator) * mask,
        "rollout_is_weights": torch.rand(rows, length, generator=generator) * 1.5 + 0.25,
    }
    cases = []
    for with_weights in (False, True):
        for grad_norm in (None, 0.7):
            batch = {k: v for k, v in tensors.items() if with_weights or k != "rollout_is_weights"}
            metrics = compute_variance_proxy_metrics(SimpleNamespace(batch=batch), gradient_norm=grad_norm)
            cases.append({"batch": {k: v.tolist() for k, v in batch.items()}, "grad_norm": grad_norm,
                          "metrics": metrics})
    print(json.dumps({"verl": version("verl"), "cases": cases}))


if __name__ == "__main__":
    main()
