r"""Run the numbered notebooks in order with Papermill.

    python -m venus_utils.run.pipeline --params params/smoke.yaml [--out runs/smoke] [--only 01,03] \
        [--resume] [--check]

Each notebook ``notebooks/NN_stage.ipynb`` is executed into ``<out>/NN_stage/NN_stage.ipynb`` with the
parameters of its profile section (see :mod:`venus_utils.core.profiles`) plus ``run_dir``, ``stage_dir`` and
``profile``.  The run stops at the first failing notebook, naming the notebook and the cell.  With
``--resume`` a stage is skipped when its ``summary.json`` is newer than the notebook, the profile file and
every earlier stage's summary, and its parameters are unchanged.  Every value of every section is checked before
the first notebook starts (:func:`venus_utils.run.schemas.check_profile`); ``--check`` does only that.

A run holds its run folder and the folders of the stages it runs (:mod:`venus_utils.core.locks`) before it deletes
anything: a second pipeline on the same folder, or a stage it runs started by hand meanwhile, is refused at once with
the holder's pid (:class:`RunFolderInUse`).  The notebooks' kernels share the pipeline's locks.

SIGTERM and SIGINT (Ctrl-C) stop a run in order (:class:`Stopped`): every process it started ends (the notebook's
kernel and what the kernel started, process pools and their helpers included: :func:`end_processes`), the locks are
released, one line says what stopped and how to go on, and the exit status is 128 + the signal (143, 130).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm.auto import tqdm

from ..core.io import atomic_write, write_json
from ..core.locks import FolderInUse, release, take
from ..core.paths import NOTEBOOKS_DIR
from ..core.profiles import (
    ConfigError,
    Profile,
    discover_notebooks,
    load_profile,
    notebook_defaults,
)
from ..core.progress import ProgressWatcher
from ..core.stage import RUN_PROFILE, SUMMARY, resolve_run_dir
from ..core.stopping import Stopped, finish_stop, stop_on_signals
from .cli import UsageError, folder_argument, profile_argument
from .schemas import check_profile

PARAMS_RECORD = ".params.json"


class StageFailed(RuntimeError):
    """A notebook raised; the message names the notebook, the cell and the error."""


class RunFolderInUse(ConfigError, FolderInUse):
    """Another live run holds the run folder or one of the stage folders; the message names its pid."""


@contextlib.contextmanager
def _holding(run_dir: Path, stage_dirs: list[Path]):
    """Hold ``run_dir`` and the existing ones of ``stage_dirs`` for this run (:func:`venus_utils.core.locks.take`);
    yields ``hold(stage_dir)``, which holds a stage folder before the stage runs (one that did not exist yet: a
    stage folder is made only when the stage runs, and nobody can hold a folder that does not exist)."""
    hint = "or run this one in another run folder (--out)"
    with contextlib.ExitStack() as stack:

        def hold(folder: Path) -> None:
            try:
                lock, new = take(folder, "pipeline run", hint=hint, log=tqdm.write)
            except FolderInUse as exc:
                raise RunFolderInUse(str(exc), exc.holder) from None
            if new:
                stack.callback(release, lock)

        for folder in (run_dir, *(d for d in stage_dirs if d.is_dir())):
            hold(folder)
        yield hold


@dataclass
class StageResult:
    stage: str
    status: str  # "ran" | "skipped"
    seconds: float
    output: Path


def select(notebooks: list[Path], only: str | None, profile: Profile | None = None) -> list[Path]:
    """The notebooks to run: those ``only`` names (``--only 3,4``), else those the profile's ``stages:`` names, else
    all of them."""
    if only:
        wanted, source = [w.strip() for w in only.split(",") if w.strip()], "--only"
    elif profile is not None and profile.stages is not None:
        wanted, source = profile.stages, f"{profile.path}: stages"
    else:
        return notebooks
    chosen = [nb for nb in notebooks if any(nb.stem == w or nb.stem[:2] == w.zfill(2) for w in wanted)]
    missing = [w for w in wanted if not any(nb.stem == w or nb.stem[:2] == w.zfill(2) for nb in notebooks)]
    if missing:
        raise ConfigError(f"{source} names unknown stages {missing}; available: {[nb.stem for nb in notebooks]}")
    return chosen


def _params_digest(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


def is_up_to_date(
    stage_dir: Path, notebook: Path, profile_files: list[Path], earlier: list[Path], params: dict
) -> bool:
    """True when the stage's outputs are newer than its inputs (the notebook, the profile's files, its base's
    included, the earlier stages' summaries) and were made with the same parameters."""
    summary = stage_dir / SUMMARY
    record = stage_dir / PARAMS_RECORD
    if not summary.exists() or not record.exists():
        return False
    try:
        if json.loads(record.read_text())["digest"] != _params_digest(params):
            return False
    except (ValueError, KeyError):
        return False
    made = summary.stat().st_mtime
    inputs = [notebook, *profile_files] + [d / SUMMARY for d in earlier if (d / SUMMARY).exists()]
    return all(made >= p.stat().st_mtime for p in inputs)


PAPERMILL_CELLS = {"injected-parameters", "papermill-error-cell-tag"}


