"""``python -m venus_utils.demo [--port P] [--host H] [--allow-any-endpoint]``: the web demo on the offline default.

It binds 127.0.0.1 (this machine only) unless ``--host`` says otherwise (``--host 0.0.0.0`` shares it on
the network: anyone who can reach the port can run the agent; the demo has no authentication and prints a
warning).  Endpoint URLs typed in the UI ("Check service", an endpoint model, a summary model) are contacted
only when they are the configured ``--model`` endpoint or a loopback address, unless ``--allow-any-endpoint``.
Defaults come from a profile's run folder: the offline world of ``runs/<profile>/00_setup/world`` and the
best model there (RL > SFT > tiny base).
"""

from __future__ import annotations

import argparse

from .runner import MAX_STEPS_LIMIT, DemoSettings, default_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, local only)")
    parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    parser.add_argument("--run-dir", default="runs/smoke", help="run folder with the world and models (default runs/smoke)")
    parser.add_argument("--concurrency", type=int, default=2, help="runs at the same time; more users wait in a queue")
    parser.add_argument("--model", default="auto",
                        help="auto (the run's best model: RL > SFT > base), a model folder, or http(s)://host:port/v1")
    parser.add_argument("--web", action="store_true", help="default to the web tools (Serper + Jina) instead of the world")
    parser.add_argument("--max-steps", type=int, default=20, help=f"default turn budget (1-{MAX_STEPS_LIMIT})")
    parser.add_argument("--max-new-tokens", type=int, default=2048, help="tokens per turn (default 2048)")
    parser.add_argument("--device", default="cpu", help="device of local models (cpu, cuda)")
    parser.add_argument("--allow-any-endpoint", action="store_true",
                        help="let users make the server contact any endpoint URL they type (default: only the "
                             "configured --model endpoint and loopback addresses)")
    args = parser.parse_args(argv)
    defaults: DemoSettings = default_settings(args.run_dir, model=args.model, offline=not args.web,
                                              max_steps=args.max_steps, max_new_tokens=args.max_new_tokens,
                                              device=args.device).validated()

    from .app import launch

    print(f"venus-recipe demo on http://{args.host}:{args.port} (model: {defaults.model} "
          f"{defaults.checkpoint or ''}, tools: {defaults.tools}); Ctrl-C to quit", flush=True)
    launch(host=args.host, port=args.port, defaults=defaults, concurrency=args.concurrency, block=True,
           allow_any_endpoint=args.allow_any_endpoint)


if __name__ == "__main__":
    main()
