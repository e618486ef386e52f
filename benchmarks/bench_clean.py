"""Throughput of the trajectory cleaner against a straightforward single-process baseline, in one run.

    python benchmarks/bench_clean.py [--rows 2000] [--workers 2] [--reference-script PATH] [--strict]

Builds a synthetic raw REDSearcher set (realistic sizes: ~25 turns of ~1 KB reasoning, Serper-style search
texts, visit summaries; every defect at a few %), then cleans it in ``--compat reference`` mode twice:

- baseline: what DR-Venus's ``prepare_trajectories.py`` does, with the same rules — each file read whole with
  pandas, rows turned into dicts with ``to_dict("records")``, tool calls parsed with json5 (once per stage),
  the surrogate fix re-encoding every string, one process, the output assembled in a pandas DataFrame;
- cleaner: ``venus_utils.data.clean`` (worker processes, orjson-first parsing, parsed calls memoised, streamed
  Arrow parts, no per-row pandas work).

It prints trajectories per second, the ratio, the peak resident memory of each (process tree, sampled) and
checks that both outputs are identical (rows, message texts, stats counts).  ``--reference-script`` also times
a local copy of DR-Venus's script as a subprocess and checks it against the cleaner.  The target is >= 4x on
2 cores.  Numbers depend on the machine's load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from venus_utils.core import protocol  # noqa: E402
from venus_utils.data import rules, synthetic  # noqa: E402
from venus_utils.data.clean import CleanConfig, diff_outputs, run_clean  # noqa: E402
from venus_utils.data.resample import ResamplePolicy, bucket_stats  # noqa: E402


class PeakMemory:
    """Samples the resident memory of this process and its children every 50 ms."""

    def __init__(self, pid: int | None = None):
        import psutil

        self.proc = psutil.Process(pid or os.getpid())
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def _surrogate_fix_plain(text):
    if isinstance(text, str):
        try:
            return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except Exception:
            return text.encode("utf-8", "ignore").decode("utf-8")
    return text


def _plain(value):
    """numpy arrays from pandas -> lists, as DR-Venus's to_list does."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _calls_plain(content, memo=None):
    """The tool calls of a turn, re-parsed at every stage, json then json5, as DR-Venus does."""
    import json5

    found = []
    for match in rules.TOOL_CALL_RE.finditer(content if isinstance(content, str) else ""):
        text = match.group(1).strip().split("<code>")[0].strip()
        try:
            obj = json.loads(text)
        except ValueError:
            try:
                obj = json5.loads(text)
            except Exception:
                continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def _resampled(stage2: list[dict], policy: ResamplePolicy, out_dir: Path):
    """The valid rows repeated by their turn bucket's multiplier, written as ``cleaned_resampled.parquet``."""
    import pandas as pd

    records = []
    for rec in pd.DataFrame(stage2).to_dict("records"):
        for _ in range(policy.multiplier(int(rec["_turns"]))):
            records.append(dict(rec))
    final = pd.DataFrame(records)
    final["messages"] = final["messages"].apply(rules.deep_fix)
    out_dir.mkdir(parents=True, exist_ok=True)
    final[["question", "messages", "gt"]].to_parquet(out_dir / "cleaned_resampled.parquet", index=False)
    return final


