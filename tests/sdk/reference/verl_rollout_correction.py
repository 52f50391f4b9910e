"""verl's own rollout correction (verl/trainer/ppo/rollout_corr_helper.py), the reference for
tests/sdk/rollout_correction_test.cc. Prints {"verl": VERSION, "datasets": {...}, "cases": [...],
"offpolicy": [...]}:

  datasets   seeded float32 old_log_prob / rollout_log_prob / response_mask: small log-ratios,
             large ones (tokens and sequence sums past the +-20 safety bound), padding filled
             with far-off values, a length-1 row, an all-padding row under an int64 mask, and
             a single one-token sequence
  cases      for every dataset and config (every IS level with TIS and IcePop thresholds,
             batch normalization on and off, every rollout_rs option alone and combined with
             shared, per-option and duplicated thresholds, IS with RS): what
             compute_rollout_correction_and_rejection_mask returns (weights, mask, metrics), or
             for the configs verl refuses, the error it raises and the key at fault (and
             ZeroDivisionError where IcePop zeroes every weight and verl's ESS divides by 0)
  offpolicy  compute_rollout_corr_metrics_from_logprobs for every dataset

Config values are passed to verl as given (floats stay floats) and written as the strings
rlcore's RolloutCorrectionConfig holds.
"""
import json
import os
import sys
from importlib.metadata import version

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "algorithms",
                                "reference"))
import verl_stubs  # noqa: F401,E402  (before verl)
import torch  # noqa: E402
from verl.trainer.ppo import rollout_corr_helper as helper  # noqa: E402


class TensorsOnly:
    """DataProto needs tensordict (stubbed); the helper only wraps the weights in one."""

    def __init__(self, tensors):
        self.batch = tensors

    @classmethod
    def from_dict(cls, tensors):
        return cls(tensors)


helper.DataProto = TensorsOnly


def padded_mask(lengths, length, dtype=torch.float32):
    lengths = torch.tensor(lengths)
    return (torch.arange(length)[None, :] < lengths[:, None]).to(dtype)


def dataset(generator, lengths, length, scale, mask_dtype=torch.float32, big=()):
    rows = len(lengths)
    mask = padded_mask(lengths, length, mask_dtype)
    old_log_prob = -torch.rand(rows, length, generator=generator) * 3
    log_ratio = torch.randn(rows, length, generator=generator) * scale
    for row, token, value in big:  # log-ratios past the safety bound
        log_ratio[row, token] = value
    rollout_log_prob = old_log_prob - log_ratio
    # Padding holds values far off, which must reach no result.
    rollout_log_prob = torch.where(mask.bool(), rollout_log_prob, torch.full_like(rollout_log_prob, -60.0))
    return {"old_log_prob": old_log_prob, "rollout_log_prob": rollout_log_prob, "response_mask": mask}


def datasets():
    generator = torch.Generator().manual_seed(20251126)
    return {
        "small": dataset(generator, [1, 7, 4, 6, 2, 5], 7, 0.3),
        "large": dataset(generator, [6, 3, 6, 1, 5], 6, 2.0,
                         big=[(0, 1, 25.0), (0, 3, 4.0), (1, 0, -30.0), (2, 2, 21.0), (2, 4, 12.0),
                              (3, 0, -22.0), (4, 1, -12.0), (4, 3, -11.0)]),
        "empty_row": dataset(generator, [5, 0, 3, 1], 5, 0.2, mask_dtype=torch.int64),
        "one_token": dataset(generator, [1], 3, 0.4),
    }


def config(rollout_is=None, is_threshold=2.0, batch_normalize=False, rollout_rs=None, rs_threshold=None):
    return {"rollout_is": rollout_is, "rollout_is_threshold": is_threshold,
            "rollout_is_batch_normalize": batch_normalize, "rollout_rs": rollout_rs,
            "rollout_rs_threshold": rs_threshold}


def valid_configs():
    configs = [config()]
    for level in ("token", "sequence"):
        for threshold in (2.0, "1.5", "0.5_2.0", "0.9_1.1", " 0.5 _ 1_0 ", "inf"):
            for normalize in (False, True):
                configs.append(config(level, threshold, normalize))
    for option, thresholds in (("token_k1", ("0.8_1.25", "1.3", 1.5)), ("token_k2", ("0.05", 0.5)),
                               ("token_k3", ("0.05", "inf")), ("seq_sum_k1", ("0.5_2.0", "3.0")),
                               ("seq_sum_k2", ("0.2",)), ("seq_sum_k3", ("0.2",)),
                               ("seq_mean_k1", ("0.9_1.1", "1.2", "1_1")), ("seq_mean_k2", ("0.05",)),
                               ("seq_mean_k3", ("0.05",)), ("seq_max_k2", ("0.2",)), ("seq_max_k3", ("0.2",))):
        for threshold in thresholds:
            configs.append(config(rollout_rs=option, rs_threshold=threshold))
    configs += [
        config(rollout_rs="token_k1,seq_mean_k3,seq_max_k2", rs_threshold="0.5_2.0,0.05,0.5"),
        config(rollout_rs="token_k2,seq_sum_k3", rs_threshold="0.1"),
        config(rollout_rs="token_k2, token_k2 ,seq_max_k3", rs_threshold="0.1, 0.3"),
        config(rollout_rs="seq_sum_k1,seq_mean_k1,token_k3", rs_threshold="0.5_inf,1.5,0.2"),
        config("sequence", 2.0, False, "seq_mean_k1", "0.9_1.1"),
        config("token", "0.5_2.0", True, "token_k3,seq_sum_k2", "0.1,0.5"),
        config("sequence", "0.5_4", True, "seq_max_k3,token_k1", "0.5,2"),
    ]
    return configs


