"""Render an executed run as a static HTML site: the lesson with its plots, tables and numbers, no secrets.

    python -m venus_utils.run.html_book --run runs/smoke [--out runs/smoke/book]      (or: make book PROFILE=smoke)

Committed notebooks carry no outputs, so a reader who runs nothing sees nothing.  This turns the executed
notebooks of a run folder (``runs/<profile>/NN_stage/NN_stage.ipynb``, written by :mod:`venus_utils.run.pipeline`)
into ``<out>/NN_stage.html`` (one page per notebook, in order, rendered by nbconvert's ``HTMLExporter`` with the
JupyterLab template, images embedded as ``data:`` URIs, prev / next / index links) and ``<out>/index.html`` (the
run's key figures, from each stage's ``summary.json``).  The folder is self-contained: publish it as it is.

Before rendering, each notebook is tidied for a reader:

* Papermill's error-banner cells are dropped (a failed stage is marked in the page header and on the index);
  its injected-parameters cell is kept (it shows the values this run used) and labelled as such;
* progress-bar widgets become their final text (``100% 2112/2112``): the page loads no widget JavaScript;
* absolute paths of this machine become relative ones (``runs/smoke/...``, ``~``);
* links to ``NN_stage.ipynb`` in markdown point to the rendered pages.

Secrets: every known secret value (:data:`venus_utils.core.env.SECRET_VARS`, from the environment or a ``.env``
file) is masked with :func:`venus_utils.core.env.redact`; an output that still looks like a key (``sk-...``,
``hf_...``, ``API_KEY=...``, a private key block...) is removed and replaced by a notice; and every page's text
is checked again before anything is written: a page that would still hold a secret is refused (exit 1).
Images cannot be checked: a plot that draws a key in its pixels would not be caught.
"""

from __future__ import annotations

import argparse
import base64
import copy
import datetime as _dt
import html
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from dotenv import dotenv_values

from ..core import env as _env
from ..core.io import FolderNotOurs, atomic_dir, atomic_write, check_replaceable, read_json, write_json
from ..core.paths import (
    CLEANING_STAGE,
    DEMO_STAGE,
    EVALUATION_STAGE,
    NOTEBOOKS_DIR,
    REPO_ROOT,
    RESAMPLING_STAGE,
    RL_STAGE,
    SETUP_STAGE,
    SFT_STAGE,
)
from ..core.profiles import STAGE_RE, discover_notebooks
from ..core.stage import SUMMARY, resolve_run_dir
from ..eval.heldout import run_story

#: A file that marks a folder as written by this module and lists its files: an existing ``--out`` folder is replaced
#: only while it holds nothing else (:func:`venus_utils.core.io.check_replaceable`).
MARKER = ".venus-book"
BOOK_TOOL = "venus_utils.run.html_book"
INDEX = "index.html"

PAPERMILL_ERROR_TAG = "papermill-error-cell-tag"
INJECTED_TAG = "injected-parameters"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

_NAMES = "|".join(map(re.escape, _env.SECRET_VARS))
#: Text that looks like a credential whatever the environment holds.  Word boundaries keep CSS names such as
#: ``-webkit-mask-image`` from matching; base64 image data is never scanned (see :func:`_outside_data_uris`).
KEY_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"(?<![\w-])sk-[A-Za-z0-9_-]{16,}",  # OpenAI-style keys (and the test suite's fake ones)
        r"(?<![\w-])hf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
        r"(?<![\w-])jina_[A-Za-z0-9_-]{20,}",  # Jina keys
        r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",  # GitHub tokens
        r"(?<![\w-])AKIA[0-9A-Z]{16}(?![0-9A-Za-z])",  # AWS access key ids
        r"(?<![\w-])xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
        r"(?<![\w-])AIza[0-9A-Za-z_-]{35}",  # Google API keys
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
        # NAME=value / "NAME": "value" for the recipe's secret variables and generic api_key / access_token names.
        rf"(?i)(?<![A-Za-z0-9])(?:{_NAMES}|api[_-]?key|access[_-]?token|auth[_-]?token)[\"']?\s*[:=]\s*[\"']?"
        r"[A-Za-z0-9_\-\.]{16,}",
    )
)

REMOVED_NOTICE = (
    "[venus_utils.run.html_book: this output was removed from the rendered page because it looked like a secret key]\n"
)

_DATA_URI = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]+")


class BookError(RuntimeError):
    """The run cannot be rendered (no run folder, no executed notebook, a page that would hold a secret...)."""


class RunMissing(BookError):
    """The run folder does not exist or holds no executed notebook: run the pipeline first."""


