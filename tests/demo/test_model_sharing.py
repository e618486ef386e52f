"""Concurrent demo runs on a local model folder load it once and share it (issue 15, item 2).

transformers' ``from_pretrained`` patches global state while it loads (``PreTrainedModel.tie_weights``, the
``torch.nn.init`` functions); two loads at once can restore each other's patches and leave a process whose
every later load fails with "Cannot copy out of meta tensor".  Here loads never overlap, a model is loaded once
per (folder, device), and a failed load is tried again next time.
"""

from __future__ import annotations

import threading
import time

import pytest

from venus_utils.core.checkpoints import DamagedModel
from venus_utils.demo.runs import DemoSettings, Run, agent_run_fn, make_backend


@pytest.fixture
def counted_loads(monkeypatch):
    """Counts ``AutoModelForCausalLM.from_pretrained`` calls and the most of them running at once."""
    import transformers

    original = transformers.AutoModelForCausalLM.from_pretrained
    stats = {"calls": 0, "running": 0, "most_at_once": 0}
    lock = threading.Lock()

    def counting(path, *args, **kwargs):
        with lock:
            stats["calls"] += 1
            stats["running"] += 1
            stats["most_at_once"] = max(stats["most_at_once"], stats["running"])
        try:
            time.sleep(0.2)  # widen the window in which a second load could start
            return original(path, *args, **kwargs)
        finally:
            with lock:
                stats["running"] -= 1

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", staticmethod(counting))
    return stats


def _at_once(n: int, fn) -> list:
    """``fn(i)`` in ``n`` threads released together; returns results (exceptions included)."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def worker(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:  # reported by the assertions
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_concurrent_loads_wait_for_one_load_and_share_the_model(model_copy, counted_loads):
    from transformers import PreTrainedModel

    tie_weights = PreTrainedModel.tie_weights
    folder = model_copy()
    settings = DemoSettings(model="checkpoint", checkpoint=str(folder)).validated()
    backends = _at_once(4, lambda i: make_backend(settings))
    assert not [b for b in backends if isinstance(b, Exception)], backends
    assert counted_loads["calls"] == 1 and counted_loads["most_at_once"] == 1
    assert all(b.model is backends[0].model for b in backends)
    assert PreTrainedModel.tie_weights is tie_weights  # transformers' global patches were all undone
    # a later run (the demo keeps the model) and the agent CLI's loader share it too
    from venus_utils.agent.backends import load_backend

    assert make_backend(settings).model is backends[0].model
    assert load_backend(str(folder)).model is backends[0].model
    assert counted_loads["calls"] == 1


def test_different_models_load_in_turn(model_copy, counted_loads):
    folders = [model_copy(), model_copy()]
    backends = _at_once(
        4, lambda i: make_backend(DemoSettings(model="checkpoint", checkpoint=str(folders[i % 2])).validated())
    )
    assert not [b for b in backends if isinstance(b, Exception)], backends
    assert counted_loads["most_at_once"] == 1 and counted_loads["calls"] == 2
    assert backends[0].model is backends[2].model and backends[1].model is backends[3].model
    assert backends[0].model is not backends[1].model


def test_a_failed_load_is_tried_again(model_copy, counted_loads):
    from venus_utils.agent.backends import load_pretrained

    folder = model_copy()
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(b"not a safetensors file")
    for _ in range(2):  # each call tries (nothing broken is remembered): the manifest names the damaged file first
        with pytest.raises(DamagedModel, match="model.safetensors"):
            load_pretrained(folder)
    assert counted_loads["calls"] == 0  # refused before the loader reads it
    weights.write_bytes(good)  # the operator repairs the folder: the next load works, no restart needed
    model, tokenizer = load_pretrained(folder)
    assert counted_loads["calls"] == 1 and load_pretrained(folder)[0] is model


def test_a_folder_saved_again_is_loaded_again(model_copy, counted_loads):
    from venus_utils.agent.backends import load_pretrained

    folder = model_copy()
    first, _ = load_pretrained(folder, keep=True)
    first.save_pretrained(folder)  # a new checkpoint in the same folder
    assert load_pretrained(folder)[0] is not first and counted_loads["calls"] == 2


def test_two_demo_runs_at_once_on_the_tiny_model(micro_run, model_copy, counted_loads):
    """Two users press Start at once: both runs work (no meta-tensor error) on one loaded model."""
    folder = model_copy()
    settings = DemoSettings(
        model="checkpoint",
        checkpoint=str(folder),
        world_dir=str(micro_run / "00_setup" / "world"),
        max_steps=2,
        max_new_tokens=16,
        system_prompt_style="compact",
    ).validated()
    runs = _at_once(2, lambda i: Run("Where was the founder born?", settings, agent_run_fn).start())
    for run in runs:
        assert run.wait(120), "a run did not finish"
        assert run.status == "Completed", run.error
        assert run.result["error"] is None and run.result["turns"] >= 1
    assert counted_loads["calls"] == 1