def refused_configs():
    """(config, key rlcore must name): configs verl raises on."""
    is_cfg = lambda threshold: config("token", threshold)  # noqa: E731
    rs_cfg = lambda option, threshold: config(rollout_rs=option, rs_threshold=threshold)  # noqa: E731
    refused = [(config(level), "rollout_is") for level in ("tokens", "Token", " token", "seq")]
    refused += [(is_cfg(t), "rollout_is_threshold")
                for t in ("", "  ", "abc", "0", "-1", "0_2", "2_1", "a_2", "1_b", "0.5_", "_2", "1_0", "0x10")]
    refused += [(rs_cfg(option, "0.1"), "rollout_rs") for option in ("token_k4", "token_k1,foo", ",", " , ",
                                                                      "seq_max_k1", "token")]
    refused += [(rs_cfg(option, threshold), "rollout_rs_threshold") for option, threshold in (
        ("token_k2", None), ("token_k2", ""), ("token_k2", " , "), ("token_k2", "0.1,0.2"),
        ("token_k2,seq_max_k3", "0.1,0.2,0.3"), ("token_k2,token_k2,seq_max_k3", "0.1,0.2,0.3"),
        ("token_k2", "0.5_1"), ("seq_max_k3", "0"), ("seq_sum_k2", "-1"), ("seq_mean_k3", "x"),
        ("token_k1", "0"), ("token_k1", "-2"), ("seq_sum_k1", "2_1"), ("seq_mean_k1", "0_1"), ("token_k1", "a_1"),
        ("token_k1", "inf"), ("token_k1", "x"), ("token_k1,token_k2", "0.5_2.0"), ("seq_sum_k1", "0.5_0.6_inf"))]
    return refused


def as_text(value):
    return None if value is None else str(value)


def run(data, cfg):
    weights, mask, metrics = helper.compute_rollout_correction_and_rejection_mask(
        old_log_prob=data["old_log_prob"], rollout_log_prob=data["rollout_log_prob"],
        response_mask=data["response_mask"], **cfg)
    return {"weights": None if weights is None else weights.batch["rollout_is_weights"].tolist(),
            "mask": mask.tolist(), "mask_dtype": str(mask.dtype),
            "metrics": {key: float(value) for key, value in metrics.items()}}


def rlcore_config(cfg):
    out = dict(cfg)
    out["rollout_is_threshold"] = as_text(cfg["rollout_is_threshold"])
    out["rollout_rs_threshold"] = as_text(cfg["rollout_rs_threshold"])
    return out


def main():
    data = datasets()
    cases = []
    for name, tensors in data.items():
        for cfg in valid_configs():
            case = {"dataset": name, "config": rlcore_config(cfg)}
            try:
                case.update(run(tensors, cfg))
            except ZeroDivisionError as error:
                # IcePop zeroed every weight: verl's ESS divides by zero (rlcore reports 0).
                case.update({"error": type(error).__name__, "message": str(error)})
            cases.append(case)
    for cfg, key in refused_configs():
        try:
            run(data["small"], cfg)
        except (ValueError, TypeError, ZeroDivisionError) as error:
            cases.append({"dataset": "small", "config": rlcore_config(cfg), "error": type(error).__name__,
                          "message": str(error), "key": key})
        else:
            raise SystemExit(f"verl accepted {cfg}, listed as refused")
    offpolicy = [{"dataset": name, "metrics": helper.compute_rollout_corr_metrics_from_logprobs(
        tensors["old_log_prob"], tensors["rollout_log_prob"], tensors["response_mask"])} for name, tensors in
        data.items()]
    print(json.dumps({
        "verl": version("verl"),
        "datasets": {name: {key: value.tolist() for key, value in tensors.items()} | {
            "mask_dtype": str(tensors["response_mask"].dtype)} for name, tensors in data.items()},
        "cases": cases, "offpolicy": offpolicy}))


if __name__ == "__main__":
    main()
