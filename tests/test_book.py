"""`make book`: an executed run rendered as a static site (venus_utils.run.html_book).

The smoke pipeline's fixture lives in tests/test_notebooks.py with module scope, so it cannot be shared with this
file without running the pipeline a second time.  These tests build a small run of their own instead (four tiny
notebooks executed by the real Papermill runner: a plot, a table, a progress bar, a planted key, a failure) and,
when `runs/smoke` has already been executed (`make pipeline`), also render that run.
"""

from __future__ import annotations

import html
import json
import re
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from venus_utils.core.paths import RUNS_DIR
from venus_utils.run import html_book
from venus_utils.run.pipeline import StageFailed, run_pipeline

PLANTED = "sk-test-1234567890abcdef"  # set as SERPER_KEY_ID and printed by a notebook
UNKNOWN_KEY_HEAD = "sk-live-"  # a key no variable holds: printed built from pieces so the source never shows it
UNKNOWN_KEY = UNKNOWN_KEY_HEAD + "ab" * 12
IMG = re.compile(r'<img[^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{100,}')

PARAMS = 'run_dir = "runs/x"\nstage_dir = None\nprofile = "x"\nseed = 0\n'
START = "from venus_utils.core.stage import Stage\nstage = Stage.start({name!r}, run_dir, stage_dir, profile)\n"

PLOT_AND_TABLE = """\
import os
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from tqdm.auto import tqdm
for _ in tqdm(range(3), desc="warming up"):
    pass
table = pd.DataFrame({"bucket": ["short", "long"], "rows": [605, 39]})
fig, ax = plt.subplots(figsize=(3, 2))
sns.barplot(data=table, x="bucket", y="rows", ax=ax)
plt.show()
print("the key is", os.environ["SERPER_KEY_ID"])
print("written under", stage.dir)
table
"""

STAGES = {
    "00_alpha": [
        new_markdown_cell("# 00 · Alpha: a plot and a table\n\nNext comes [the beta stage](01_beta.ipynb)."),
        "PARAMS",
        new_code_cell(START.format(name="00_alpha") + PLOT_AND_TABLE),
        new_code_cell(
            'stage.finish(rows_train=1196, accuracy=0.8125, drop_reasons={"incorrect_answer": 54}, '
            'world={"counts": {"questions": {"train": 927}}}, tags=["a", "b"])'
        ),
    ],
    "01_beta": [
        new_markdown_cell("# 01 · Beta: no figure"),
        "PARAMS",
        new_code_cell(START.format(name="01_beta") + 'print("rows:", 42)\nstage.finish(rows=42, engine="offline")'),
        new_code_cell(f'print("pasted by mistake:", {UNKNOWN_KEY_HEAD!r} + "ab" * 12)'),
    ],
    "02_gamma": [
        new_markdown_cell("# 02 · Gamma: fails"),
        "PARAMS",
        new_code_cell(START.format(name="02_gamma") + 'print("about to fail")'),
        new_code_cell('raise ValueError("gamma broke on purpose")'),
    ],
    "03_delta": [new_markdown_cell("# 03 · Delta: never reached"), "PARAMS", new_code_cell("pass")],
}


