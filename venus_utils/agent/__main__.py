"""``python -m venus_utils.agent ask "question" --model M`` / ``run --input F --output P --model M``.

``--model`` is a local model folder (transformers) or an ``http(s)://host:port/v1`` OpenAI-compatible server
(add ``--tokenizer DIR`` for exact token ids).  ``--tools local`` (default) needs ``--world DIR``; ``--tools web``
uses Serper + Jina with the keys from the environment / ``.env``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from ..env import redact


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder or http(s)://host:port/v1")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder for an http model (exact token ids)")
    p.add_argument("--served-model-name", default="model")
    p.add_argument("--tools", default="local", choices=["local", "web"])
    p.add_argument("--world", default=None, help="world folder for --tools local")
    p.add_argument("--device", default="cpu")
    p.add_argument("--mode", default="inference", choices=["inference", "rl"], help="DR-Venus's inference or RL loop settings")
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--tool-timeout", type=float, default=150.0)
    p.add_argument("--system-prompt-style", default="dr-venus", choices=["dr-venus", "compact"],
                   help="the system prompt the model was trained with (compact: the offline profiles)")


def _setup(args):
    from ..tools import make_toolbox
    from .backends import load_backend
    from .loop import AgentConfig

    if args.tools == "local" and not args.world:
        raise SystemExit("--tools local needs --world DIR (build one with `python -m venus_utils.world build --out DIR`)")
    overrides = {k: v for k, v in {"max_turns": args.max_turns, "max_new_tokens": args.max_new_tokens,
                                   "temperature": args.temperature}.items() if v is not None}
    overrides["system_prompt_style"] = args.system_prompt_style
    cfg = AgentConfig.rl(**overrides) if args.mode == "rl" else AgentConfig(**overrides)
    tools = make_toolbox(args.tools, world_dir=args.world, timeout=args.tool_timeout)
    backend = load_backend(args.model, device=args.device, served_model_name=args.served_model_name, tokenizer=args.tokenizer)
    return backend, tools, cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.agent", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="research one question and print the trajectory")
    ask.add_argument("question")
    ask.add_argument("--trace", default=None, help="also write the full trace (JSONL, with token ids) here")
    _common(ask)
    run = sub.add_parser("run", help="answer a question file (resumable)")
    run.add_argument("--input", required=True)
    run.add_argument("--output", required=True)
    run.add_argument("--samples", type=int, default=1, help="rollouts per question")
    run.add_argument("--workers", type=int, default=4, help="concurrent rollouts")
    run.add_argument("--limit", type=int, default=None, help="only the first N questions")
    run.add_argument("--token-ids", action="store_true", help="store prompt/completion ids and the mask")
    _common(run)
    args = parser.parse_args(argv)
    backend, tools, cfg = _setup(args)
    if args.command == "ask":
        from ..io import dumps_json
        from .loop import run_agent

        rollout = asyncio.run(run_agent(args.question, backend, tools, cfg))
        for msg in rollout.messages[1:]:
            print(f"--- {msg['role']} ---\n{redact(msg['content'])}\n")
        print(f"=== prediction: {rollout.prediction}\n=== termination: {rollout.termination}, turns {rollout.turns}, "
              f"tool calls {rollout.tool_call_count}, {rollout.elapsed_seconds:.1f} s")
        if args.trace:
            with open(args.trace, "a", encoding="utf-8") as fh:
                fh.write(dumps_json(rollout.to_dict(), indent=None) + "\n")
        return 0
    from .runner import run_file

    summary = run_file(args.input, args.output, backend, tools, cfg, samples=args.samples, workers=args.workers,
                       limit=args.limit, token_ids=args.token_ids)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