# --- secrets ------------------------------------------------------------------------------------------------
def secret_values() -> list[str]:
    """The values of the secret variables, from the environment and from the ``.env`` files :mod:`venus_utils.core.env`
    reads (read without loading them into ``os.environ``), longest first; JINA_API_KEYS-style lists are split."""
    values: set[str] = set()
    sources: list[dict[str, str | None]] = [dict(os.environ)]
    try:
        for candidate in {(REPO_ROOT / ".env").resolve(), (Path.cwd() / ".env").resolve()}:
            if candidate.is_file():
                sources.append(dotenv_values(candidate))
    except ImportError:  # pragma: no cover - python-dotenv is a dependency
        pass
    for source in sources:
        for name in _env.SECRET_VARS:
            value = source.get(name)
            if not value:
                continue
            for part in {value, *value.split(",")}:
                part = part.strip()
                if len(part) >= 4:  # the threshold venus_utils.core.env.redact uses
                    values.add(part)
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """:func:`venus_utils.core.env.redact`, plus the values found in ``.env`` files."""
    text = _env.redact(text)
    for value in secrets if secrets is not None else secret_values():
        text = text.replace(value, "***")
    return text


def find_keys(text: str) -> list[str]:
    """The substrings of ``text`` that look like credentials (see :data:`KEY_PATTERNS`)."""
    return [m.group(0) for pattern in KEY_PATTERNS for m in pattern.finditer(text)]


def _outside_data_uris(text: str, fn) -> str:
    """Apply ``fn`` to the parts of ``text`` that are not base64 ``data:`` URIs (masking inside image data would
    corrupt it, and random base64 may look like a short key)."""
    parts, last = [], 0
    for m in _DATA_URI.finditer(text):
        parts.append(fn(text[last : m.start()]))
        parts.append(m.group(0))
        last = m.end()
    parts.append(fn(text[last:]))
    return "".join(parts)


def leaks(page: str, secrets: Iterable[str] | None = None) -> list[str]:
    """What in a rendered page (outside image data) is a known secret value or looks like a key; [] when clean."""
    secrets = list(secrets if secrets is not None else secret_values())
    found: list[str] = []

    def scan(chunk: str) -> str:
        for text in (chunk, html.unescape(chunk)):
            found.extend(v for v in secrets if v in text)
            found.extend(find_keys(text))
        return chunk

    _outside_data_uris(page, scan)
    return sorted(set(found))


def _mask(value: str) -> str:
    """Enough of a found secret to locate it, not enough to use it."""
    return value[:3] + "…" if len(value) >= 12 else "…"


# --- paths --------------------------------------------------------------------------------------------------
def _path_rewrites(run_dir: Path) -> list[tuple[str, str]]:
    """Absolute paths of this machine -> what a reader should see, longest first."""
    try:
        shown_run = run_dir.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        shown_run = f"runs/{run_dir.name}"
    pairs = {
        str(run_dir): shown_run,
        str(run_dir.resolve()): shown_run,
        str(REPO_ROOT) + os.sep: "",
        str(REPO_ROOT): ".",
    }
    home = str(Path.home())
    if len(home) > 1:
        pairs[home] = "~"
    return sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)


def _rewrite_paths(text: str, rewrites: list[tuple[str, str]]) -> str:
    for old, new in rewrites:
        if not old or old not in text:
            continue
        if old.endswith(os.sep):
            text = text.replace(old, new)
        else:  # a whole path only: /work/main must not turn /work/main_old into ._old
            text = re.sub(re.escape(old) + r"(?![\w.-])", lambda _, new=new: new, text)
    return text


# --- notebooks ----------------------------------------------------------------------------------------------
@dataclass
class Page:
    stage: str
    notebook: Path
    title: str
    failed: bool
    summary: dict[str, Any] | None
    images: int = 0
    removed_outputs: int = 0
    file: str = ""
    prev: Page | None = field(default=None, repr=False)
    next: Page | None = field(default=None, repr=False)


def find_executed(run_dir: Path) -> list[Path]:
    """The executed stage notebooks of a run folder (``NN_stage/NN_stage.ipynb``), in stage order."""
    if not run_dir.is_dir():
        return []
    found = [d / f"{d.name}.ipynb" for d in run_dir.iterdir() if d.is_dir() and STAGE_RE.match(d.name)]
    return sorted((p for p in found if p.is_file()), key=lambda p: p.stem)


