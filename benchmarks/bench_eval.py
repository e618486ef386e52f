"""Held-out evaluation speed: questions per second answered many at a time (batched generation) against one at a time.

    # a fresh world and untrained tiny model
    .venv/bin/python benchmarks/bench_eval.py
    # trained (a run's model)
    .venv/bin/python benchmarks/bench_eval.py --run runs/cpu --questions 600 --max-turns 8 --max-new-tokens 128

Both variants run :func:`venus_utils.eval.heldout.evaluate_model` with greedy decoding on the same questions, in this
process, one after the other; the ratio is what batching across questions buys (the target: 600 questions within a
few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default=None, help="a run folder with 00_setup/world and a model (default: build them)")
    p.add_argument("--model", default=None, help="model folder (default: the run's best model)")
    p.add_argument("--questions", type=int, default=32)
    p.add_argument("--single", type=int, default=6, help="questions answered one at a time (the baseline)")
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--max-turns", type=int, default=4, help="an untrained model uses them all: keep it small")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--style", default="compact", help="system prompt style the model was trained with")
    args = p.parse_args(argv)

    from venus_utils.eval.heldout import EvalSettings, draw_heldout, evaluate_model
    from venus_utils.eval.judge import Judge
    from venus_utils.stage import best_model

    tmp = Path(tempfile.mkdtemp(prefix="bench_eval_"))
    if args.run:
        world = Path(args.run) / "00_setup" / "world"
        model = Path(args.model) if args.model else best_model(args.run)[1]
    else:
        from venus_utils.modeling import build_tiny_model
        from venus_utils.world import build_world

        world, model = tmp / "world", tmp / "model"
        build_world(world, seed=0, size="small", progress=False, n_worlds=2, heldout_worlds=1)
        build_tiny_model(model, world, size="tiny", vocab_size=2048)
    qa = draw_heldout(world, args.questions, seed=0)
    judge = Judge.from_env("offline")
    print(f"model {model}; {len(qa)} questions; max {args.max_turns} turns x {args.max_new_tokens} tokens")
    results = {}
    for label, workers, n in (("one at a time", 1, min(args.single, len(qa))), ("batched", args.workers, len(qa))):
        settings = EvalSettings(
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            system_prompt_style=args.style,
            workers=workers,
        )
        t0 = time.perf_counter()
        scored = evaluate_model(model, qa.head(n), tmp / f"{workers}.parquet", settings, world_dir=world, judge=judge)
        seconds = time.perf_counter() - t0
        results[label] = n / seconds
        print(
            f"{label:>14}: {n} questions in {seconds:.1f} s = {n / seconds:.2f} questions/s "
            f"(accuracy {scored['correct'].mean():.3f}, {scored['turns'].mean():.1f} turns)"
        )
    ratio = results["batched"] / results["one at a time"]
    print(
        f"speed-up batched / one at a time: {ratio:.1f}x; 600 questions would take "
        f"{600 / results['batched'] / 60:.1f} min batched"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
