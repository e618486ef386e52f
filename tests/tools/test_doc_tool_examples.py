"""The command-line examples of docs/reference.md find something in the world its build command makes."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

DOC = Path(os.environ.get("VENUS_TOOLS_DOC", Path(__file__).resolve().parents[2] / "docs" / "reference.md"))


def _commands(module: str) -> list[list[str]]:
    return [
        shlex.split(line.split(" -m ", 1)[1])
        for line in DOC.read_text().splitlines()
        if re.match(rf"\.venv/bin/python -m {re.escape(module)} ", line)
    ]


@pytest.fixture(scope="module")
def doc_world(tmp_path_factory):
    from venus_utils.world.__main__ import main

    build = _commands("venus_utils.world")[0]
    out = tmp_path_factory.mktemp("doc") / "world"
    argv = build[1:]
    argv[argv.index("--out") + 1] = str(out)
    assert main(argv) == 0
    return out


def test_doc_search_and_visit_examples_find_pages(doc_world, capsys):
    import json

    from venus_utils.tools.__main__ import main

    for cmd in _commands("venus_utils.tools"):
        argv = cmd[1:]
        if "https://..." in argv:
            continue
        argv[argv.index("--world") + 1] = str(doc_world)
        assert main(argv) == 0
        out = capsys.readouterr().out
        if argv[0] == "search":
            assert all(block["web_page_info_list"] for block in json.loads(out)), out
        else:
            assert "could not be accessed" not in out and " born in " in out, out
