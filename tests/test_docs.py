"""The README stays a short front page and every link of the README and docs/ leads somewhere.

A link to a file is checked against the repository; a link with an ``#anchor`` into a Markdown file is checked
against that file's headings, slugged the way GitHub renders them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to -."""
    text = re.sub(r"`|\*\*|\*", "", heading.lstrip("#").strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen, fence = set(), {}, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [m.group(1) for m in LINK.finditer(text)]


def test_slug_follows_github():
    assert slug("## Does the cpu lesson show RL working? (the cpu lesson, `params/cpu.yaml`)") == (
        "does-the-cpu-lesson-show-rl-working-the-cpu-lesson-paramscpuyaml"
    )
    assert slug("#### Seeds 10–12 pooled") == "seeds-1012-pooled"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_points_at_something_that_exists(doc):
    broken = []
    for target in links(doc):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def test_readme_is_short_and_starts_with_its_two_commands():
    text = (REPO_ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    first_block = re.search(r"```[a-z]*\n(.*?)```", text, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make pipeline", "make test"]
    assert text.index("```") < text.index("\n## ")  # the commands come before any section
    # how to run, what each notebook teaches and the headline result, all within the first 60 lines
    head = "\n".join(text.splitlines()[:60])
    assert "## The lesson, notebook by notebook" in head and "## The headline result" in head


def test_docs_folder_holds_the_research_record():
    for name in ("experiments.md", "performance.md", "scaling.md", "reference.md", "notebooks.md"):
        assert (REPO_ROOT / "docs" / name).is_file(), name


#: the runs of the study the README's headline reports (its command names them)
HEADLINE_RUNS = [REPO_ROOT / "results" / f"cpu-lesson-seed{s}" for s in range(20, 26)]


def test_the_readme_headline_is_what_eval_study_prints_over_the_kept_seeds(capsys):
    """The headline table is copied, byte for byte, from ``eval study <runs> --markdown`` over the kept runs."""
    if not all(run.is_dir() for run in HEADLINE_RUNS):
        pytest.skip("the headline's kept runs are not in this checkout")
    from venus_utils.eval.__main__ import main

    assert main(["study", *map(str, HEADLINE_RUNS), "--markdown"]) == 0
    printed = capsys.readouterr().out.splitlines()
    table = [line for line in printed if line.startswith("|")]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(table) == 10 and "\n".join(table) in readme


def user_facing_texts():
    """What a reader of the repository reads: the README, docs/, the profiles and every notebook cell."""
    import json

    for path in DOCS:
        yield path.relative_to(REPO_ROOT).as_posix(), path.read_text()
    for path in sorted((REPO_ROOT / "params").rglob("*.yaml")):
        yield path.relative_to(REPO_ROOT).as_posix(), path.read_text()
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        yield path.relative_to(REPO_ROOT).as_posix(), "\n".join("".join(c["source"]) for c in cells)


#: the project's history in words a newcomer cannot follow, and statements known to have gone stale
HISTORY = re.compile(
    r"\bissues? #?\d+\b|\bthe speed issue\b|\bcandB\b|\bthe design tree\b"
    r"|\bcommit [0-9a-f]{7,40}\b|\bdesign commit [0-9a-f]{7,40}\b",  # a bare hash: name the commit by what it added
    re.I,
)
STALE = ("six stages", "four parameter files", "not re-timed", "not yet measured")


@pytest.mark.parametrize("name,text", list(user_facing_texts()), ids=[n for n, _ in user_facing_texts()])
def test_user_facing_text_names_no_issue_numbers_internal_names_or_stale_statements(name, text):
    found = [m.group(0) for m in HISTORY.finditer(text)] + [s for s in STALE if s in text]
    assert not found, f"{name}: {found}"
