"""compute_turn_advantages against values worked out by hand from DR-Venus's ``grpo_info_gain``."""

from __future__ import annotations

import math
import random

import pytest

from venus_utils.rl.advantages import ZERO_REWARD, compute_turn_advantages

EPS = 1e-6
G = 0.95

# two groups of two samples; IG/penalty positions and outcomes at lengths[i] - 1
REWARDS = [
    {2: 0.5, 5: 1.0},  # group A: one IG, outcome 1
    {1: -1.0, 3: 0.0},  # group A: a penalty, outcome 0 (present although 0)
    {4: 1.0},  # group B: no IG, outcome 1
    {0: 0.2, 2: ZERO_REWARD, 4: 1.0},  # group B: two IG (one was exactly 0), outcome 1
]
LENGTHS = [6, 4, 5, 5]
GROUPS = ["A", "A", "B", "B"]


def std(values):
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values) + 1e-8)


def z(v, values):
    return (v - sum(values) / len(values)) / (std(values) + EPS)


def approx(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == pytest.approx(y, rel=1e-9, abs=1e-9)


def test_separate_by_hand():
    adv = compute_turn_advantages(REWARDS, LENGTHS, GROUPS, gamma=G, mode="separate", eps=EPS)
    out_a, ig_a = [1.0, 0.0], [0.5, -1.0]
    out_b, ig_b = [1.0, 1.0], [0.2, ZERO_REWARD]
    s0_ig, s0_out = z(0.5, ig_a), z(1.0, out_a)
    approx(adv[0], [s0_ig + G * s0_out] * 3 + [s0_out] * 3)  # segments [0..2], (2..5]
    s1_pen, s1_out = z(-1.0, ig_a), z(0.0, out_a)
    approx(adv[1], [s1_pen + G * s1_out] * 2 + [s1_out] * 2)
    assert z(1.0, out_b) == 0.0  # equal outcomes in a group: no outcome signal
    approx(adv[2], [0.0] * 5)  # no IG position: one segment with the (zero) outcome
    a2 = 0.0
    a1 = z(ZERO_REWARD, ig_b) + G * a2
    a0 = z(0.2, ig_b) + G * a1
    approx(adv[3], [a0, a1, a1, a2, a2])
    assert a0 > 0 > a1  # the 0.2 IG turn beats the zero-IG turn


def test_scaled_separate_rescales_ig_by_batch_magnitudes():
    stats = {}
    adv = compute_turn_advantages(REWARDS, LENGTHS, GROUPS, gamma=G, mode="scaled_separate", eps=EPS, stats=stats)
    out = [z(1.0, [1, 0]), z(0.0, [1, 0]), 0.0, 0.0]
    ig = [z(0.5, [0.5, -1.0]), z(-1.0, [0.5, -1.0]), z(0.2, [0.2, ZERO_REWARD]), z(ZERO_REWARD, [0.2, ZERO_REWARD])]
    scale = min(10.0, max(0.3, sum(map(abs, out)) / 4) / (sum(map(abs, ig)) / 4 + EPS))
    assert stats["ig_scale"] == pytest.approx(scale)
    assert scale == pytest.approx(0.5, rel=1e-4)
    approx(adv[0], [scale * ig[0] + G * out[0]] * 3 + [out[0]] * 3)
    a1 = scale * ig[3]
    approx(adv[3], [scale * ig[2] + G * a1, a1, a1, 0.0, 0.0])


def test_scale_is_clamped():
    # outcomes all equal -> mean|A_out| = 0 -> floor 0.3; tiny IG spread -> scale capped at 10
    rewards = [{0: 1e-3, 2: 1.0}, {0: -1e-3, 2: 1.0}]
    stats = {}
    compute_turn_advantages(rewards, [3, 3], [0, 0], mode="scaled_separate", stats=stats)
    zig = abs(z(1e-3, [1e-3, -1e-3]))  # just under 1: the 1e-8 inside the std matters at this spread
    assert stats["ig_scale"] == pytest.approx(0.3 / (zig + EPS))
    stats = {}
    compute_turn_advantages([{0: 0.5, 2: 1.0}, {2: 0.0}], [3, 3], [0, 0], mode="scaled_separate", stats=stats)
    assert stats["ig_scale"] == pytest.approx(10.0)  # one IG value -> std 1, z = 0 -> ratio huge -> capped


def test_joint_pools_outcome_and_ig():
    adv = compute_turn_advantages(REWARDS, LENGTHS, GROUPS, gamma=G, mode="joint", eps=EPS)
    pool_a = [0.5, 1.0, -1.0, 0.0]
    approx(adv[0], [z(0.5, pool_a) + G * z(1.0, pool_a)] * 3 + [z(1.0, pool_a)] * 3)
    pool_b = [1.0, 0.2, ZERO_REWARD, 1.0]
    a2 = z(1.0, pool_b)
    approx(adv[2], [a2] * 5)


def test_raw_ig_adds_outcome_and_drops_discount():
    adv = compute_turn_advantages(REWARDS, LENGTHS, GROUPS, gamma=G, mode="raw_ig", eps=EPS)
    out0 = z(1.0, [1.0, 0.0])
    ig0 = 0.5 / (std([0.5, -1.0]) + EPS) + out0  # no mean subtraction, outcome broadcast, gamma forced to 0
    approx(adv[0], [ig0] * 3 + [out0] * 3)


def test_single_value_group_and_padding():
    adv = compute_turn_advantages([{1: 0.7, 3: 1.0}, {}], [4, 0], ["solo", "pad"], mode="separate")
    approx(adv[0], [0.0] * 4)  # one value per kind: mean = value, std = 1 -> 0
    assert adv[1] == []


def test_zero_entries_and_missing_outcome():
    # an exact 0 away from the end is no reward position; a missing outcome counts as 0
    a = compute_turn_advantages([{1: 0.0}, {3: 1.0}], [4, 4], [0, 0], mode="separate")
    b = compute_turn_advantages([{}, {3: 1.0}], [4, 4], [0, 0], mode="separate")
    assert a == b
    assert len(set(a[0])) == 1  # a single segment


def test_bad_input_raises():
    with pytest.raises(ValueError, match="sample 0.*position 7"):
        compute_turn_advantages([{7: 1.0}], [4], [0])
    with pytest.raises(ValueError, match="not|finite"):
        compute_turn_advantages([{1: float("nan"), 3: 1.0}], [4], [0])
    with pytest.raises(ValueError, match="one entry per sample"):
        compute_turn_advantages([{}], [4, 4], [0])
    with pytest.raises(ValueError, match="mode"):
        compute_turn_advantages([{}], [4], [0], mode="bogus")


def test_per_sample_independent_of_order_and_sharding():
    """Advantages depend on a sample's group and batch-level statistics only: shuffling the batch (as TRL's
    sampler and a multi-process split do) permutes them and changes nothing else."""
    rng = random.Random(0)
    rewards, lengths, groups = [], [], []
    for g in range(4):
        for _ in range(3):
            n = rng.randint(5, 30)
            r = {p: rng.uniform(-1, 1) for p in rng.sample(range(n - 1), rng.randint(0, 3))}
            r[n - 1] = float(rng.random() < 0.5)
            rewards.append(r), lengths.append(n), groups.append(g)
    full = compute_turn_advantages(rewards, lengths, groups)
    order = list(range(len(rewards)))
    rng.shuffle(order)
    shuffled = compute_turn_advantages(
        [rewards[i] for i in order], [lengths[i] for i in order], [groups[i] for i in order]
    )
    for k, i in enumerate(order):
        approx(shuffled[k], full[i])
    assert all(math.isfinite(a) for row in full for a in row) and any(a != 0 for row in full for a in row)


def test_process_shards_get_the_full_batch_advantages():
    """The trainer gathers (rewards, length, group, judge score) from every process, computes once, and slices: two
    processes holding half a batch each (a group split between them) get exactly the one-process values."""
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.step_batch import process_advantages

    cfg = IGPOConfig()
    batch = list(zip(REWARDS, LENGTHS, ["A", "B", "A", "B"], [1.0, 0.0, 0.0, 1.0], [1, 2, 3, 4]))  # groups split
    full = process_advantages(batch, 0, 4, cfg)
    shards = process_advantages(batch, 0, 2, cfg) + process_advantages(batch, 1, 2, cfg)
    assert shards == full
    assert full == compute_turn_advantages(REWARDS, LENGTHS, ["A", "B", "A", "B"])


def test_ig_normalised_per_tool_compares_a_visit_with_visits():
    """Issue 40's variant (``ig_norm = "tool"``): reading a page of namesakes lowers the answer's log-probability on
    average, so under DR-Venus's pooling every visit turn looks bad beside the searches; z-scored per (group, tool),
    the better of two visits earns a positive advantage."""
    rewards = [{0: 2.0, 1: -1.0, 3: 1.0}, {0: 2.4, 1: -0.2, 3: 0.0}]  # search, visit, outcome
    lengths, groups = [4, 4], ["q", "q"]
    kinds = [["search", "visit"], ["search", "visit"]]
    pooled = compute_turn_advantages(rewards, lengths, groups, gamma=0.0, mode="separate", eps=EPS)
    by_tool = compute_turn_advantages(rewards, lengths, groups, gamma=0.0, mode="separate", eps=EPS, ig_kinds=kinds)
    ig = [2.0, -1.0, 2.4, -0.2]
    assert pooled[1][1] == pytest.approx(z(-0.2, ig)) and pooled[1][1] < 0  # the better visit, pushed down
    assert by_tool[1][1] == pytest.approx(z(-0.2, [-1.0, -0.2])) and by_tool[1][1] > 0  # ... against visits: up
    assert by_tool[0][0] == pytest.approx(z(2.0, [2.0, 2.4]))
    assert by_tool[0][3] == pooled[0][3]  # the outcome's advantage is unchanged
    with pytest.raises(ValueError, match="one key per IG position"):
        compute_turn_advantages(rewards, lengths, groups, mode="separate", ig_kinds=[["search"], ["search", "visit"]])
    with pytest.raises(ValueError, match="mode separate or scaled_separate"):
        compute_turn_advantages(rewards, lengths, groups, mode="joint", ig_kinds=kinds)


def test_the_trainer_passes_each_rewarded_turns_tool_with_ig_norm_tool():
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.step_batch import process_advantages

    rewards = [{0: 2.0, 1: -1.0, 3: 1.0}, {0: 2.4, 1: -0.2, 3: 0.0}]
    batch = [(r, 4, "q", 0.0, k, ["search", "visit"]) for k, r in enumerate(rewards)]
    tool = process_advantages(batch, 0, 2, IGPOConfig(ig_norm="tool", norm_mode="separate", gamma=0.0))
    group = process_advantages(batch, 0, 2, IGPOConfig(norm_mode="separate", gamma=0.0))
    assert tool[1][1] > 0 > group[1][1]
    with pytest.raises(ValueError, match="ig_norm='tool'"):
        IGPOConfig(ig_norm="tool", norm_mode="joint")
