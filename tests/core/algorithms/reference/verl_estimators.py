"""verl's own advantage estimators (verl/trainer/ppo/core_algos.py), the reference for
tests/core/algorithms/verl_parity_test.cc. Prints {"verl": VERSION, "cases": [...]}: seeded
inputs (float32, groups of several sizes shuffled over the batch, ties, a length-1 and a
full-length response) and what verl's function returns for each estimator and options.
"""
import json
from importlib.metadata import version

import verl_stubs  # noqa: F401  (before verl)
import numpy as np
import torch
from verl.trainer.ppo import core_algos
from verl_stubs import Config


def batch(generator, index, length=7):
    rows = len(index)
    lengths = torch.randint(1, length + 1, (rows,), generator=generator)
    lengths[0], lengths[1] = 1, length  # a length-1 and a full-length response
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    # Outcome rewards on the last response token, from a small set so groups have ties;
    # plus small token-level rewards for the estimators that use every token.
    outcome = torch.tensor([0.0, 1.0, 0.5, -1.0, 2.0])[torch.randint(0, 5, (rows,), generator=generator)]
    rewards = torch.zeros(rows, length)
    rewards[torch.arange(rows), lengths - 1] = outcome
    dense = rewards + 0.1 * torch.randn(rows, length, generator=generator) * mask
    values = torch.randn(rows, length, generator=generator) * mask
    baselines = torch.tensor([0.0, 1.0, 0.5])[torch.randint(0, 3, (rows,), generator=generator)]
    return {"token_level_rewards": rewards, "dense_rewards": dense, "response_mask": mask,
            "index": np.array(index), "values": values, "reward_baselines": baselines}


def case(name, options, inputs, advantages, returns, rewards_key="token_level_rewards", extra=()):
    out = {"name": name, "options": options,
           "token_level_rewards": inputs[rewards_key].tolist(),
           "response_mask": inputs["response_mask"].tolist(),
           "index": inputs["index"].tolist(),
           "advantages": advantages.tolist(), "returns": returns.tolist()}
    for key in extra:
        out[key] = inputs[key].tolist()
    return out


