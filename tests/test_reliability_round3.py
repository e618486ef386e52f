"""Issue 42, reliability round 3: no command deletes what it did not write, every profile is bounded, every count
and size on a command line is range-checked.  (The signals: ``tests/test_pipeline_signals.py``; the reward cells:
``tests/rl/test_reward_cell_errors.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from venus_utils.core.io import WRITTEN_MARKER, FolderNotOurs, atomic_dir, check_replaceable
from venus_utils.core.paths import REPO_ROOT
from venus_utils.core.profiles import MAX_PROFILE_VALUES, ConfigError, load_profile
from venus_utils.core.validation import QUOTE_CHARS, quote


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


# --- one rule for output folders ------------------------------------------------------------------------------------
def test_a_tool_replaces_only_a_folder_that_holds_nothing_but_what_it_wrote(tmp_path):
    out = tmp_path / "out"
    with atomic_dir(out, "a tool") as tmp:
        (tmp / "a.txt").write_text("a")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("b")
    record = json.loads((out / WRITTEN_MARKER).read_text())
    assert record["files"] == ["a.txt", "sub/b.txt"] and record["written_by"] == "a tool"
    with atomic_dir(out, "a tool") as tmp:  # its own folder, untouched since: replaced
        (tmp / "c.txt").write_text("c")
    assert sorted(p.name for p in out.iterdir()) == [WRITTEN_MARKER, "c.txt"]

    (out / "notes.txt").write_text("mine")  # a user's file added since
    with pytest.raises(FolderNotOurs, match=r"holds notes.txt, which a tool did not write there"):
        with atomic_dir(out, "a tool") as tmp:
            pytest.fail("nothing may be written before the check")
    assert (out / "notes.txt").read_text() == "mine" and (out / "c.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left behind

    other = tmp_path / "other"
    other.mkdir()
    (other / "data.csv").write_text("x")
    with pytest.raises(FolderNotOurs, match="holds data.csv"):
        check_replaceable(other, "a tool")  # no marker: nothing in it is the tool's


def test_links_and_files_on_the_path_are_one_line(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(FolderNotOurs, match=r"is a symbolic link \(to .*real\)"):
        check_replaceable(link, "a tool")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FolderNotOurs, match=r"file: is a file, not a folder"):
        check_replaceable(tmp_path / "file", "a tool")
    with pytest.raises(FolderNotOurs, match=r"file is a file, not a folder"):
        check_replaceable(tmp_path / "file" / "below", "a tool")
    check_replaceable(tmp_path / "new" / "deeper", "a tool")  # missing: fine
    (real / "inner").mkdir()
    (real / "inner" / "x.txt").write_text("x")
    (real / "dirlink").symlink_to(real / "inner")
    with pytest.raises(FolderNotOurs, match="holds dirlink"):  # a linked folder inside is listed, never followed
        check_replaceable(real, "a tool")


def test_modeling_tiny_refuses_a_folder_with_other_files_and_replaces_its_own(tmp_path):
    out = tmp_path / "m"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    r = cli("venus_utils.modeling", "tiny", "--out", str(out), "--size", "micro", "--vocab-size", "600")
    assert r.returncode == 2 and "holds thesis.tex" in r.stderr and "Traceback" not in r.stderr
    assert (out / "thesis.tex").read_text() == "keep me" and len(list(out.iterdir())) == 1
    (out / "thesis.tex").unlink()
    for _ in range(2):  # an empty folder, then its own model: both replaced
        r = cli("venus_utils.modeling", "tiny", "--out", str(out), "--size", "micro", "--vocab-size", "600")
        assert r.returncode == 0, r.stderr
    assert (out / "config.json").exists() and (out / WRITTEN_MARKER).exists()
    r = cli("venus_utils.modeling", "tiny", "--out", str(out), "--vocab-size", "-5")
    assert r.returncode == 2 and "--vocab-size: must be >= 300" in r.stderr


def test_eval_keep_never_deletes_a_file_added_to_its_folder(tmp_path):
    from venus_utils.eval import heldout as ho

    from .eval.test_heldout import _scored

    run = tmp_path / "runs" / "seed"
    (run / ho.SCORED["SFT"]).parent.mkdir(parents=True)
    _scored({"a": [1], "b": [0]}).to_parquet(run / ho.SCORED["SFT"])
    out = tmp_path / "results" / "seed"
    assert cli("venus_utils.eval", "keep", str(run), "--out", str(out)).returncode == 0
    assert cli("venus_utils.eval", "keep", str(run), "--out", str(out)).returncode == 0  # its own: replaced
    (out / "analysis.ipynb").write_text("{}")
    r = cli("venus_utils.eval", "keep", str(run), "--out", str(out))
    assert r.returncode == 2 and "holds analysis.ipynb" in r.stderr and "Traceback" not in r.stderr
    assert (out / "analysis.ipynb").exists()
    link = tmp_path / "results" / "link"
    link.symlink_to(out)
    r = cli("venus_utils.eval", "keep", str(run), "--out", str(link))
    assert r.returncode == 2 and "symbolic link" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "afile").write_text("x")
    r = cli("venus_utils.eval", "keep", str(run), "--out", str(tmp_path / "afile" / "x"))
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr and "Traceback" not in r.stderr


def test_world_build_refuses_before_generating_and_leaves_no_folder(tmp_path):
    r = cli("venus_utils.world", "build", "--out", str(tmp_path / "w"), "--n-worlds", "100000000")
    assert r.returncode == 2 and "--n-worlds: must be >= 1 and <= 256" in r.stderr
    assert not (tmp_path / "w").exists()
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "pages.csv").write_text("x")
    r = cli("venus_utils.world", "build", "--out", str(tmp_path / "w"), "--size", "tiny")
    assert r.returncode == 2 and "holds pages.csv" in r.stderr and "Traceback" not in r.stderr


# --- profiles: plain names, bounded size ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "../up", "x" * 101, "a\\b"])
def test_a_profile_name_is_a_plain_folder_name(tmp_path, name):
    path = tmp_path / "p.yaml"
    path.write_text(f"profile: {json.dumps(name)}\nseed: 1\n")
    with pytest.raises(ConfigError, match="must be a plain folder name"):
        load_profile(path)


def _timed_refusal(path: Path, text: str, says: str) -> float:
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load_profile(path)
    assert says in str(caught.value) and len(str(caught.value)) < 300
    return time.perf_counter() - t0


def test_aliases_that_expand_past_the_limit_are_refused_before_they_expand(tmp_path):
    lines = ["profile: bomb", "00_setup:", "  world_knobs:", "    a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10**9 values once expanded
    took = _timed_refusal(tmp_path / "bomb.yaml", "\n".join(lines) + "\n", f"more than {MAX_PROFILE_VALUES:,} values")
    assert took < 5  # refused while counting, not after expanding (measured: milliseconds)


def test_long_lists_deep_nesting_and_big_files_are_refused(tmp_path):
    many = "profile: big\n02_turn_aware_resampling:\n  what_if_short: [" + ", ".join(["1"] * 300_000) + "]\n"
    _timed_refusal(tmp_path / "big.yaml", many, f"more than {MAX_PROFILE_VALUES:,} values")
    deep = "profile: deep\nseed: " + "[" * 5000 + "]" * 5000 + "\n"
    _timed_refusal(tmp_path / "deep.yaml", deep, "nested more than")
    (tmp_path / "huge.yaml").write_text("profile: huge\nseed: 1\n# " + "x" * 2_000_000 + "\n")
    with pytest.raises(ConfigError, match="more than the 1,000,000 a profile may hold"):
        load_profile(tmp_path / "huge.yaml")


def test_a_refused_value_is_quoted_by_a_short_prefix():
    assert quote(list(range(10**6))) == "[0, 1, 2, 3, 4, 5, ...]" and len(quote("x" * 10**6)) <= QUOTE_CHARS
    assert quote([[[[1]]]]) == "[[[[...]]]]"


def test_a_bad_long_value_in_a_profile_is_named_in_one_short_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("profile: p\n02_turn_aware_resampling:\n  what_if_short: [" + ", ".join(['"a"'] * 5000) + "]\n")
    r = cli("venus_utils.run.pipeline", "--params", str(path), "--check")
    assert r.returncode == 1 and "what_if_short" in r.stderr and len(r.stderr) < 600, r.stderr[:600]


# --- command lines: counts and sizes range-checked up front ---------------------------------------------------------
@pytest.mark.parametrize(
    "args, says",
    [
        (
            ("venus_utils.eval", "validate", "--model", "m", "--world", "w", "--max-turns", "-1"),
            "--max-turns: must be",
        ),
        (
            ("venus_utils.eval", "validate", "--model", "m", "--world", "w", "--max-new-tokens", "-5"),
            "--max-new-tokens",
        ),
        (("venus_utils.eval", "validate", "--model", "m", "--world", "w", "--n", "0"), "--n: must be >= 1"),
        (("venus_utils.agent", "ask", "q", "--model", "m", "--max-turns", "0"), "--max-turns: must be >= 1"),
        (("venus_utils.agent", "ask", "q", "--model", "m", "--tool-timeout", "nan"), "must be a finite number"),
        (("venus_utils.data.clean", "-i", "x", "-o", "y", "--val-fraction", "1.5"), "--val-fraction: must be"),
        (("venus_utils.data.clean", "-i", "x", "-o", "y", "--workers", "-2"), "--workers: must be >= 0"),
        (("venus_utils.tools", "search", "q", "--top-k", "100000"), "--top-k: must be >= 1 and <= 100"),
        (("venus_utils.demo", "--port", "70000"), "--port: must be >= 0 and <= 65535"),
        (("venus_utils.demo", "--max-steps", "5000"), "--max-steps: must be >= 1 and <= 200"),
        (("venus_utils.world", "build", "--out", "w", "--top-k", "abc"), "expected a whole number, got 'abc'"),
    ],
)
def test_counts_and_sizes_on_command_lines_are_checked_before_anything_runs(args, says):
    r = cli(*args, timeout=60)
    assert r.returncode == 2 and says in r.stderr, r.stderr[-800:]
    assert "Traceback" not in r.stderr
