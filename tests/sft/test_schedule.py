"""The time-budget learning-rate schedule."""

import pytest

from venus_utils.modeling import synthetic_conversations
from venus_utils.sft import SFTConfig, build_examples, train_sft
from venus_utils.sft.schedule import BudgetProgress, lr_factor

from ..conftest import micro_sft_config


def test_lr_factor_warms_up_then_decays_to_the_floor():
    assert lr_factor(0.0, warmup=0.1) == 0.0
    assert lr_factor(0.05, warmup=0.1) == pytest.approx(0.5)
    assert lr_factor(0.1, warmup=0.1) == pytest.approx(1.0)
    assert lr_factor(0.55, warmup=0.1) == pytest.approx(0.5)
    assert lr_factor(1.0, warmup=0.1, min_ratio=0.1) == pytest.approx(0.1)
    assert lr_factor(2.0, warmup=0.1, min_ratio=0.1) == pytest.approx(0.1)  # past the budget: stays at the floor
    values = [lr_factor(x / 100, 0.03, 0.1) for x in range(3, 101)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_budget_progress_is_the_further_of_time_and_steps():
    now = [0.0]
    progress = BudgetProgress(minutes=10, max_steps=100, clock=lambda: now[0])
    assert progress(0) == 0.0
    now[0] = 60.0  # 10% of the time
    assert progress(50) == pytest.approx(0.5)
    now[0] = 300.0
    assert progress(10) == pytest.approx(0.5)
    now[0] = 1200.0
    assert progress(10) == 1.0
    with pytest.raises(ValueError):
        BudgetProgress(None, -1)


def test_config_refuses_a_time_schedule_without_a_budget():
    with pytest.raises(ValueError, match="schedule_by_time"):
        SFTConfig(schedule_by_time=True)
    with pytest.raises(ValueError, match="min_lr_ratio"):
        SFTConfig(schedule_by_time=True, max_steps=3, min_lr_ratio=2.0)


def test_trainer_follows_the_budget_schedule(micro_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    rows = build_examples([c["messages"] for c in synthetic_conversations(8, seed=5)], tok, max_length=4096).rows
    cfg = micro_sft_config(
        learning_rate=1e-3,
        global_batch_size=2,
        max_steps=5,
        max_time_minutes=60,
        schedule_by_time=True,
        warmup_ratio=0.0,
        min_lr_ratio=0.1,
        save_steps=100,
        export_merged=False,
    )
    res = train_sft(cfg, micro_model_dir, rows, tmp_path)
    lrs = [h["learning_rate"] for h in res.train_logs]
    assert len(lrs) == 5 and all(a > b for a, b in zip(lrs, lrs[1:]))
    # step-driven here (5 steps take far less than an hour): the lr logged at step k is the factor at (k - 1) / 5
    assert lrs == pytest.approx([1e-3 * lr_factor(k / 5, 0.0, 0.1) for k in range(5)], rel=1e-3)


def _progress_worker(rank, world, port, out):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        now = [0.0]
        progress = BudgetProgress(minutes=10, clock=lambda: now[0])
        now[0] = 60.0 * (1 + 3 * rank)  # rank 0 is 1 minute in, rank 1 (started earlier) 4 minutes
        out[rank] = progress(1)
    finally:
        dist.destroy_process_group()


def test_distributed_processes_share_rank_0s_clock():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_progress_worker, args=(2, port, out), nprocs=2, join=True)
    assert dict(out) == {0: pytest.approx(0.1), 1: pytest.approx(0.1)}  # both follow rank 0: same learning rate