def main():
    generator = torch.Generator().manual_seed(20251125)
    # Groups of 3, 1, 4, 2 and 2 responses, interleaved; without the single one for pass@k.
    grouped = batch(generator, [7, 3, 7, 11, 3, 7, 5, 3, 9, 3, 9, 5])
    paired = batch(generator, [4, 2, 4, 8, 2, 8, 4, 2])
    algorithms = core_algos
    cases = []

    def outcome(name, options, inputs, **kwargs):
        fn = algorithms.get_adv_estimator_fn(name)
        advantages, returns = fn(token_level_rewards=inputs["token_level_rewards"].clone(),
                                 response_mask=inputs["response_mask"], index=inputs["index"],
                                 config=Config(options), **kwargs)
        cases.append(case(name, options, inputs, advantages, returns))

    for norm in (True, False):
        options = {"norm_adv_by_std_in_grpo": norm}
        outcome("grpo", options, grouped, norm_adv_by_std_in_grpo=norm)
        outcome("grpo_vectorized", options, grouped, norm_adv_by_std_in_grpo=norm)
        outcome("grpo_passk", options, paired)
    for name in ("rloo", "rloo_vectorized", "opo", "reinforce_plus_plus_baseline"):
        outcome(name, {}, grouped)
    outcome("gpg", {}, grouped)
    outcome("gpg", {"f_norm": 2.0}, grouped, f_norm=2.0)

    # GDPO: two reward components (verl reads them from non_tensor_batch by gdpo_reward_keys and
    # places each at the response's last token, whose position comes from the attention mask).
    components = {"format": torch.tensor([0.0, 1.0])[torch.randint(0, 2, (12,), generator=generator)],
                  "acc": torch.tensor([0.0, 0.5, 1.0])[torch.randint(0, 3, (12,), generator=generator)]}
    prompts = torch.ones(12, 2, dtype=torch.long)
    gdpo_batch = {"prompts": prompts,
                  "attention_mask": torch.cat([torch.ones(12, 2), grouped["response_mask"]], dim=1).long()}
    non_tensor = {name: values.numpy() for name, values in components.items()}
    for options in ({"gdpo_reward_keys": ["format", "acc"]},
                    {"gdpo_reward_keys": ["format", "acc"], "gdpo_reward_weights": [0.3, 1.7]},
                    {"gdpo_reward_keys": ["acc"], "norm_adv_by_std_in_grpo": False}):
        norm = options.get("norm_adv_by_std_in_grpo", True)
        advantages, returns = algorithms.get_adv_estimator_fn("gdpo")(
            token_level_rewards=grouped["token_level_rewards"].clone(), response_mask=grouped["response_mask"],
            index=grouped["index"], norm_adv_by_std_in_grpo=norm, config=Config(options),
            non_tensor_batch=non_tensor, batch=gdpo_batch)
        gdpo_case = case("gdpo", options, grouped, advantages, returns)
        gdpo_case["reward_components"] = {name: values.tolist() for name, values in components.items()}
        cases.append(gdpo_case)

    rewards, mask = grouped["dense_rewards"], grouped["response_mask"]
    advantages, returns = algorithms.get_adv_estimator_fn("reinforce_plus_plus")(
        token_level_rewards=rewards.clone(), response_mask=mask, config=Config(gamma=0.9))
    cases.append(case("reinforce_plus_plus", {"gamma": 0.9}, grouped, advantages, returns, "dense_rewards"))
    advantages, returns = algorithms.get_adv_estimator_fn("remax")(
        token_level_rewards=grouped["token_level_rewards"].clone(), reward_baselines=grouped["reward_baselines"],
        response_mask=mask, config=Config())
    cases.append(case("remax", {}, grouped, advantages, returns, extra=("reward_baselines",)))
    advantages, returns = algorithms.get_adv_estimator_fn("gae")(
        token_level_rewards=rewards.clone(), values=grouped["values"], response_mask=mask, gamma=0.95, lam=0.9)
    cases.append(case("gae", {"gamma": 0.95, "lam": 0.9}, grouped, advantages, returns, "dense_rewards",
                      extra=("values",)))

    # Optimal token baseline: the actor's old log-probs and sum_pi_squared per token, with and
    # without rollout IS weights; tir_ also on multi-turn masks (gaps of tool output) with an
    # empty response.
    def token_stats(inputs):
        rows, length = inputs["response_mask"].shape
        probs = torch.rand(rows, length, generator=generator) * 0.9 + 0.05
        inputs["old_log_probs"] = probs.log()
        inputs["sum_pi_squared"] = probs.square() + torch.rand(rows, length, generator=generator) * (1 - probs.square())
        inputs["rollout_is_weights"] = torch.rand(rows, length, generator=generator) * 1.5 + 0.25
        return inputs

    token_stats(grouped)
    multi_turn = token_stats(batch(generator, [1, 6, 1, 6, 2, 1, 6, 2], length=9))
    gaps = torch.ones(8, 9)
    gaps[0, 2:4] = 0
    gaps[2, 5:] = 0
    gaps[3, 1:8] = 0
    gaps[4, :] = 0  # an empty response: in no group
    gaps[6, 3:5] = 0
    multi_turn["response_mask"] = multi_turn["response_mask"] * gaps
    multi_turn["response_mask"][5, :] = 1  # full length, a turn gap in the middle
    multi_turn["response_mask"][5, 4] = 0
    multi_turn["token_level_rewards"] = multi_turn["dense_rewards"] * multi_turn["response_mask"]
    for name, inputs in (("optimal_token_baseline", grouped), ("tir_optimal_token_baseline", grouped),
                         ("tir_optimal_token_baseline", multi_turn)):
        for with_weights in (False, True):
            weights = inputs["rollout_is_weights"] if with_weights else None
            advantages, returns = algorithms.get_adv_estimator_fn(name)(
                token_level_rewards=inputs["token_level_rewards"].clone(), response_mask=inputs["response_mask"],
                index=inputs["index"], old_log_probs=inputs["old_log_probs"],
                sum_pi_squared=inputs["sum_pi_squared"], rollout_is_weights=weights, config=Config())
            extra = ("old_log_probs", "sum_pi_squared") + (("rollout_is_weights",) if with_weights else ())
            cases.append(case(name, {}, inputs, advantages, returns, extra=extra))
    print(json.dumps({"verl": version("verl"), "cases": cases}))


if __name__ == "__main__":
    main()
