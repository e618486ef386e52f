"""The README's tool examples find something in the world its build command makes."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

README = Path(os.environ.get("VENUS_README", Path(__file__).resolve().parents[2] / "README.md"))


def _commands(module: str) -> list[list[str]]:
    return [
        shlex.split(line.split(" -m ", 1)[1])
        for line in README.read_text().splitlines()
        if re.match(rf"\.venv/bin/python -m {re.escape(module)} ", line)
    ]


@pytest.fixture(scope="module")
def readme_world(tmp_path_factory):
    from venus_utils.world.__main__ import main

    build = _commands("venus_utils.world")[0]
    out = tmp_path_factory.mktemp("readme") / "world"
    argv = build[1:]
    argv[argv.index("--out") + 1] = str(out)
    assert main(argv) == 0
    return out


def test_readme_search_and_visit_examples_find_pages(readme_world, capsys):
    import json

    from venus_utils.tools.__main__ import main

    for cmd in _commands("venus_utils.tools"):
        argv = cmd[1:]
        if "https://..." in argv:
            continue
        argv[argv.index("--world") + 1] = str(readme_world)
        assert main(argv) == 0
        out = capsys.readouterr().out
        if argv[0] == "search":
            assert all(block["web_page_info_list"] for block in json.loads(out)), out
        else:
            assert "could not be accessed" not in out and " born in " in out, out
