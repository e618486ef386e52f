"""``python -m venus_utils.agent ask "question" --model M`` / ``run --input F --output P --model M``.

``--model`` is a local model folder (transformers) or an ``http(s)://host:port/v1`` OpenAI-compatible server
(add ``--tokenizer DIR`` for exact token ids).  ``--tools local`` (default) needs ``--world DIR``; ``--tools web``
uses Serper + Jina with the keys from the environment / ``.env``.

Inputs are checked before the model loads: a missing world folder, model or question file, a file where a
folder is expected (or the reverse), or an empty question file exits 2 with one message naming the path.

The system prompt style and the limits (``--system-prompt-style``, ``--max-turns``, ``--max-tokens-per-turn``) default
to what the model folder's ``venus_agent.json`` says (written by the SFT export and the RL save: how the model was
trained; for an http model, the ``--tokenizer`` folder's), else DR-Venus's defaults (dr-venus prompt, 200 turns x
15,000 tokens; ``--mode rl``: 8192 tokens); the settings used are printed to stderr first.

``ask`` prints the conversation to stdout as it happens (each message when it is added, then the prediction and
the termination) and, on stderr, a line before each generated turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from ..core.env import redact
from ..core.io import dumps_json
from ..core.validation import AT_LEAST_1, NON_NEGATIVE, POSITIVE, number_argument
from ..tools import make_toolbox
from . import backends
from .file_runs import question_rows, run_file
from .loop import run_agent
from .settings import add_settings_options, resolve_agent_settings


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder or http(s)://host:port/v1")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder for an http model (exact token ids)")
    p.add_argument("--served-model-name", default="model")
    p.add_argument("--tools", default="local", choices=["local", "web"])
    p.add_argument("--world", default=None, help="world folder for --tools local")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--mode", default="inference", choices=["inference", "rl"], help="DR-Venus's inference or RL loop settings"
    )
    add_settings_options(p, dr_venus_fallback=True)
    p.add_argument("--temperature", type=number_argument(NON_NEGATIVE, float), default=None)
    p.add_argument("--tool-timeout", type=number_argument(POSITIVE, float), default=150.0)


MODEL_HINT = "expected a save_pretrained model folder or an http(s)://host:port/v1 server"


def _output_file(parser: argparse.ArgumentParser, path: str | None, what: str) -> None:
    """Refuse a folder where ``what`` (a file to write) is expected; create its parent folder."""
    if path is None:
        return
    hint = "expected a .jsonl file to write, its folder created if missing"
    if Path(path).is_dir():
        parser.error(f"{what} is a folder: {path} ({hint})")
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. a file where a parent folder should be
        parser.error(f"cannot create the folder of the {what} {path}: {exc.strerror or exc} ({hint})")


def _model_paths(parser: argparse.ArgumentParser, args) -> None:
    """A local ``--model`` is a folder with ``config.json``; ``--tokenizer`` is a folder (never a Hub download)."""
    if not args.model.startswith(("http://", "https://")):
        model = Path(args.model)
        if not model.exists():
            parser.error(f"model folder not found: {model} ({MODEL_HINT})")
        if not model.is_dir():
            parser.error(f"not a model folder: {model} is a file ({MODEL_HINT})")
        if not (model / "config.json").is_file():
            parser.error(f"not a model folder: {model} has no config.json ({MODEL_HINT})")
    if args.tokenizer and not Path(args.tokenizer).is_dir():
        parser.error(
            f"tokenizer folder not found: {args.tokenizer} (expected the folder of the model's tokenizer, "
            "e.g. its save_pretrained folder)"
        )


def _setup(parser: argparse.ArgumentParser, args):
    """``(backend, tools, cfg, questions)``, every path checked before the model loads; a bad input ends in
    ``parser.error`` (one message, exit 2)."""
    if args.tools == "local" and not args.world:
        parser.error("--tools local needs --world DIR (build one with `python -m venus_utils.world build --out DIR`)")
    questions = None
    if args.command == "ask" and not args.question.strip():
        parser.error("the question is empty")
    if args.command == "run":
        try:
            questions = question_rows(args.input)
        except (OSError, ValueError) as exc:  # missing, a folder, empty, unreadable or without a question column
            parser.error(str(exc))
    _model_paths(parser, args)
    _output_file(parser, getattr(args, "output", None), "output")
    _output_file(parser, getattr(args, "trace", None), "trace")
    try:
        settings = resolve_agent_settings(
            args.model,
            tokenizer=args.tokenizer,
            mode=args.mode,
            system_prompt_style=args.system_prompt_style,
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
        )
    except ValueError as exc:  # a malformed venus_agent.json in the model folder, or a limit below 1
        parser.error(str(exc))
    cfg = settings.config(**({"temperature": args.temperature} if args.temperature is not None else {}))
    print(f"[agent] {args.model}: {settings.describe()}", file=sys.stderr, flush=True)
    try:
        tools = make_toolbox(args.tools, world_dir=args.world, timeout=args.tool_timeout)
    except (OSError, ValueError) as exc:  # a missing or malformed world folder
        parser.error(str(exc))
    try:
        backend = backends.load_backend(
            args.model, device=args.device, served_model_name=args.served_model_name, tokenizer=args.tokenizer
        )
    except (OSError, ValueError) as exc:  # e.g. a model folder without weights or tokenizer files
        detail = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        parser.error(f"cannot load the model {args.model}: {detail} ({MODEL_HINT})")
    return backend, tools, cfg, questions


def _printer(cfg):
    """``run_agent``'s ``on_event`` for ``ask``: each message (but the system prompt) to stdout when it is added, a
    line on stderr before each generated turn, both flushed at once."""

    def on_event(event: dict) -> None:
        if event["event"] == "generate":
            forced = f" (forced to answer: {event['forced']})" if event["forced"] else ""
            print(
                f"[agent] turn {event['step'] + 1}/{cfg.max_turns}: generating, at most {cfg.max_new_tokens} new "
                f"tokens{forced}...",
                file=sys.stderr,
                flush=True,
            )
        elif event["message"]["role"] != "system":
            msg = event["message"]
            print(f"--- {msg['role']} ---\n{redact(msg['content'])}\n", flush=True)

    return on_event


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m venus_utils.agent", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="research one question and print the trajectory")
    ask.add_argument("question")
    ask.add_argument("--trace", default=None, help="also write the full trace (JSONL, with token ids) here")
    _common(ask)
    run = sub.add_parser("run", help="answer a question file (resumable)")
    run.add_argument("--input", required=True)
    run.add_argument("--output", required=True)
    run.add_argument("--samples", type=number_argument(AT_LEAST_1), default=1, help="rollouts per question")
    run.add_argument("--workers", type=number_argument(AT_LEAST_1), default=4, help="concurrent rollouts")
    run.add_argument("--limit", type=number_argument(AT_LEAST_1), default=None, help="only the first N questions")
    run.add_argument("--token-ids", action="store_true", help="store prompt/completion ids and the mask")
    _common(run)
    args = parser.parse_args(argv)
    backend, tools, cfg, questions = _setup(parser, args)
    if args.command == "ask":
        rollout = asyncio.run(run_agent(args.question, backend, tools, cfg, on_event=_printer(cfg)))
        print(
            f"=== prediction: {rollout.prediction}\n=== termination: {rollout.termination}, turns {rollout.turns}, "
            f"tool calls {rollout.tool_call_count}, {rollout.elapsed_seconds:.1f} s"
        )
        if args.trace:
            with open(args.trace, "a", encoding="utf-8") as fh:
                fh.write(dumps_json(rollout.to_dict(), indent=None) + "\n")
        if rollout.termination in ("llm_error", "exception"):  # no answer because the model could not be asked
            reason = (rollout.error or "no reason given").splitlines()[0]
            print(f"[agent] error: the model at {redact(args.model)} failed: {redact(reason)}", file=sys.stderr)
            return 1
        return 0

    summary = run_file(
        questions,
        args.output,
        backend,
        tools,
        cfg,
        samples=args.samples,
        workers=args.workers,
        limit=args.limit,
        token_ids=args.token_ids,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