def _failure_message(notebook: Path, output: Path, exc: Exception) -> str:
    """Name the notebook, the failing cell (numbered as in the notebook the user edits: Papermill's injected and
    error-banner cells are not counted) with its first line, and the error."""
    exec_count = getattr(exc, "exec_count", None)
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    cell, source = None, ""
    try:
        import nbformat

        nb = nbformat.read(output, as_version=4)
        own = [c for c in nb.cells if not PAPERMILL_CELLS & set(c.metadata.get("tags", []))]
        for index, c in enumerate(own):
            if any(o.get("output_type") == "error" for o in c.get("outputs", [])):
                cell, source = index, c.source.strip().splitlines()[0][:100] if c.source.strip() else ""
                break
    except Exception:  # the output notebook may not exist if the kernel never started
        pass
    where = f"cell {cell}" if cell is not None else "an unknown cell"
    if exec_count is not None:
        where += f" (execution count {exec_count})"
    if source:
        where += f", starting `{source}`"
    return f"notebook {notebook.name} failed in {where}: {ename}: {evalue}\n  executed notebook: {output}"


def run_pipeline(
    params_path: str | Path,
    out: str | Path | None = None,
    only: str | None = None,
    resume: bool = False,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    kernel_name: str = "python3",
    progress: bool = True,
    log_output: bool = False,
    seed: int | None = None,
) -> list[StageResult]:
    """Run the profile's notebooks in order (``only``: some of them; ``resume``: skip the up-to-date ones) into
    ``out`` (default ``runs/<profile>``). ``seed``: the profile with this seed instead of its own, as the profile
    ``<profile>-seed<seed>`` (its run folder by default; the run's ``profile.yaml`` records both)."""
    profile: Profile = load_profile(params_path)
    # the profile as written, or with every inherited value where it has a base (the run's record stands alone)
    text = profile.resolved_text().encode() if profile.bases else Path(params_path).read_bytes()
    if seed is not None:
        profile, text = with_seed(profile, text.decode("utf-8"), seed)
    run_dir = resolve_run_dir(out or f"runs/{profile.name}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    all_notebooks = discover_notebooks(notebooks_dir)
    if not all_notebooks:
        raise ConfigError(f"no numbered notebooks found in {notebooks_dir}")
    chosen = select(all_notebooks, only, profile)

    # Resolve and check every value of every section (keys, types, ranges, choices; local paths of the stages that
    # run) before running anything, so a typo fails in seconds, not after an hour of training.
    defaults_by_stage = {nb.stem: notebook_defaults(nb) for nb in all_notebooks}
    params_by_stage = check_profile(profile, defaults_by_stage, paths_for={nb.stem for nb in chosen})
    plans = []
    for nb in chosen:
        defaults = defaults_by_stage[nb.stem]
        params = params_by_stage[nb.stem]
        stage_dir = run_dir / nb.stem
        injected = {"run_dir": str(run_dir), "stage_dir": str(stage_dir), "profile": profile.name}
        params.update({k: v for k, v in injected.items() if k in defaults})
        plans.append((nb, stage_dir, params))

    # Held before anything is deleted: a second run on this folder is refused here, at once.
    with _holding(run_dir, [stage_dir for _, stage_dir, _ in plans]) as hold:
        # the profile as this run read it, beside its stages (``eval keep`` keeps it with the results)
        atomic_write(run_dir / RUN_PROFILE, text)
        bar = tqdm(plans, desc=f"pipeline [{profile.name}]", unit="stage", disable=not progress)
        # the running stage's own count (SFT / RL steps, questions answered) beside it on the bar, read from a file
        # its kernel writes (venus_utils.core.progress)
        watcher = ProgressWatcher(bar.set_postfix_str) if progress else None
        with watcher or contextlib.nullcontext():
            results = _run_stages(
                plans,
                bar,
                watcher,
                run_dir,
                all_notebooks,
                [profile.path, *profile.bases],
                resume,
                hold,
                kernel_name,
                log_output,
            )
        for stale in stale_stages(run_dir, all_notebooks, results):
            tqdm.write(
                f"[stale] {stale}: made from earlier outputs that this run replaced; rerun it "
                f"(--only {stale[:2]}, or --resume without --only)"
            )
        return results


def _run_stages(plans, bar, watcher, run_dir, all_notebooks, profile_files, resume, hold, kernel_name, log_output):
    """Each planned notebook of ``bar`` in turn (skipped where ``resume`` finds it up to date); the results."""
    import papermill

    results: list[StageResult] = []
    for nb, stage_dir, params in bar:
        if watcher is not None:
            watcher.start_stage(nb.stem)
        else:
            bar.set_postfix_str(nb.stem)
        earlier = [run_dir / other.stem for other in all_notebooks if other.stem < nb.stem]
        output = stage_dir / nb.name
        if resume and is_up_to_date(stage_dir, nb, profile_files, earlier, params):
            results.append(StageResult(nb.stem, "skipped", 0.0, output))
            tqdm.write(f"[skip] {nb.stem}: outputs are up to date")
            continue
        hold(stage_dir)  # makes it; the notebook's kernel shares the lock
        # A stale summary must not survive a failed re-run.
        (stage_dir / SUMMARY).unlink(missing_ok=True)
        (stage_dir / PARAMS_RECORD).unlink(missing_ok=True)
        t0 = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(nb),
                str(output),
                parameters=params,
                kernel_name=kernel_name,
                cwd=str(stage_dir),
                progress_bar=False,
                log_output=log_output,
            )
        except Exception as exc:  # PapermillExecutionError and kernel start-up failures alike
            raise StageFailed(_failure_message(nb, output, exc)) from exc
        if not (stage_dir / SUMMARY).exists():
            raise StageFailed(f"notebook {nb.name} ran but wrote no {SUMMARY} in {stage_dir} (call stage.finish())")
        write_json(stage_dir / PARAMS_RECORD, {"digest": _params_digest(params), "params": params})
        seconds = time.perf_counter() - t0
        results.append(StageResult(nb.stem, "ran", seconds, output))
        tqdm.write(f"[done] {nb.stem} in {seconds:.1f}s -> {stage_dir}")
    return results


