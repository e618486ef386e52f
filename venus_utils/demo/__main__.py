"""``python -m venus_utils.demo [--port P] [--host H] [--allow-any-endpoint]``: the web demo on the offline default.

It binds 127.0.0.1 (this machine only) unless ``--host`` says otherwise (``--host 0.0.0.0`` shares it on
the network: anyone who can reach the port can run the agent; the demo has no authentication and prints a
warning).  Endpoint URLs typed in the UI ("Check service", an endpoint model, a summary model) are contacted
only when they are the configured ``--model`` endpoint or a loopback address, unless ``--allow-any-endpoint``.
Defaults come from a profile's run folder: the offline world of ``runs/<profile>/00_setup/world`` and the
best model there (RL > SFT > tiny base).  The system prompt, the turns and the tokens per turn default to the chosen
model's own (the ``venus_agent.json`` its training wrote), else the dr-venus prompt, 20 turns and 2048 tokens.
"""

from __future__ import annotations

import argparse

from ..core.validation import Range, number_argument
from .runs import (
    DEMO_FALLBACK,
    MAX_NEW_TOKENS_RANGE,
    MAX_STEPS_LIMIT,
    PROMPT_CHOICES,
    DemoSettings,
    InputError,
    agent_settings,
    default_settings,
    model_folder,
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, local only)")
    parser.add_argument("--port", type=number_argument(Range(0, 65_535)), default=7860, help="port (default 7860)")
    parser.add_argument(
        "--run-dir", default="runs/smoke", help="run folder with the world and models (default runs/smoke)"
    )
    parser.add_argument(
        "--concurrency",
        type=number_argument(Range(1, 64)),
        default=2,
        help="runs at the same time; more users wait in a queue",
    )
    parser.add_argument(
        "--model",
        default="auto",
        help="auto (the run's best model: RL > SFT > base), a model folder, or http(s)://host:port/v1",
    )
    parser.add_argument(
        "--web", action="store_true", help="default to the web tools (Serper + Jina) instead of the world"
    )
    parser.add_argument(
        "--max-turns",
        "--max-steps",  # DR-Venus's demo calls it Max Steps (the UI's slider keeps that name)
        dest="max_steps",
        type=number_argument(Range(1, MAX_STEPS_LIMIT)),
        default=None,
        help=f"default turn budget, the UI's Max Steps (1-{MAX_STEPS_LIMIT}; default: the model's own, else "
        f"{DEMO_FALLBACK['max_turns']}); --max-steps is the same option",
    )
    parser.add_argument(
        "--max-tokens-per-turn",
        "--max-new-tokens",
        dest="max_new_tokens",
        type=number_argument(Range(*MAX_NEW_TOKENS_RANGE)),
        default=None,
        help=f"tokens per turn (default: the model's own, else {DEMO_FALLBACK['max_new_tokens']}); "
        "--max-new-tokens is the same option",
    )
    parser.add_argument(
        "--system-prompt-style",
        default="auto",
        choices=PROMPT_CHOICES,
        help="the default of the UI's system prompt choice (auto: the model's own, else dr-venus)",
    )
    parser.add_argument("--device", default="cpu", help="device of local models (cpu, cuda)")
    parser.add_argument(
        "--allow-any-endpoint",
        action="store_true",
        help="let users make the server contact any endpoint URL they type (default: only the "
        "configured --model endpoint and loopback addresses)",
    )
    parser.add_argument(
        "--allow-folder",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder (with what is under it) that users of an exposed demo (--host other than loopback) may name as "
        "checkpoint or world folder, besides the run folder; repeatable",
    )
    args = parser.parse_args(argv)
    defaults: DemoSettings = default_settings(
        args.run_dir,
        model=args.model,
        offline=not args.web,
        max_steps=args.max_steps,
        max_new_tokens=args.max_new_tokens,
        system_prompt_style=args.system_prompt_style,
        device=args.device,
    ).validated()
    try:
        runs_with = agent_settings(defaults, model_folder(defaults)).describe()
    except InputError as exc:  # no model in the run folder yet: the UI says so when a run starts
        runs_with = str(exc)

    from .app import launch

    print(
        f"venus-recipe demo on http://{args.host}:{args.port} (model: {defaults.model} "
        f"{defaults.checkpoint or ''}, tools: {defaults.tools}; {runs_with}); Ctrl-C to quit",
        flush=True,
    )
    launch(
        host=args.host,
        port=args.port,
        defaults=defaults,
        concurrency=args.concurrency,
        block=True,
        allow_any_endpoint=args.allow_any_endpoint,
        allow_folders=args.allow_folder,
    )


if __name__ == "__main__":
    main()
