"""verl's own policy losses (verl/trainer/ppo/core_algos.py), the reference for
tests/core/algorithms/verl_parity_test.cc. Prints {"verl": VERSION, "cases": [...]}: seeded
float32 inputs (ratios inside and outside every clip bound, positive and negative
advantages, a length-1 and a full-length response), and for each loss, clip setting,
loss_agg_mode and with or without rollout-correction weights: verl's loss, its gradient
with respect to log_prob, and its metrics; and kl_penalty's value and gradient for every
KL type, "+" (straight-through k2 gradient) variants included.
"""
import json
from importlib.metadata import version

import verl_stubs  # noqa: F401  (before verl)
import torch
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig, PolicyLossConfig

AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def inputs(generator, rows=6, length=5):
    lengths = torch.randint(1, length + 1, (rows,), generator=generator)
    lengths[0], lengths[1] = 1, length
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    old_log_prob = -torch.rand(rows, length, generator=generator) * 3
    # log-ratios spread over [-0.6, 0.6]: inside and outside the clip range
    log_prob = old_log_prob + (torch.rand(rows, length, generator=generator) - 0.5) * 1.2
    advantages = torch.randn(rows, 1, generator=generator).expand(rows, length) * mask
    advantages[2] = -advantages[2].abs() - 0.5  # a strongly negative row for the dual clip
    weights = torch.rand(rows, length, generator=generator) + 0.5
    return {"old_log_prob": old_log_prob, "log_prob": log_prob, "advantages": advantages.contiguous(),
            "response_mask": mask, "rollout_is_weights": weights}


def main():
    generator = torch.Generator().manual_seed(20251126)
    data = inputs(generator)
    clips = [{"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0},
             {"clip_ratio": 0.2, "clip_ratio_low": 0.1, "clip_ratio_high": 0.28, "clip_ratio_c": 1.5},
             # tight enough that DPPO's divergence trust regions cut tokens too
             {"clip_ratio": 0.05, "clip_ratio_low": 0.01, "clip_ratio_high": 0.03, "clip_ratio_c": 3.0}]
    # Each loss's own settings, away from their defaults: SAPO's gate temperatures
    # (actor.tau_pos / tau_neg) and DRO's penalty (actor.policy_loss.dro_beta).
    options = {"sapo": {"tau_pos": 1.3, "tau_neg": 2.0}, "dro": {"dro_beta": 0.7}}
    cases = []
    for name in ("vanilla", "gspo", "cispo", "gpg", "geo_mean", "dppo_tv", "dppo_kl", "sapo", "dro"):
        for clip in clips:
            for mode in AGG_MODES:
                for weighted in (False, True):
                    extra = dict(options.get(name, {}))
                    policy_loss = PolicyLossConfig(loss_mode=name, dro_beta=extra.pop("dro_beta", None))
                    config = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                                         loss_agg_mode=mode, policy_loss=policy_loss, **clip, **extra)
                    log_prob = data["log_prob"].clone().requires_grad_(True)
                    loss, metrics = core_algos.get_policy_loss_fn(name)(
                        old_log_prob=data["old_log_prob"], log_prob=log_prob, advantages=data["advantages"],
                        response_mask=data["response_mask"], loss_agg_mode=mode, config=config,
                        rollout_is_weights=data["rollout_is_weights"] if weighted else None)
                    loss.backward()
                    case = {"name": name, "clip": clip, "options": options.get(name, {}),
                            "loss_agg_mode": mode, "loss": loss.item(),
                            "grad": log_prob.grad.tolist(),
                            "metrics": {key: float(value) for key, value in metrics.items()}}
                    case.update({key: value.tolist() for key, value in data.items()
                                 if key != "rollout_is_weights" or weighted})
                    cases.append(case)
    # kl_penalty for every type, with log-ratios past its +-20 clamp: values and gradients.
    log_prob = torch.tensor([[-1.0, -0.5, -30.0, -2.0], [-0.1, -25.0, -3.0, -0.7]])
    ref_log_prob = torch.tensor([[-1.2, -0.4, -2.0, -2.0], [-26.0, -0.3, -2.5, -0.9]])
    kl = []
    for base in ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"):
        for kind in (base, base + "+"):
            variable = log_prob.clone().requires_grad_(True)
            value = core_algos.kl_penalty(variable, ref_log_prob, kind)
            value.sum().backward()
            kl.append({"type": kind, "log_prob": log_prob.tolist(), "ref_log_prob": ref_log_prob.tolist(),
                       "value": value.tolist(), "grad": variable.grad.tolist()})
    print(json.dumps({"verl": version("verl"), "cases": cases, "kl": kl}))


if __name__ == "__main__":
    main()