def baseline(input_dir: Path, out_dir: Path, current_date: str | None) -> dict:
    """The straightforward implementation: DR-Venus's approach with this project's rules."""
    import json5
    import pandas as pd

    saved = rules.loads_tolerant, rules.tool_calls_in, rules.fix_surrogates
    rules.loads_tolerant = json5.loads  # what DR-Venus parses a tool turn with
    rules.tool_calls_in = _calls_plain
    rules.fix_surrogates = _surrogate_fix_plain
    try:
        opts = rules.RuleOptions("reference", "template", protocol.system_prompt(current_date))
        stage1, stage2, dropped, tools, per_file = [], [], Counter(), Counter(), {}
        pruned = Counter()
        duplicates = 0
        files = sorted(input_dir.glob("train-*.parquet"))
        for path in files:
            df = pd.read_parquet(path)
            f = {
                "source_rows": len(df),
                "stage1_rows": 0,
                "stage2_rows": 0,
                "dropped": Counter(),
                "pruned_tool_turns_removed": 0,
                "pruned_tool_response_turns_removed": 0,
                "duplicate_tool_turns_removed": 0,
            }
            for _i, row in enumerate(df.to_dict("records")):
                out = rules.clean_row(_plain(row), opts)
                if out.stage1 is not None:
                    f["stage1_rows"] += 1
                    stage1.append(
                        {"question": out.question, "messages": out.stage1, "gt": out.gt}
                    )  # kept, as DR-Venus does
                    pruned["turns"] += out.pruned_turns
                    pruned["responses"] += out.pruned_responses
                    pruned.update(f"tool:{n}" for n in out.pruned_names)
                    duplicates += out.duplicates
                    f["pruned_tool_turns_removed"] += out.pruned_turns
                    f["pruned_tool_response_turns_removed"] += out.pruned_responses
                    f["duplicate_tool_turns_removed"] += out.duplicates
                if out.reason:
                    dropped[out.reason] += 1
                    f["dropped"][out.reason] += 1
                    continue
                f["stage2_rows"] += 1
                tools.update(out.tool_names)
                stage2.append(
                    {
                        "question": out.question,
                        "messages": out.messages,
                        "gt": out.gt,
                        "_turns": rules.turns_of(out.messages),
                    }
                )
            f["dropped"] = dict(f["dropped"])
            per_file[path.name] = f
        policy = ResamplePolicy()
        final = _resampled(stage2, policy, out_dir)
        stats = {
            "system_prompt_mode": "template",
            "allowed_tools": ["search", "visit"],
            "turn_formula": "(len(messages) - 1) / 2",
            "resample_policy": policy.as_dict(),
            "rows": {
                "source": sum(f["source_rows"] for f in per_file.values()),
                "stage1_normalized": sum(f["stage1_rows"] for f in per_file.values()),
                "stage2_valid": len(stage2),
                "final_resampled": len(final),
            },
            "pruned_tool_turns_removed": pruned["turns"],
            "pruned_tool_response_turns_removed": pruned["responses"],
            "pruned_tool_name_counts": {k[5:]: v for k, v in pruned.items() if k.startswith("tool:")},
            "duplicate_tool_turns_removed": duplicates,
            "drop_reasons": dict(dropped),
            "tools_after_cleaning": dict(tools),
            **bucket_stats([r["_turns"] for r in stage2], policy),
            "per_file": per_file,
        }
        (out_dir / "stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=2), encoding="utf-8")
        return stats
    finally:
        rules.loads_tolerant, rules.tool_calls_in, rules.fix_surrogates = saved


def _child(kind: str, raw: Path, out: Path, workers: int) -> None:
    """Run one contender in this (fresh) process."""
    if kind == "baseline":
        baseline(raw, out, "2026-03-01")
    else:
        run_clean(
            CleanConfig(
                input=raw,
                output_dir=out,
                compat="strict" if kind == "strict" else "reference",
                current_date="2026-03-01",
                workers=workers,
                judge="offline",
                progress=False,
            )
        )


def _measure(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB, process tree) of a fresh subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    with PeakMemory(proc.pid) as mem:
        code = proc.wait()
    if code:
        raise SystemExit(f"{cmd} failed with exit code {code}")
    return time.perf_counter() - t0, mem.peak / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2000, help="synthetic raw trajectories (default 2000)")
    p.add_argument("--workers", type=int, default=2, help="cleaner worker processes (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None, help="keep the data and outputs here (default: a temp folder)")
    p.add_argument(
        "--reference-script", default=None, help="a local copy of DR-Venus's prepare_trajectories.py to time too"
    )
    p.add_argument("--strict", action="store_true", help="also time the cleaner in strict mode (offline judge)")
    p.add_argument("--child", nargs=3, metavar=("KIND", "RAW", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]), args.workers)
        return 0

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_clean_"))
    raw = work / "raw"
    print(f"load average before: {os.getloadavg()}  cores: {os.cpu_count()}")
    t0 = time.perf_counter()
    if not raw.exists():
        synthetic.write_raw_shards(raw, args.rows, seed=args.seed, rows_per_file=500, row_group_rows=50)
    n_rows = sum(__import__("pyarrow.parquet").parquet.ParquetFile(f).metadata.num_rows for f in raw.glob("*.parquet"))
    size_mb = sum(f.stat().st_size for f in raw.glob("*.parquet")) / 2**20
    print(
        f"synthetic raw set: {n_rows} trajectories, {size_mb:.0f} MB parquet "
        f"({time.perf_counter() - t0:.1f}s) in {raw}"
    )

    me = [sys.executable, str(Path(__file__).resolve()), "--workers", str(args.workers), "--child"]
    results = {
        "baseline (1 process)": _measure(me + ["baseline", str(raw), str(work / "baseline")]),
        f"cleaner ({args.workers} workers)": _measure(me + ["reference", str(raw), str(work / "cleaner")]),
    }
    diffs = diff_outputs(work / "baseline", work / "cleaner")
    if args.reference_script:
        cmd = [
            sys.executable,
            args.reference_script,
            "-i",
            str(raw),
            "-o",
            str(work / "dr_venus"),
            "--current-date",
            "2026-03-01",
        ]
        results["DR-Venus script"] = _measure(cmd)
        ref_diffs = diff_outputs(work / "dr_venus", work / "cleaner")
        print(f"cleaner vs DR-Venus script: {'identical' if not ref_diffs else ref_diffs}")
    if args.strict:
        results[f"cleaner strict ({args.workers} workers)"] = _measure(me + ["strict", str(raw), str(work / "strict")])

    base = results["baseline (1 process)"][0]
    print(f"\n{'run (fresh process each)':<32}{'seconds':>10}{'traj/s':>10}{'vs baseline':>13}{'peak MB':>10}")
    for name, (secs, peak) in results.items():
        print(f"{name:<32}{secs:>10.1f}{n_rows / secs:>10.1f}{base / secs:>12.2f}x{peak:>10.0f}")
    print(
        f"\noutputs identical (rows, message texts, stats counts): {'yes' if not diffs else 'NO: ' + '; '.join(diffs)}"
    )
    print(f"load average after: {os.getloadavg()}")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
