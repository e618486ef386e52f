"""``python -m venus_utils.modeling tiny --out DIR [--size tiny] [--world DIR] [--vocab-size 2048] [--seed 0]``

The defaults of ``--size`` and ``--vocab-size`` are notebook 00's (``tiny_model_size``, ``tokenizer_vocab_size``)."""

from __future__ import annotations

import argparse
import json
import sys

from ..core.io import FolderNotOurs
from ..core.validation import SEED, Range, number_argument
from .model import SIZES, TINY_SIZE, build_tiny_model, load_metadata
from .tokenizer import VOCAB_SIZE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.modeling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tiny = sub.add_parser("tiny", help="build the tiny Qwen3 base model + tokenizer + chat template (offline)")
    tiny.add_argument(
        "--out", required=True, help="output folder (replaced if it holds nothing but a model this command wrote)"
    )
    tiny.add_argument(
        "--size",
        default=TINY_SIZE,
        choices=sorted(SIZES),
        help="model size (default: %(default)s; tiny: ~1.6M parameters)",
    )
    tiny.add_argument(
        "--world",
        default=None,
        help="world folder whose pages + trajectories train the tokenizer (default: built-in corpus)",
    )
    tiny.add_argument(
        "--vocab-size",
        type=number_argument(Range(300, 262_144)),
        default=VOCAB_SIZE,
        help="learned BPE vocabulary incl. the 256 bytes (default %(default)s)",
    )
    tiny.add_argument(
        "--max-token-length",
        type=number_argument(Range(0, 64)),
        default=4,
        help="longest BPE piece in characters; 0 = unlimited (default 4)",
    )
    tiny.add_argument(
        "--max-position-embeddings",
        type=number_argument(Range(64, 1 << 20)),
        default=8192,
        help="context length of the config (default 8192)",
    )
    tiny.add_argument("--seed", type=number_argument(SEED), default=0)
    args = parser.parse_args(argv)
    try:
        out = build_tiny_model(
            args.out,
            args.world,
            size=args.size,
            vocab_size=args.vocab_size,
            max_token_length=args.max_token_length or None,
            max_position_embeddings=args.max_position_embeddings,
            seed=args.seed,
        )
    except FolderNotOurs as exc:
        parser.error(f"--out {exc}")
    print(json.dumps({"out": str(out), **load_metadata(out)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
