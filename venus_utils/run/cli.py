"""What the stage command lines (``python -m venus_utils.sft train``, ``python -m venus_utils.rl train``) share.

A command line runs the same stage as its notebook, with the same parameters: the lesson's values
(:mod:`venus_utils.core.defaults`, from which the notebook's ``parameters`` cell is generated) give the defaults, the
profile's shared keys and section override them (exactly what Papermill injects,
:func:`venus_utils.core.profiles.notebook_params`), and ``--set key=value`` overrides those.  The commands are plain
Python programs, so any launcher runs them unchanged::

    python -m venus_utils.sft train --params params/cpu.yaml                                  # one process
    accelerate launch --config_file params/accelerate/single_node_8gpu.yaml \\
        -m venus_utils.sft train --params params/paper.yaml                                   # 8 GPUs, DDP
    torchrun --nproc_per_node 8 -m venus_utils.sft train --params params/paper.yaml           # the same with torchrun

Every process runs the whole script; the main process (``RANK`` 0) alone writes the stage's shared files
(:mod:`venus_utils.core.distributed`).

SIGTERM and SIGINT stop a command in order (:mod:`venus_utils.core.stopping`): the processes it started end, its
locks are released, one line says how to go on, and the exit status is 128 + the signal (143, 130).

An argument that cannot be used (``--params`` naming a folder or a UTF-16 file, ``--out`` naming a file, a ``--set``
value that is not YAML) is one line naming it (:class:`UsageError`) and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ..core.defaults import STAGE_DEFAULTS, stage_defaults
from ..core.distributed import leave
from ..core.profiles import (
    ConfigError,
    DuplicateKeyError,
    Profile,
    ProfileFileError,
    ProfileTooLarge,
    check_shared_keys,
    check_values,
    load_profile,
    load_yaml,
    notebook_params,
    yaml_problem,
)
from ..core.stage import StageMissing, resolve_run_dir
from ..core.stopping import Stopped, finish_stop, stop_on_signals
from ..core.validation import quote
from .schemas import check_settings, check_stage_values


class UsageError(ConfigError):
    """A command-line argument that cannot be used; the message starts with the argument (``--params X: ...``)."""


def profile_argument(value: str | Path) -> Profile:
    """The profile that ``--params`` names; a file that cannot be read (missing, a folder, not UTF-8) is a
    :class:`UsageError` naming ``--params``, a file whose content is wrong a :class:`ConfigError`."""
    try:
        return load_profile(value)
    except ProfileFileError as exc:
        raise UsageError(f"--params {value}: {exc.problem}") from None


def folder_argument(option: str, value: str | Path, resolve: Callable[[str | Path], Path] = Path) -> Path:
    """The folder an ``option`` (``--out``, ``--run-dir``) names, made later if missing, as ``resolve`` finds it
    (``resolve_run_dir`` for a run folder); a :class:`UsageError` when it, or a folder above it, is a file."""
    path = resolve(value)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                problem = "is a file, not a folder" if folder == path else f"{folder} is a file"
                raise UsageError(f"{option} {value}: {problem}")
            break
    return path


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["max_steps=4", "base_model=null"]`` -> ``{"max_steps": 4, "base_model": None}`` (values read as YAML)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {quote(item)}: expected key=value")
        try:
            out[key.strip()] = load_yaml(value)
        except (DuplicateKeyError, ProfileTooLarge) as exc:
            raise UsageError(f"--set {quote(item)}: {exc}") from None
        except yaml.YAMLError as exc:
            raise UsageError(f"--set {quote(item)}: not valid YAML ({yaml_problem(exc)})") from None
    return out


def stage_params(
    params_path: str | Path, stage: str, sets: dict[str, Any] | None = None
) -> tuple[dict[str, Any], str]:
    """``(parameters, profile name)`` of ``stage``: the lesson's values (:mod:`venus_utils.core.defaults`, what the
    notebook's parameters cell holds) < profile < ``sets``.  Unknown keys, values of the wrong type or out of range,
    and missing local paths are errors that name the key, before anything loads."""
    profile = profile_argument(params_path)
    if stage not in STAGE_DEFAULTS:
        raise ConfigError(f"{stage}: not a stage (stages: {', '.join(STAGE_DEFAULTS)})")
    defaults_by_stage = {name: stage_defaults(name) for name in STAGE_DEFAULTS}
    check_shared_keys(profile, defaults_by_stage)
    defaults = defaults_by_stage[stage]
    params = dict(defaults)
    params.update(notebook_params(profile, stage, defaults))
    sets = sets or {}
    unknown = sorted(set(sets) - set(params))
    if unknown:
        raise ConfigError(f"--set {unknown}: not parameters of notebooks/{stage}.ipynb (known: {sorted(params)})")
    check_values(sets, defaults, "--set")
    check_settings(stage, sets, "--set")
    params.update(sets)
    check_stage_values(stage, params, f"{profile.path}: {stage}" + (f" with --set {', '.join(sets)}" if sets else ""))
    return params, profile.name


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, help="profile file, e.g. params/paper.yaml")
    p.add_argument("--run-dir", default=None, help="run folder with the earlier stages (default runs/<profile>)")
    p.add_argument("--out", default=None, help="this stage's folder (default <run-dir>/<stage>)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter of the stage (repeatable; the value is read as YAML)",
    )


def run_cli(
    name: str,
    description: str,
    train: Callable[[argparse.Namespace], Any],
    argv: list[str] | None = None,
    commands: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable]] | None = None,
) -> int:
    """``python -m venus_utils.<name> train --params ...``: parse the arguments, run ``train`` and turn the
    expected errors (bad profile, missing upstream stage, bad input) into a message and exit code 2.  ``commands``:
    more subcommands, ``name -> (help, add their own arguments, run)``, with the same common arguments."""
    parser = argparse.ArgumentParser(prog=f"python -m venus_utils.{name}", description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    add_common_arguments(sub.add_parser("train", help=f"train the {name} stage of a profile"))
    runs = {"train": train}
    for command, (text, add_arguments, run) in (commands or {}).items():
        p = sub.add_parser(command, help=text)
        add_common_arguments(p)
        add_arguments(p)
        runs[command] = run
    args = parser.parse_args(argv)
    try:
        if args.run_dir is not None:
            folder_argument("--run-dir", args.run_dir, resolve_run_dir)
        if args.out is not None:
            folder_argument("--out", args.out, lambda value: Path(value).resolve())  # Stage: from the working folder
        with stop_on_signals():
            runs[args.command](args)
    except Stopped as stop:
        ended = finish_stop(stop)
        print(
            f"{name} {args.command} stopped by {stop}: ended the {ended} process(es) it had started and released "
            "its locks; run the same command again to go on from the newest checkpoint",
            file=sys.stderr,
        )
        return 128 + stop.signum
    except (ConfigError, StageMissing, FileNotFoundError, ValueError) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    leave(0)  # a process of an ``accelerate launch`` run ends here (gloo's teardown can deadlock at exit)
    return 0