def notebook_title(nb, default: str) -> str:
    """The first markdown heading (``# 02 · Turn-aware resampling``), without the hashes."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip() or default
        break
    return default


def _output_text(output) -> str:
    """Every piece of text an output holds (what a page could show)."""
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("text", "")
    if kind == "error":
        return "\n".join([output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])])
    chunks = []
    for mime, value in output.get("data", {}).items():
        if mime.startswith("image/") and mime != "image/svg+xml":
            continue
        chunks.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(chunks)


def _map_output_text(output, fn) -> None:
    kind = output.get("output_type")
    if kind == "stream":
        output["text"] = fn(output.get("text", ""))
    elif kind == "error":
        output["evalue"] = fn(output.get("evalue", ""))
        output["traceback"] = [fn(line) for line in output.get("traceback", [])]
    for mime, value in list(output.get("data", {}).items()):
        if mime.startswith("image/") and mime != "image/svg+xml":
            continue
        if isinstance(value, str):
            output["data"][mime] = fn(value)
        elif isinstance(value, list):
            output["data"][mime] = [fn(v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict):
            output["data"][mime] = json.loads(fn(json.dumps(value)))


def _widget_text(view: dict, state: dict) -> str | None:
    """The final text of a (tqdm-style) widget from the notebook's saved widget state; None when unknown."""
    models = state.get("state", {})

    def text(model_id: str, depth: int = 0) -> list[str]:
        model = models.get(model_id)
        if not model or depth > 5:
            return []
        name, st = model.get("model_name", ""), model.get("state", {})
        if name in ("HBoxModel", "VBoxModel", "BoxModel"):
            return [
                t for child in st.get("children", []) for t in text(str(child).removeprefix("IPY_MODEL_"), depth + 1)
            ]
        if name in ("HTMLModel", "LabelModel", "TextModel"):
            value = re.sub(r"<[^>]+>", "", html.unescape(str(st.get("value", "")))).replace("\u2007", " ").strip()
            return [value] if value else []
        return []  # progress bars: their HTML siblings already say "100%" and "n/total"

    parts = text(view.get("model_id", ""))
    return " ".join(parts) if parts else None


def tidy_notebook(nb, *, secrets: list[str], rewrites: list[tuple[str, str]], stages: set[str]) -> tuple[Any, dict]:
    """A copy of an executed notebook ready for a reader (see the module docstring); returns it with counts."""
    nb = copy.deepcopy(nb)
    info = {"failed": False, "images": 0, "removed_outputs": 0, "widgets": 0, "decluttered": 0}
    papermill = nb.metadata.get("papermill", {}) or {}
    info["failed"] = bool(papermill.get("exception"))
    widget_state = (nb.metadata.get("widgets", {}) or {}).get(WIDGET_STATE, {})

    def clean(text: str) -> str:
        return redact_text(_rewrite_paths(text, rewrites), secrets)

    def link_pages(match: re.Match) -> str:
        stem = match.group(2)
        return f"{match.group(1)}{stem}.html" if stem in stages else match.group(0)

    cells = []
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if PAPERMILL_ERROR_TAG in tags:
            continue
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        cell.source = clean(cell.source)
        for key in find_keys(cell.source):
            cell.source = cell.source.replace(key, "***")
        if INJECTED_TAG in tags:
            cell.source = re.sub(
                r"^# Parameters\n", "# Parameters of this run (injected by Papermill from the profile)\n", cell.source
            )
        if cell.cell_type == "markdown":
            cell.source = re.sub(r"(\]\(\s*)(?:[^)\s]*/)?(\d\d_[a-z0-9_]+)\.ipynb", link_pages, cell.source)
        if cell.cell_type == "code":
            outputs, progress = [], []
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if WIDGET_VIEW in data:
                    shown = _widget_text(data[WIDGET_VIEW], widget_state)
                    info["widgets"] += 1
                    if not shown:
                        continue
                    output["data"] = {"text/plain": shown}
                    data = output["data"]
                if any(m.startswith("image/") for m in data):
                    info["images"] += 1
                if output.get("output_type") == "error":
                    info["failed"] = True
                _map_output_text(output, clean)
                output = _declutter(output, info, progress)
                if output is None:
                    continue
                if find_keys(_output_text(output)):
                    info["removed_outputs"] += 1
                    outputs.append({"output_type": "stream", "name": "stderr", "text": REMOVED_NOTICE})
                    continue
                outputs.append(output)
            if progress:
                outputs.insert(0, _folded_progress(progress))
            cell.outputs = outputs
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    return nb, info


#: a library warning on stderr (``.../x.py:12: FutureWarning: ...``) and the source line Python prints after it
_WARNING_RE = re.compile(r"^\S+\.py:\d+: \w*Warning: .*$|^\s+warnings\.warn\(.*$|^\s+warn\(.*$")
#: a progress bar's line (tqdm: ``Writing model shards:  40%|####      | 2/5 [00:01<00:01]``)
_PROGRESS_RE = re.compile(r"^[^\n|]{0,80}\d+%\|[^\n]*\|[^\n]*$")
#: a table longer than this many rows is shown folded (the reader opens it)
MAX_TABLE_ROWS = 25