def with_seed(profile: Profile, text: str, seed: int) -> tuple[Profile, bytes]:
    """``profile`` (and its file's ``text``) with ``seed`` as its seed, named ``<name>-seed<seed>``: the top-level
    ``profile:`` and ``seed:`` lines are replaced (added where absent), every other line kept as written."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"--seed {seed!r}: expected a whole number >= 0")
    name = f"{profile.name}-seed{seed}"
    lines, found = text.splitlines(), set()
    for i, line in enumerate(lines):
        for key, value in (("profile", name), ("seed", seed)):
            if line.startswith(f"{key}:"):
                lines[i] = f"{key}: {value}  # --seed {seed} (the profile file says otherwise)"
                found.add(key)
    lines += [
        f"{key}: {value}  # --seed {seed}" for key, value in (("profile", name), ("seed", seed)) if key not in found
    ]
    return replace(profile, name=name, shared={**profile.shared, "seed": seed}), ("\n".join(lines) + "\n").encode()


def stale_stages(run_dir: Path, notebooks: list[Path], results: list[StageResult]) -> list[str]:
    """Finished stages that did not run now but come after one that did (``--only``): their outputs were made
    from what that stage has just replaced."""
    ran = [r.stage for r in results if r.status == "ran"]
    if not ran:
        return []
    done = {r.stage for r in results}
    return [
        nb.stem
        for nb in notebooks
        if nb.stem > ran[0] and nb.stem not in done and (run_dir / nb.stem / SUMMARY).exists()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.run.pipeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", required=True, help="profile YAML, e.g. params/smoke.yaml")
    parser.add_argument("--out", default=None, help="run folder (default runs/<profile>)")
    parser.add_argument("--only", default=None, help="comma-separated stage numbers or names, e.g. 01,03")
    parser.add_argument("--resume", action="store_true", help="skip stages whose outputs are up to date")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="run the profile with this seed instead (run folder runs/<profile>-seed<N>)",
    )
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument("--log-output", action="store_true", help="stream notebook output to this terminal")
    parser.add_argument(
        "--check", action="store_true", help="check every setting of every section of the profile, run nothing"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # An argument that cannot be used is one line naming it (exit 2); a profile whose content is wrong stops the
    # pipeline (exit 1); neither is a traceback.
    try:
        profile = profile_argument(args.params)
        if args.seed is not None:
            profile, _ = with_seed(profile, "", args.seed)
        if args.out is not None:
            folder_argument("--out", args.out, resolve_run_dir)
        else:
            folder_argument("run folder", f"runs/{profile.name}", resolve_run_dir)
        if args.check:
            notebooks = discover_notebooks()
            chosen = {nb.stem for nb in select(notebooks, args.only, profile)}
            check_profile(profile, {nb.stem: notebook_defaults(nb) for nb in notebooks}, paths_for=chosen)
            print(profile.resolved_text())
            print(f"{args.params}: every setting of every section is valid ({len(notebooks)} notebooks); nothing ran")
            return 0
        with stop_on_signals():
            results = run_pipeline(
                args.params,
                args.out,
                args.only,
                args.resume,
                kernel_name=args.kernel,
                log_output=args.log_output,
                seed=args.seed,
            )
    except Stopped as stop:
        ended = finish_stop(stop)
        # the notebook client's cell task, cut off by the signal, would be reported at exit as "never retrieved"
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        print(
            f"pipeline stopped by {stop}: ended the {ended} process(es) it had started and released its locks; "
            f"run the same command with --resume to go on from the last finished stage",
            file=sys.stderr,
        )
        return 128 + stop.signum
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except (ConfigError, StageFailed) as exc:
        print(f"pipeline stopped: {exc}", file=sys.stderr)
        return 1
    ran = sum(r.status == "ran" for r in results)
    print(f"pipeline finished: {ran} stage(s) ran, {len(results) - ran} skipped")
    run_dir = resolve_run_dir(args.out or f"runs/{profile.name}").resolve()
    stale = stale_stages(run_dir, discover_notebooks(), results)
    if stale:
        print(f"stale stages (made from outputs this run replaced): {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
