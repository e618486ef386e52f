"""The tools and world CLIs refuse a missing or misplaced path with exit status 2 and one message that names
the path and what it should be (no traceback)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from venus_utils.tools.__main__ import main as tools_main
from venus_utils.world.__main__ import main as world_main


def usage_error(main, argv, capsys) -> str:
    """The message of ``main(argv)``'s exit 2 (its last stderr line), after checking there is no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


TOOL_CALLS = {
    "search": ["search", "Some Name"],
    "search --raw": ["search", "Some Name", "--raw"],
    "visit": ["visit", "https://wiki.venus/Some_Name", "--goal", "Find where he was born."],
}


@pytest.mark.parametrize("call", sorted(TOOL_CALLS))
def test_tools_cli_missing_or_misplaced_world(call, world_dir, tmp_path, capsys):
    argv = TOOL_CALLS[call]
    missing = tmp_path / "no-world"
    assert usage_error(tools_main, [*argv, "--world", missing], capsys).endswith(
        f"error: world folder not found: {missing} "
        f"(build one with `python -m venus_utils.world build --out {missing}`)"
    )
    a_file = tmp_path / "world.txt"
    a_file.write_text("x")
    assert f"error: not a world folder: {a_file} is a file (build one with" in usage_error(
        tools_main, [*argv, "--world", a_file], capsys
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert f"error: {empty / 'world.json'}: not a world folder (build one with" in usage_error(
        tools_main, [*argv, "--world", empty], capsys
    )
    half = tmp_path / "half"  # world.json without pages.jsonl
    half.mkdir()
    shutil.copy(world_dir / "world.json", half / "world.json")
    assert f"error: {half / 'pages.jsonl'}: not a world folder" in usage_error(
        tools_main, [*argv, "--world", half], capsys
    )
    assert "needs --world DIR" in usage_error(tools_main, argv, capsys)


def test_tools_cli_invalid_settings(world_dir, tmp_path, capsys):
    a_file = tmp_path / "cache.txt"
    a_file.write_text("x")
    web = ["search", "q", "--backend", "serper", "--cache-dir", a_file]
    assert usage_error(tools_main, web, capsys).endswith(
        f"error: cache folder is a file: {a_file} (expected a folder; a missing one is created)"
    )
    assert usage_error(tools_main, ["search", "q", "--world", world_dir, "--timeout", "0"], capsys).endswith(
        "error: argument --timeout: must be > 0, got 0.0"
    )
    assert usage_error(
        tools_main, ["visit", "u", "--goal", "g", "--world", world_dir, "--top-k", "-1"], capsys
    ).endswith("error: argument --top-k: must be >= 1 and <= 100, got -1")


def test_tools_cli_missing_world_in_a_subprocess(tmp_path):
    """The reported symptom, end to end: one message, exit 2, no traceback."""
    missing = tmp_path / "runs" / "world"
    out = subprocess.run(
        [sys.executable, "-m", "venus_utils.tools", "search", "q", "--world", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"python -m venus_utils.tools: error: world folder not found: {missing} "
        f"(build one with `python -m venus_utils.world build --out {missing}`)"
    )


def test_world_cli_refuses_a_file_for_out_and_bad_settings(tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    assert usage_error(world_main, ["build", "--out", a_file, "--size", "tiny"], capsys).endswith(
        f"error: --out {a_file}: is a file, not a folder"
    )
    below = a_file / "world"
    assert f"error: --out {below}: {a_file} is a file, not a folder" in usage_error(
        world_main, ["build", "--out", below, "--size", "tiny"], capsys
    )
    fresh = tmp_path / "fresh"
    assert usage_error(
        world_main, ["build", "--out", fresh, "--n-worlds", "2", "--heldout-worlds", "2"], capsys
    ).endswith("error: need n_worlds >= 1 and 0 <= heldout_worlds < n_worlds")
    assert not fresh.exists()  # refused before anything was written
    assert a_file.read_text() == "x"