def _declutter(output: dict, info: dict, progress: list[str]) -> dict | None:
    """What a reader needs of one output: library warnings left out, progress bars moved to ``progress`` (the cell
    shows them folded: :func:`_folded_progress`), None when nothing else is there; a table longer than
    :data:`MAX_TABLE_ROWS` rows folded into a ``<details>``.  The executed notebook in the run folder keeps
    everything."""
    if output.get("output_type") == "stream":
        lines = str(output.get("text", "")).replace("\r", "\n").split("\n")
        progress += [line.strip() for line in lines if _PROGRESS_RE.match(line.strip())]
        kept = [line for line in lines if not (_WARNING_RE.match(line) or _PROGRESS_RE.match(line.strip()))]
        if len(kept) != len(lines):
            info["decluttered"] += 1
        if not "".join(kept).strip():
            return None
        output["text"] = "\n".join(kept)
        return output
    data = output.get("data", {})
    plain = str(data.get("text/plain", ""))
    if (
        set(data) == {"text/plain"}
        and plain.strip()
        and all(_PROGRESS_RE.match(x.strip()) for x in plain.splitlines() if x.strip())
    ):
        progress += [x.strip() for x in plain.splitlines() if x.strip()]
        info["decluttered"] += 1
        return None
    table = data.get("text/html")
    if isinstance(table, str) and "<table" in table:
        rows = table.count("<tr") - table.count("<thead")  # the header row is no row of the table
        if rows > MAX_TABLE_ROWS:
            data["text/html"] = (
                f"<details><summary>a table of {rows} rows (open to read it)</summary>{table}</details>"
            )
            info["decluttered"] += 1
    return output


def _folded_progress(progress: list[str]) -> dict:
    """A cell's progress bars as one folded output (their last states, in order)."""
    shown = "\n".join(html.escape(line) for line in progress)
    summary = f"{len(progress)} progress bar{'s' if len(progress) != 1 else ''}"
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"text/html": f"<details><summary>{summary}</summary><pre>{shown}</pre></details>"},
    }


# --- rendering ----------------------------------------------------------------------------------------------
_CSS = """
.book-nav { display: flex; gap: 1.5em; align-items: baseline; flex-wrap: wrap; padding: 0.6em 1em; margin: 0 0 1em 0;
  border-bottom: 1px solid #ddd; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; }
.book-nav.bottom { border-bottom: none; border-top: 1px solid #ddd; margin: 2em 0 0 0; }
.book-nav a { text-decoration: none; } .book-nav a:hover { text-decoration: underline; }
.book-nav .book-here { font-weight: 600; flex: 1; }
.book-failed { color: #b00020; font-weight: 600; }
.jp-RenderedHTMLCommon table { display: block; max-width: 100%; overflow-x: auto; }
"""