def _text(page: str) -> str:
    """What a reader sees: the page without its tags (code is split into highlighting spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _write_notebook(path, cells):
    built = []
    for cell in cells:
        if cell == "PARAMS":
            cell = new_code_cell(PARAMS)
            cell.metadata["tags"] = ["parameters"]
        built.append(cell)
    nb = new_notebook(cells=built)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    """A run folder made by the real runner: 00 and 01 finish, 02 fails, 03 never runs."""
    root = tmp_path_factory.mktemp("bookrun")
    nbs = root / "notebooks"
    nbs.mkdir()
    for stage, cells in STAGES.items():
        _write_notebook(nbs / f"{stage}.ipynb", cells)
    params = root / "tiny.yaml"
    params.write_text("profile: tiny\nseed: 3\n")
    run_dir = root / "runs" / "tiny"
    mp = pytest.MonkeyPatch()
    mp.setenv("SERPER_KEY_ID", PLANTED)  # the kernels inherit it, and html_book.redact must mask it
    try:
        with pytest.raises(StageFailed):
            run_pipeline(params, run_dir, notebooks_dir=nbs, progress=False)
    finally:
        mp.undo()
    return root, nbs, run_dir


@pytest.fixture(scope="module")
def rendered(fake_run):
    root, nbs, run_dir = fake_run
    mp = pytest.MonkeyPatch()
    mp.setenv("SERPER_KEY_ID", PLANTED)
    try:
        index = html_book.build_book(run_dir, root / "site", notebooks_dir=nbs)
    finally:
        mp.undo()
    pages = {p.name: p.read_text(encoding="utf-8") for p in index.parent.glob("*.html")}
    return index, pages, run_dir


def test_the_fake_run_holds_what_the_book_must_handle(fake_run):
    _, _, run_dir = fake_run
    executed = nbformat.read(run_dir / "00_alpha" / "00_alpha.ipynb", as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any(PLANTED in o.get("text", "") for o in outputs), "the planted key must be in the executed notebook"
    failed = nbformat.read(run_dir / "02_gamma" / "02_gamma.ipynb", as_version=4)
    assert any(html_book.PAPERMILL_ERROR_TAG in c.metadata.get("tags", []) for c in failed.cells)
    assert not (run_dir / "03_delta").exists()


def test_one_page_per_executed_notebook_in_order(rendered):
    index, pages, _ = rendered
    assert index.name == "index.html" and index.exists()
    assert set(pages) == {"index.html", "00_alpha.html", "01_beta.html", "02_gamma.html"}
    links = re.findall(r'<a href="(\d\d_\w+\.html)">', pages["index.html"])
    assert list(dict.fromkeys(links)) == ["00_alpha.html", "01_beta.html", "02_gamma.html"]
    # prev / next chain, and every page links back to the index
    assert 'rel="next"' in pages["00_alpha.html"] and 'rel="prev"' not in pages["00_alpha.html"]
    assert '<a href="01_beta.html" rel="next">' in pages["00_alpha.html"]
    assert '<a href="00_alpha.html" rel="prev">' in pages["01_beta.html"]
    assert '<a href="02_gamma.html" rel="next">' in pages["01_beta.html"]
    assert 'rel="next"' not in pages["02_gamma.html"]
    for name, text in pages.items():
        if name != "index.html":
            assert text.count('<a href="index.html">') == 2, name  # top and bottom navigation
            assert "jp-Notebook" in text, f"{name} was not rendered by nbconvert's lab template"


def test_figures_and_tables_are_embedded(rendered):
    _, pages, _ = rendered
    assert len(IMG.findall(pages["00_alpha.html"])) == 1
    assert "<table" in pages["00_alpha.html"] and "short" in pages["00_alpha.html"]  # the DataFrame's HTML
    assert not IMG.findall(pages["01_beta.html"])
    for text in pages.values():
        assert not re.search(r'<img[^>]*src="(?!data:)', text), "every image must be embedded"


def test_index_has_key_figures(rendered):
    _, pages, _ = rendered
    index = html.unescape(pages["index.html"])
    for key, value in [
        ("rows_train", "1196"),
        ("accuracy", "0.8125"),
        ("drop_reasons.incorrect_answer", "54"),
        ("world.counts.questions.train", "927"),
        ("tags", "a, b"),
        ("rows", "42"),
        ("engine", "offline"),
    ]:
        assert re.search(rf'<td class="key">{re.escape(key)}</td><td>{re.escape(value)}</td>', index), key
    assert "03_delta" in index and "not run" in index
    assert re.search(r"02_gamma\.html.*?failed", index, re.S)


def test_papermill_noise_and_widgets_are_tidied(rendered):
    _, pages, run_dir = rendered
    alpha, gamma = pages["00_alpha.html"], pages["02_gamma.html"]
    assert "Parameters of this run" in _text(alpha) and "seed = 3" in _text(alpha)
    assert "An Exception was encountered" not in gamma and "papermill-error-cell" not in gamma
    assert "gamma broke on purpose" in _text(gamma) and "this stage failed" in gamma
    assert "widget-view+json" not in alpha and "unpkg.com" not in alpha and "require.js" not in alpha
    assert re.search(r"warming up: 100%.*3/3", _text(alpha)), "the progress bar becomes its final text"
    assert str(run_dir) not in alpha and "runs/tiny/00_alpha" in _text(alpha)
    assert 'href="01_beta.html"' in alpha  # the markdown link to the notebook now points to its page


def test_no_secret_in_any_page(rendered):
    index, pages, _ = rendered
    for name, text in pages.items():
        plain = html.unescape(text) + _text(text)
        assert PLANTED not in plain, f"planted key in {name}"
        assert UNKNOWN_KEY not in plain and UNKNOWN_KEY_HEAD + "abab" not in plain, f"key-shaped text in {name}"
        assert not html_book.leaks(text, [PLANTED]), name
    assert "the key is ***" in _text(pages["00_alpha.html"])
    assert "looked like a secret key" in pages["01_beta.html"]
    for path in index.parent.rglob("*"):
        assert PLANTED.encode() not in path.read_bytes()


def test_refuses_a_page_that_would_hold_a_secret(fake_run, tmp_path, monkeypatch):
    """The final check catches what the per-output cleaning cannot (here: a key shown in a page title)."""
    _, nbs, run_dir = fake_run
    with pytest.raises(html_book.BookError, match="looks like a secret"):
        html_book.build_book(run_dir, tmp_path / "site", notebooks_dir=nbs, title="run of " + UNKNOWN_KEY)
    assert not (tmp_path / "site").exists()


def test_rerender_replaces_the_site_but_never_a_foreign_folder(fake_run, tmp_path):
    _, nbs, run_dir = fake_run
    out = tmp_path / "site"
    html_book.build_book(run_dir, out, notebooks_dir=nbs)
    html_book.build_book(run_dir, out, notebooks_dir=nbs)  # its own site, untouched: replaced
    (out / "my-notes.html").write_text("a page of mine")  # issue 42: a file added since is never deleted
    with pytest.raises(
        html_book.BookError, match="holds my-notes.html, which venus_utils.run.html_book did not write there"
    ):
        html_book.build_book(run_dir, out, notebooks_dir=nbs)
    assert (out / "my-notes.html").read_text() == "a page of mine"
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(
        html_book.BookError, match="holds notes.txt, which venus_utils.run.html_book did not write there"
    ):
        html_book.build_book(run_dir, foreign, notebooks_dir=nbs)
    with pytest.raises(html_book.BookError, match="would replace the run folder"):
        html_book.build_book(run_dir, run_dir, notebooks_dir=nbs)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_missing_run_says_what_to_run(tmp_path, capsys):
    assert html_book.main(["--run", str(tmp_path / "runs" / "paper")]) == 2
    err = capsys.readouterr().err
    assert "make pipeline PROFILE=paper" in err
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    assert html_book.main(["--run", str(tmp_path / "runs" / "empty")]) == 2


def test_cli_prints_the_index(fake_run, tmp_path, capsys):
    _, _, run_dir = fake_run
    assert html_book.main(["--run", str(run_dir), "--out", str(tmp_path / "site")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == str(tmp_path / "site" / "index.html")


def test_key_figures_flatten_scalars_only():
    machine = {f"k{i}": i for i in range(html_book.MAX_SHOWN + 1)}
    main, more = html_book.key_figures(
        {
            "stage": "x",
            "profile": "p",
            "elapsed_s": 1.0,
            "n": 3,
            "ok": True,
            "none": None,
            "d": {"a": 1, "b": {"c": 2.5}},
            "rows": [{"q": 1}],
            "empty": [],
            "machine": machine,
        }
    )
    assert main == [("n", "3"), ("ok", "true"), ("none", "—"), ("d.a", "1"), ("empty", "(none)"), ("elapsed_s", "1.0")]
    assert more == [("d.b.c", "2.5")] + [(f"machine.{k}", str(v)) for k, v in machine.items()]


@pytest.mark.parametrize(
    "text",
    [
        "sk-proj-abcdefghijklmnop1234",
        "hf_" + "a1" * 18,
        "SERPER_KEY_ID=0123456789abcdef0123",
        '"OPENAI_API_KEY": "abcdefghijklmnopqrstu"',
        "-----BEGIN RSA PRIVATE KEY-----",
        "AKIAABCDEFGHIJKLMNOP",
    ],
)
def test_key_patterns(text):
    assert html_book.find_keys(f"before {text} after")


@pytest.mark.parametrize(
    "text",
    [
        "-webkit-mask-image: none",
        "api_key = None",
        "JUDGE_API_KEY / JUDGE_MODEL",
        "task-0123456789abcdefghij",
        "hf_logging.disable_progress_bar()",
        "tokens_per_step = 12345678901234567890",
    ],
)
def test_key_patterns_spare_ordinary_text(text):
    assert not html_book.find_keys(text)


def test_renders_the_real_smoke_run_when_it_exists(tmp_path):
    """Render `runs/smoke` as `make book` would, if `make pipeline` has made it (never runs the pipeline)."""
    run_dir = RUNS_DIR / "smoke"
    executed = html_book.find_executed(run_dir)
    if not executed:
        pytest.skip("runs/smoke has no executed notebook (run `make pipeline` first)")
    t0 = time.perf_counter()
    index = html_book.build_book(run_dir, tmp_path / "book")
    seconds = time.perf_counter() - t0
    pages = {p.stem: p.read_text(encoding="utf-8") for p in index.parent.glob("[0-9][0-9]_*.html")}
    assert sorted(pages) == [p.stem for p in executed]
    index_text = index.read_text(encoding="utf-8")
    links = list(dict.fromkeys(re.findall(r'<a href="(\d\d_\w+)\.html">', index_text)))
    assert links == [p.stem for p in executed]
    for path in executed:
        nb = nbformat.read(path, as_version=4)
        pngs = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert len(IMG.findall(pages[path.stem])) >= pngs, f"{path.stem}: {pngs} figure(s) expected"
        assert not html_book.leaks(pages[path.stem], html_book.secret_values()), path.stem
        summary = path.parent / "summary.json"
        if summary.exists():
            elapsed = json.loads(summary.read_text())["elapsed_s"]
            assert f"<td>{html_book._format(elapsed)}</td>" in index_text
    print(f"rendered {len(pages)} page(s) of runs/smoke in {seconds:.1f}s")


def test_the_story_rows_show_intervals_and_the_headline_slice():
    def acc(a, lo, hi, n):
        return {"accuracy": a, "ci_low": lo, "ci_high": hi, "n": n}

    head = {"slice": "hard/heldout", **acc(0.25, 0.2, 0.31, 285)}
    pair = {
        "n": 600,
        "difference": 0.02,
        "diff_ci_low": -0.01,
        "diff_ci_high": 0.05,
        "mcnemar_p": 0.2912,
        "fixed": 14,
        "broken": 8,
        "verdict": "noise",
    }
    story = {
        "models": [{"model": "SFT", **acc(0.552, 0.512, 0.591, 600), "headline": head}],
        "comparisons": [
            {"baseline": "SFT", "model": "RL (IGPO)", **pair, "headline": {**pair, "n": 285, "slice": "hard/heldout"}}
        ],
    }
    headline, rows = html_book.story_rows(story)
    assert headline == "hard/heldout"
    assert rows["models"] == [
        {"model": "SFT", "all": "0.552 [0.512, 0.591] (n = 600)", "headline": "0.250 [0.200, 0.310] (n = 285)"}
    ]
    assert [(r["pair"], r["slice"], r["difference"], r["p"], r["fixed_broken"]) for r in rows["comparisons"]] == [
        ("RL (IGPO) vs SFT", "all (n = 600)", "+0.020 [-0.010, +0.050]", "0.291", "14 / 8"),
        ("RL (IGPO) vs SFT", "hard/heldout (n = 285)", "+0.020 [-0.010, +0.050]", "0.291", "14 / 8"),
    ]
    assert html_book.story_rows({"models": [], "comparisons": []}) == ("all", {"models": [], "comparisons": []})


def test_library_warnings_progress_bars_and_long_tables_do_not_clutter_a_page():
    """Issue 23: twenty "Writing model shards" lines, library FutureWarnings and a 100-row step table buried the
    lesson.  Warnings go, progress bars are folded into one line per cell, long tables are folded."""
    from nbformat.v4 import new_output

    warning = (
        "/x/site-packages/transformers/training_args.py:1541: FutureWarning: `gradient_checkpointing` is deprecated\n"
        '  warnings.warn(f"{old} is deprecated", FutureWarning)\n'
    )
    rows = "".join(f"<tr><td>{k}</td></tr>" for k in range(100))
    cell = new_code_cell("train()")
    cell.outputs = [
        new_output("stream", name="stderr", text=warning),
        *[
            new_output("display_data", data={"text/plain": "Writing model shards: 100%|##########| 1/1 [00:00<00:00]"})
            for _ in range(20)
        ],
        new_output("stream", name="stdout", text="[resume] no checkpoint: training from the start\n"),
        new_output(
            "execute_result", data={"text/html": f"<table><thead><tr><th>step</th></tr></thead>{rows}</table>"}
        ),
        new_output("execute_result", data={"text/html": "<table><tr><td>short</td></tr></table>"}),
    ]
    nb, info = html_book.tidy_notebook(new_notebook(cells=[cell]), secrets=[], rewrites=[], stages=set())
    outputs = nb.cells[0].outputs
    texts = [o.get("text") or o["data"].get("text/html") or o["data"].get("text/plain") for o in outputs]
    assert not any("FutureWarning" in t for t in texts)
    assert texts[0].startswith("<details><summary>20 progress bars</summary>")
    assert texts[1] == "[resume] no checkpoint: training from the start\n"
    assert texts[2].startswith("<details><summary>a table of 100 rows")
    assert texts[3] == "<table><tr><td>short</td></tr></table>" and len(texts) == 4
    assert info["decluttered"] == 22


def test_a_run_without_a_hard_tier_still_shows_its_paired_comparison():
    pair = {
        "n": 3,
        "difference": 0.0,
        "diff_ci_low": -0.5,
        "diff_ci_high": 0.5,
        "mcnemar_p": 1.0,
        "fixed": 0,
        "broken": 0,
        "verdict": "noise",
    }
    head = {"slice": "all", "accuracy": 0.0, "ci_low": 0.0, "ci_high": 0.56, "n": 3}
    story = {
        "models": [{"model": "SFT", "accuracy": 0.0, "ci_low": 0.0, "ci_high": 0.56, "n": 3, "headline": head}],
        "comparisons": [{"baseline": "SFT", "model": "RL (IGPO)", **pair, "headline": {**pair, "slice": "all"}}],
    }
    headline, rows = html_book.story_rows(story)
    assert headline == "all" and [(r["pair"], r["slice"]) for r in rows["comparisons"]] == [
        ("RL (IGPO) vs SFT", "all (n = 3)")
    ]
