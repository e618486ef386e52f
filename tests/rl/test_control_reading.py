"""Notebook 04's reading of its control (issue 40): sentences built from the run's own numbers, one per outcome."""

from __future__ import annotations

from venus_utils.rl.control import control_reading

CONTROL = {"start_step": 1600, "steps": 256, "learning_rate_start": 1.48e-3, "learning_rate_floor": 2e-4}


def comparisons(rl_vs_more: float, low: float, high: float) -> dict:
    def pair(before, after, ci=(0.0, 0.0)):
        head = {"slice": "hard/heldout", "n": 303, "accuracy_before": before, "accuracy_after": after}
        head |= {"difference": after - before, "diff_ci_low": ci[0], "diff_ci_high": ci[1]}
        head |= {"mcnemar_p": 0.001, "fixed": 3, "broken": 71}
        return {"n": 600, "headline": head}

    return {
        "RL (IGPO)": pair(0.248, 0.436),
        "more SFT": pair(0.248, 0.660),
        "RL (IGPO) vs more SFT": pair(0.660, 0.660 + rl_vs_more, (low, high)),
    }


def test_more_sft_ahead_names_what_limits_rl_and_what_would_lift_it():
    said = control_reading(comparisons(-0.224, -0.274, -0.175), CONTROL, "RL (IGPO)")
    assert said.startswith("On the 303 hard/heldout held-out questions, RL (IGPO) answers 0.436 and more SFT 0.660")
    assert "-0.224 [-0.274, -0.175]" in said and "(3 fixed / 71 broken)" in said
    assert "More SFT for the same compute does better" in said
    assert "stopped at step 1600" in said and "256 more SFT steps" in said
    assert "add +0.412 over the stopped model, the RL arm +0.188" in said and "What would lift it" in said


def test_rl_ahead_and_noise_are_said_as_such():
    ahead = control_reading(comparisons(+0.06, +0.02, +0.10), CONTROL, "RL (IGPO)")
    assert "RL taught something that the same compute of SFT did not" in ahead and "What limits" not in ahead
    noise = control_reading(comparisons(-0.01, -0.05, +0.03), CONTROL, "RL (IGPO)")
    assert "cannot tell RL from more training" in noise