_PAGE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{#- No require.js and no widget manager: the page is static (widgets were turned into their text). -#}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- if resources.book.math -%}{{ super() }}{%- endif -%}\
{%- endblock html_head_js_mathjax -%}
{%- block extra_css -%}<style type="text/css">{{ resources.book.css }}</style>{%- endblock extra_css -%}
{%- macro book_nav(where) -%}
<nav class="book-nav {{ where }}" aria-label="book navigation">
  <a href="index.html">&#8962; {{ resources.book.run_title | e }}</a>
  <span class="book-here">{{ resources.book.here | e }}\
{% if resources.book.failed %} <span class="book-failed">(this stage failed)</span>{% endif %}</span>
  {% if resources.book.prev %}<a href="{{ resources.book.prev.file }}" rel="prev">\
&larr; {{ resources.book.prev.stage | e }}</a>{% endif %}
  {% if resources.book.next %}<a href="{{ resources.book.next.file }}" rel="next">\
{{ resources.book.next.stage | e }} &rarr;</a>{% endif %}
</nav>
{%- endmacro -%}
{%- block body_header -%}{{ super() }}{{ book_nav('top') }}{%- endblock body_header -%}
{%- block body_footer -%}{{ book_nav('bottom') }}{{ super() }}{%- endblock body_footer -%}
"""


_NO_ALT = 'alt="No description has been provided for this image"'


class _QuietAltText(logging.Filter):
    """Plots carry no alt text; the pages give them one (see :func:`render_page`), so nbconvert's warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Alternative text is missing" not in record.getMessage()


def _exporter():
    from nbconvert import HTMLExporter

    log = logging.getLogger("venus_utils.run.html_book.nbconvert")
    if not any(isinstance(f, _QuietAltText) for f in log.filters):
        log.addFilter(_QuietAltText())
    # The lab template embeds image outputs as data: URIs; embed_images also inlines images that markdown cells
    # reference by path, so the folder needs nothing beside it.
    return HTMLExporter(
        template_name="lab",
        template_file="book.html.j2",
        embed_images=True,
        log=log,
        extra_loaders=[jinja2.DictLoader({"book.html.j2": _PAGE_TEMPLATE})],
    )


def render_page(exporter, nb, page: Page, run_title: str, base: Path) -> str:
    """One page: the tidied notebook through nbconvert's HTMLExporter (``base``: where its markdown's relative
    image paths are resolved)."""
    nb.metadata["title"] = f"{page.title} · {run_title}"
    math = any(c.cell_type == "markdown" and ("$" in c.source or "\\(" in c.source) for c in nb.cells)
    resources = {
        "metadata": {"name": page.stage, "path": str(base)},
        "book": {
            "css": _CSS,
            "run_title": run_title,
            "here": page.title,
            "failed": page.failed,
            "prev": page.prev,
            "next": page.next,
            "math": math,
        },
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    figure = iter(range(1, body.count(_NO_ALT) + 1))
    alt = html.escape(page.title, quote=True)
    return re.sub(re.escape(_NO_ALT), lambda _: f'alt="Figure {next(figure)} of {alt}"', body)


def _markdown_base(raw_nb, executed: Path) -> Path:
    """Where the source notebook lived, so that markdown images referenced by relative path are found."""
    source = (raw_nb.metadata.get("papermill", {}) or {}).get("input_path")
    if source and Path(source).parent.is_dir():
        return Path(source).parent
    return NOTEBOOKS_DIR if NOTEBOOKS_DIR.is_dir() else executed.parent


# --- key figures --------------------------------------------------------------------------------------------
SKIP_KEYS = {"stage", "profile"}
#: Written by every stage (:meth:`venus_utils.core.stage.Stage.finish`): listed after the stage's own figures.
BOOKKEEPING = ("elapsed_s", "timings_s", "finished_at")
#: the figure each stage's section on the index shows (a file the stage's notebook saves in its folder)
KEY_FIGURES = {
    SFT_STAGE: ("heldout_accuracy.png", "held-out accuracy before and after SFT"),
    RL_STAGE: ("training.png", "what happened during RL training"),
    EVALUATION_STAGE: ("pass_at_k.png", "pass@k of the trained agent"),
}
MAX_LIST = 10
#: A nested record with more entries than this (``machine``, ``tiny_model``) is shown folded on the index.
MAX_SHOWN = 8


def _format(value: Any) -> str | None:
    """A scalar (or a short list of scalars) as text; None for what a table cannot show."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = f"{value:.4g}"
        return text if any(c in text for c in ".ein") else text + ".0"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        if not value:
            return "(none)"
        if len(value) <= MAX_LIST and all(v is None or isinstance(v, (str, int, float, bool)) for v in value):
            return ", ".join(_format(v) or "" for v in value)
    return None


def key_figures(summary: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The scalars of a stage summary as ``(dotted.key, text)`` rows: the top level and one level down first,
    the rest second (shown folded): deeper levels, and the members of a large record such as ``machine`` (more
    than :data:`MAX_SHOWN` entries).  Lists of records and other non-scalars are skipped."""
    main: list[tuple[str, str]] = []
    more: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any, depth: int, folded: bool) -> None:
        if isinstance(value, dict):
            folded = folded or len(value) > MAX_SHOWN
            for key, sub in value.items():
                walk(f"{prefix}.{key}", sub, depth + 1, folded)
            return
        text = _format(value)
        if text is not None:
            (main if depth <= 2 and not folded else more).append((prefix, text))

    keys = [k for k in summary if k not in SKIP_KEYS and k not in BOOKKEEPING]
    for key in keys + [k for k in BOOKKEEPING if k in summary]:
        walk(str(key), summary[key], 1, False)
    return main, more


_INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{{ run_title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1000px; margin: 2em auto; \
padding: 0 1em;
  color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.key { font-family: ui-monospace, monospace; white-space: nowrap; }
.failed { color: #b00020; font-weight: 600; } .notrun { color: #888; }
.meta { color: #555; font-size: 14px; } details { margin-bottom: 1em; } summary { cursor: pointer; color: #555; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #eee; padding-bottom: 0.2em; }
</style>
</head>
<body>
<h1>{{ run_title }}</h1>
<p class="meta">Profile <b>{{ profile }}</b> · run folder <code>{{ run_shown }}</code> · rendered {{ rendered }}
{%- if finished %} · last stage finished {{ finished }}{% endif %}
{%- if total_s is not none %} · {{ "%.1f" | format(total_s) }} s of stage time{% endif %}.</p>
<p class="meta">Each page is an executed notebook of this run, rendered with nbconvert. Known secrets are masked.</p>

{%- if story.models %}
<h2>The run in numbers</h2>
<p class="meta">Greedy answers to the run's held-out questions, judged; each accuracy with its n and 95% interval.
{%- if headline != "all" %} The headline is the <b>{{ headline }}</b> slice (the hard tier on held-out sub-worlds,
never trained on).{% endif %}</p>
<table class="story">
<thead><tr><th>model</th><th>all questions</th>
{%- if headline != "all" %}<th>{{ headline }}</th>{% endif %}</tr></thead>
<tbody>
{%- for m in story.models %}
<tr><td>{{ m.model }}</td><td>{{ m.all }}</td>{% if headline != "all" %}<td>{{ m.headline }}</td>{% endif %}</tr>
{%- endfor %}
</tbody>
</table>
{%- if story.comparisons %}
<table class="story">
<thead><tr><th>paired, same questions</th><th>slice</th><th>difference [95% CI]</th><th>McNemar p</th>
<th>fixed / broken</th><th>verdict</th></tr></thead>
<tbody>
{%- for c in story.comparisons %}
<tr><td>{{ c.pair }}</td><td>{{ c.slice }}</td><td>{{ c.difference }}</td><td class="num">{{ c.p }}</td>
<td class="num">{{ c.fixed_broken }}</td><td>{{ c.verdict }}</td></tr>
{%- endfor %}
</tbody>
</table>
{%- endif %}
{%- endif %}

<h2>Stages</h2>
<table class="overview">
<thead><tr><th>#</th><th>stage</th><th>status</th><th>time (s)</th><th>finished</th></tr></thead>
<tbody>
{%- for row in overview %}
<tr>
  <td>{{ row.number }}</td>
  <td>{% if row.file %}<a href="{{ row.file }}">{{ row.title }}</a>{% else %}{{ row.title }}{% endif %}</td>
  <td class="{{ row.css }}">{{ row.status }}</td>
  <td class="num">{{ row.elapsed }}</td>
  <td>{{ row.finished }}</td>
</tr>
{%- endfor %}
</tbody>
</table>

{%- for section in sections %}
<h2 id="{{ section.stage }}"><a href="{{ section.file }}">{{ section.title }}</a>
{%- if section.failed %} <span class="failed">(failed)</span>{% endif %}</h2>
{%- if section.lead %}<p>{{ section.lead }}</p>{% endif %}
{%- if section.figure %}
<figure><img src="{{ section.figure }}" alt="{{ section.figure_caption }}" style="max-width:100%">
<figcaption class="meta">{{ section.figure_caption }}</figcaption></figure>
{%- endif %}
{%- if section.main or section.more %}
<details><summary>every figure of its summary.json ({{ section.main | length + section.more | length }})</summary>
<table class="figures">
<tbody>
{%- for key, value in section.main + section.more %}
<tr><td class="key">{{ key }}</td><td>{{ value }}</td></tr>
{%- endfor %}
</tbody>
</table>
</details>
{%- else %}
<p class="meta">No <code>summary.json</code>: the stage did not finish.</p>
{%- endif %}
{%- endfor %}
</body>
</html>
"""


def _lead(stage: str, summary: dict[str, Any]) -> str | None:
    """One sentence of a stage's result, from its ``summary.json`` (None when the stage has no such figures)."""
    get = summary.get
    try:
        if stage == SETUP_STAGE and isinstance(get("world"), dict):
            counts = get("world")["counts"]
            return f"{counts['pages']} pages and {sum(counts['questions'].values())} questions in the offline world"
        if stage == CLEANING_STAGE and get("rows_source") is not None:
            drops = ", ".join(f"{k} {v}" for k, v in (get("drop_reasons") or {}).items()) or "none"
            return f"{get('rows_kept')} of {get('rows_source')} raw trajectories kept (dropped: {drops})"
        if stage == RESAMPLING_STAGE and get("rows_train") is not None:
            rows = f"{get('rows_train')} training rows ({get('rows_val')} for validation)"
            return f"{get('rows_in')} trajectories resampled into {rows}"
        if stage == EVALUATION_STAGE and get("pass_at_k"):
            passes = ", ".join(f"pass@{k} {v:.3f}" for k, v in get("pass_at_k").items())
            return f"{get('n_questions')} questions x {get('samples_per_question')} samples: {passes}"
        if stage == DEMO_STAGE and get("termination"):
            ended = f"{get('termination')} after {get('turns')} turns"
            return f"the demo question ended in {ended}, answer {get('prediction')!r}"
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None


def _interval(accuracy: float, low: float, high: float, n: int) -> str:
    return f"{accuracy:.3f} [{low:.3f}, {high:.3f}] (n = {n})"


def story_rows(story: dict[str, list[dict[str, Any]]]) -> tuple[str, dict[str, list[dict[str, str]]]]:
    """:func:`~venus_utils.eval.heldout.run_story` as the index shows it: ``(headline slice, rows)``, each accuracy
    with its interval and n, each paired comparison on every question and on the headline slice."""
    headline = next((m["headline"]["slice"] for m in story["models"]), "all")
    models = [
        {
            "model": m["model"],
            "all": _interval(m["accuracy"], m["ci_low"], m["ci_high"], m["n"]),
            "headline": _interval(*(m["headline"][k] for k in ("accuracy", "ci_low", "ci_high", "n"))),
        }
        for m in story["models"]
    ]
    comparisons = []
    for c in story["comparisons"]:
        slices = [("all", c)] + ([(headline, c["headline"])] if headline != "all" and c.get("headline") else [])
        for name, figures in slices:
            comparisons.append(
                {
                    "pair": f"{c['model']} vs {c['baseline']}",
                    "slice": f"{name} (n = {figures['n']})",
                    "difference": f"{figures['difference']:+.3f} [{figures['diff_ci_low']:+.3f}, "
                    f"{figures['diff_ci_high']:+.3f}]",
                    "p": f"{figures['mcnemar_p']:.3g}",
                    "fixed_broken": f"{figures['fixed']} / {figures['broken']}",
                    "verdict": str(figures["verdict"]),
                }
            )
    return headline, {"models": models, "comparisons": comparisons}


def _figure_uri(path: Path) -> str | None:
    if not path.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_index(
    pages: list[Page],
    *,
    run_title: str,
    profile: str,
    run_shown: str,
    not_run: list[str],
    clean,
    story: dict[str, list[dict[str, Any]]] | None = None,
) -> str:
    overview, sections, finished, total = [], [], [], 0.0
    have_total = False
    for page in pages:
        summary = page.summary or {}
        if isinstance(summary.get("elapsed_s"), (int, float)):
            total += summary["elapsed_s"]
            have_total = True
        if summary.get("finished_at"):
            finished.append(str(summary["finished_at"]))
        status = "failed" if page.failed else "ran"
        overview.append(
            {
                "number": page.stage[:2],
                "file": page.file,
                "title": page.title,
                "status": status,
                "css": "failed" if status != "ran" else "",
                "elapsed": _format(summary.get("elapsed_s")) or "",
                "finished": summary.get("finished_at", ""),
            }
        )
        main, more = key_figures(summary) if page.summary is not None else ([], [])
        figure, caption = KEY_FIGURES.get(page.stage, (None, ""))
        sections.append(
            {
                "lead": clean(_lead(page.stage, summary) or ""),
                "figure": _figure_uri(page.notebook.parent / figure) if figure else None,
                "figure_caption": caption,
                "stage": page.stage,
                "file": page.file,
                "title": page.title,
                "failed": page.failed,
                "main": [(k, clean(v)) for k, v in main],
                "more": [(k, clean(v)) for k, v in more],
            }
        )
    for stage in not_run:
        overview.append(
            {
                "number": stage[:2],
                "file": "",
                "title": stage,
                "status": "not run",
                "css": "notrun",
                "elapsed": "",
                "finished": "",
            }
        )
    overview.sort(key=lambda row: row["number"])
    headline, story_shown = story_rows(story or {"models": [], "comparisons": []})
    template = jinja2.Environment(autoescape=True).from_string(_INDEX_TEMPLATE)
    return template.render(
        story=story_shown,
        headline=headline,
        run_title=run_title,
        profile=profile,
        run_shown=run_shown,
        overview=overview,
        sections=sections,
        rendered=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        finished=max(finished) if finished else None,
        total_s=total if have_total else None,
    )


# --- the book -----------------------------------------------------------------------------------------------
def _check_out(run_dir: Path, out: Path) -> None:
    run_r, out_r = run_dir.resolve(), out.resolve()
    if out_r == run_r or run_r.is_relative_to(out_r):
        raise BookError(f"--out {out} would replace the run folder {run_dir}; choose a folder inside or beside it")
    try:
        check_replaceable(out, BOOK_TOOL, MARKER)
    except FolderNotOurs as exc:
        raise BookError(str(exc)) from None


def build_book(
    run: str | Path,
    out: str | Path | None = None,
    *,
    notebooks_dir: Path | None = NOTEBOOKS_DIR,
    title: str | None = None,
) -> Path:
    """Render the run folder ``run`` into ``out`` (default ``<run>/book``); returns the path of ``index.html``.

    ``notebooks_dir``: the stage notebooks of the project, to list the stages this run has not executed (None:
    do not list them).  Raises :class:`RunMissing` when there is nothing to render and :class:`BookError` when a
    page would hold a secret or ``out`` is not a folder this module may replace.
    """
    run_dir, executed = _executed_run(run)
    out_dir = resolve_run_dir(out) if out else run_dir / "book"  # relative paths: from the repository, as --run
    _check_out(run_dir, out_dir)
    secrets = secret_values()
    rewrites = _path_rewrites(run_dir)
    stages = {p.stem for p in executed}
    pages, notebooks = _read_pages(executed, secrets, rewrites)

    run_title = title or f"venus-recipe · {run_dir.name} run"
    exporter = _exporter()
    rendered: dict[str, str] = {}
    for page, (nb, base) in zip(pages, notebooks):
        body = render_page(exporter, nb, page, run_title, base)
        rendered[page.file] = _outside_data_uris(body, lambda chunk: redact_text(chunk, secrets))
    not_run = []
    if notebooks_dir is not None:
        not_run = [p.stem for p in discover_notebooks(notebooks_dir) if p.stem not in stages]
    run_shown = _rewrite_paths(str(run_dir.resolve()), rewrites)
    index = render_index(
        pages,
        run_title=run_title,
        profile=run_dir.name,
        run_shown=run_shown,
        not_run=not_run,
        clean=lambda text: redact_text(_rewrite_paths(text, rewrites), secrets),
        story=run_story(run_dir),
    )
    rendered[INDEX] = _outside_data_uris(index, lambda chunk: redact_text(chunk, secrets))
    _refuse_leaks(rendered, secrets)
    with atomic_dir(out_dir, BOOK_TOOL, MARKER) as tmp:
        for name, text in rendered.items():
            atomic_write(tmp / name, text)
        write_json(tmp / MARKER, {"run": run_shown})
    return out_dir / INDEX


def _executed_run(run: str | Path) -> tuple[Path, list[Path]]:
    """``(run folder, its executed notebooks)``; :class:`RunMissing`, with the command that makes them, when
    there are none."""
    run_dir = resolve_run_dir(run)
    profile = run_dir.name
    hint = (
        f"run the pipeline first: `make pipeline PROFILE={profile}` "
        f"(or `python -m venus_utils.run.pipeline --params params/{profile}.yaml`)"
    )
    if not run_dir.is_dir():
        raise RunMissing(f"no run folder at {run_dir}: {hint}")
    executed = find_executed(run_dir)
    if not executed:
        raise RunMissing(f"{run_dir} holds no executed notebook (NN_stage/NN_stage.ipynb): {hint}")
    return run_dir, executed


def _read_pages(
    executed: list[Path], secrets: list[str], rewrites: list[tuple[str, str]]
) -> tuple[list[Page], list[tuple[Any, Path]]]:
    """A :class:`Page` per executed notebook, linked to its neighbours, and its tidied notebook with the folder
    its markdown's links start from; a page whose outputs looked like a secret says so on stderr."""
    import nbformat

    stages = {p.stem for p in executed}
    pages: list[Page] = []
    notebooks = []
    for path in executed:
        try:
            raw = nbformat.read(path, as_version=4)
        except Exception as exc:  # a notebook being written by a running pipeline, or a damaged file
            raise BookError(f"cannot read {path}: {exc}") from None
        summary_path = path.parent / SUMMARY
        summary = read_json(summary_path) if summary_path.is_file() else None
        nb, info = tidy_notebook(raw, secrets=secrets, rewrites=rewrites, stages=stages)
        page = Page(
            path.stem,
            path,
            notebook_title(raw, path.stem),
            info["failed"] or summary is None,
            summary,
            info["images"],
            info["removed_outputs"],
            f"{path.stem}.html",
        )
        pages.append(page)
        notebooks.append((nb, _markdown_base(raw, path)))
        if page.removed_outputs:
            print(
                f"book: {page.stage}: {page.removed_outputs} output(s) looked like a secret key and were left out "
                f"of the page; check {page.notebook}",
                file=sys.stderr,
            )
    for before, after in zip(pages, pages[1:]):
        before.next, after.prev = after, before
    return pages, notebooks


def _refuse_leaks(rendered: dict[str, str], secrets: list[str]) -> None:
    """The last line of defence: nothing is written if any page still holds a secret or something shaped like a
    key."""
    for name, text in rendered.items():
        found = leaks(text, secrets)
        if found:
            raise BookError(
                f"refusing to write the book: {name} would contain what looks like a secret "
                f"({', '.join(_mask(v) for v in found)}); remove it from the notebook's outputs"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.run.html_book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="runs/smoke", help="executed run folder (default runs/smoke)")
    parser.add_argument("--out", default=None, help="output folder (default <run>/book)")
    parser.add_argument("--title", default=None, help="site title (default 'venus-recipe · <profile> run')")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        index = build_book(args.run, args.out, title=args.title)
    except RunMissing as exc:
        print(f"book: {exc}", file=sys.stderr)
        return 2
    except BookError as exc:
        print(f"book: {exc}", file=sys.stderr)
        return 1
    pages = sorted(p.name for p in index.parent.glob("[0-9][0-9]_*.html"))
    print(f"book: {len(pages)} page(s) in {time.perf_counter() - t0:.1f}s")
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
