"""Read evaluation questions and predictions into one table shape.

Every loader returns a pandas DataFrame with the columns of :data:`QA_COLUMNS`:

- ``id``: a stable question id (from the file when it has one, else ``<source>-<row>``);
- ``question``: the question text given to the agent;
- ``answer``: the ground truth; several accepted aliases are joined with ``<|answer_split|>`` (DR-Venus's
  convention in ``reward_model.ground_truth``);
- ``source``: the benchmark or ``data_source`` the row comes from;

plus, for verl parquet, the scalar ``extra_info`` fields (the offline world's ``hops`` and ``template``).

Sources: verl QA parquet (DR-Venus's ``RL/data/test.parquet`` and the offline world's ``qa/test.parquet``),
question JSONL, and the benchmark files a user brings: BrowseComp (encrypted CSV), BrowseComp-ZH (encrypted
xlsx), xBench-DeepSearch (encrypted CSV) and GAIA's text-only questions.  The benchmarks are distributed
encrypted so that they do not leak into web crawls; the loaders decrypt them in memory and never write the
plain text anywhere.  Bad rows raise a ``ValueError`` naming the file, the row and the reason.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .io import read_json, read_jsonl, write_json, write_jsonl
from .paths import user_path
from .protocol import ANSWER_SPLIT

QA_COLUMNS = ["id", "question", "answer", "source"]


# --------------------------------------------------------------------------------------------------------
# Canary ciphers
# --------------------------------------------------------------------------------------------------------
def derive_key(password: str, length: int) -> bytes:
    """``length`` bytes of key: the SHA-256 digest of ``password`` repeated (BrowseComp's scheme)."""
    digest = hashlib.sha256(password.encode("utf-8")).digest()
    return (digest * (length // len(digest) + 1))[:length]


def _xor(data: bytes, key: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, key))


def encrypt(plaintext: str, password: str) -> str:
    """BrowseComp/BrowseComp-ZH encryption: UTF-8 bytes XOR the SHA-256 key stream, base64-encoded."""
    data = plaintext.encode("utf-8")
    return base64.b64encode(_xor(data, derive_key(password, len(data)))).decode("ascii")


def decrypt(ciphertext_b64: str, password: str) -> str:
    """Inverse of :func:`encrypt`; raises ``ValueError`` on bad base64 or a wrong password (bad UTF-8)."""
    data = base64.b64decode(ciphertext_b64, validate=True)
    return _xor(data, derive_key(password, len(data))).decode("utf-8")


def xbench_encrypt(plaintext: str, key: str) -> str:
    """xBench-DeepSearch encryption: UTF-8 bytes XOR the canary's own bytes (cycled), base64-encoded."""
    data, k = plaintext.encode("utf-8"), key.encode("utf-8")
    return base64.b64encode(_xor(data, (k * (len(data) // len(k) + 1))[: len(data)])).decode("ascii")


def xbench_decrypt(ciphertext_b64: str, key: str) -> str:
    data, k = base64.b64decode(ciphertext_b64, validate=True), key.encode("utf-8")
    return _xor(data, (k * (len(data) // len(k) + 1))[: len(data)]).decode("utf-8")


def _decrypt_columns(df: pd.DataFrame, path: Path, columns: list[str], fn) -> pd.DataFrame:
    if "canary" not in df.columns:
        raise ValueError(f"{path}: no 'canary' column; is this the encrypted release? (columns: {list(df.columns)})")
    out = df.copy()
    for i, row in df.iterrows():
        canary = row["canary"]
        if not isinstance(canary, str) or not canary:
            raise ValueError(f"{path}: row {i}: empty canary, cannot decrypt")
        for col in columns:
            value = row[col]
            if pd.isna(value) or value == "":
                continue
            try:
                out.at[i, col] = fn(str(value), canary)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: row {i}, column {col!r}: cannot decrypt ({exc})") from None
    return out


def _require(df: pd.DataFrame, path: Path, columns: list[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; found {list(df.columns)}")


def _qa_frame(ids, questions, answers, sources, path: Path, require_answer: bool = True) -> pd.DataFrame:
    df = pd.DataFrame({"id": list(ids), "question": list(questions), "answer": list(answers), "source": list(sources)})
    for col in ("question", "answer") if require_answer else ("question",):
        bad = df.index[df[col].isna() | (df[col].astype(str).str.strip() == "")]
        if len(bad):
            raise ValueError(f"{path}: row {bad[0]}: empty {col}")
    df["id"] = df["id"].astype(str)
    if df["id"].duplicated().any():
        dup = df.loc[df["id"].duplicated(), "id"].iloc[0]
        raise ValueError(f"{path}: duplicate question id {dup!r}")
    df["question"] = df["question"].astype(str).str.strip()
    df["answer"] = df["answer"].fillna("").astype(str).str.strip()
    return df[QA_COLUMNS]


# --------------------------------------------------------------------------------------------------------
# verl parquet and question files
# --------------------------------------------------------------------------------------------------------
def _prompt_question(prompt, path: Path, row: int) -> str:
    """The last user message of a verl ``prompt`` (a chat list, as numpy array or list)."""
    if isinstance(prompt, str):
        return prompt
    try:
        users = [m["content"] for m in list(prompt) if m.get("role") == "user"]
    except (TypeError, AttributeError, KeyError):
        raise ValueError(f"{path}: row {row}: 'prompt' is not a list of chat messages") from None
    if not users:
        raise ValueError(f"{path}: row {row}: 'prompt' has no user message")
    return users[-1]


def _ground_truth(value, path: Path, row: int) -> str:
    gt = value.get("ground_truth") if isinstance(value, dict) else value
    if gt is None:
        raise ValueError(f"{path}: row {row}: no reward_model.ground_truth")
    if not isinstance(gt, str) and hasattr(gt, "__iter__"):  # list GT: aliases
        return ANSWER_SPLIT.join(str(g) for g in gt)
    return str(gt)


def load_verl_qa(path: str | Path) -> pd.DataFrame:
    """A verl QA parquet (``data_source``, ``prompt``, ``reward_model.ground_truth``, ``extra_info.index``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: QA file not found")
    raw = pd.read_parquet(path)
    _require(raw, path, ["prompt", "reward_model"])
    ids, questions, answers, sources, extras = [], [], [], [], []
    for i, row in enumerate(raw.itertuples(index=False)):
        source = str(getattr(row, "data_source", None) or path.stem)
        extra = getattr(row, "extra_info", None)
        extra = extra if isinstance(extra, dict) else {}
        index = extra.get("index")
        ids.append(str(index) if index is not None else f"{source}-{i}")
        questions.append(_prompt_question(row.prompt, path, i))
        answers.append(_ground_truth(row.reward_model, path, i))
        sources.append(source)
        extras.append(
            {k: v for k, v in extra.items() if k not in ("index", "split") and isinstance(v, (str, int, float))}
        )
    df = _qa_frame(ids, questions, answers, sources, path)
    # scalar extra_info fields (the offline world's ``hops`` and ``template``) become columns for breakdowns
    return pd.concat([df, pd.DataFrame(extras, index=df.index)], axis=1) if any(extras) else df


def load_questions(path: str | Path, source: str | None = None, require_answer: bool = True) -> pd.DataFrame:
    """Questions from a verl parquet, or a JSONL/CSV/parquet with ``question`` and ``answer`` columns.

    ``gt`` is accepted for ``answer`` and ``index`` for ``id`` (the agent CLI's names).  With
    ``require_answer=False`` (questions to answer, not to grade) the answer may be missing or empty.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: QA file not found")
    if path.suffix == ".parquet":
        raw = pd.read_parquet(path)
        if "reward_model" in raw.columns:
            return load_verl_qa(path)
    elif path.suffix in (".jsonl", ".json"):
        raw = pd.DataFrame(read_jsonl(path))
    elif path.suffix == ".csv":
        raw = pd.read_csv(path)
    else:
        raise ValueError(f"{path}: unsupported question file type {path.suffix!r} (parquet, jsonl or csv)")
    raw = raw.rename(
        columns={
            k: v
            for k, v in (("gt", "answer"), ("index", "id"), ("data_source", "source"))
            if k in raw.columns and v not in raw.columns
        }
    )
    if not require_answer and "answer" not in raw.columns:
        raw["answer"] = ""
    _require(raw, path, ["question", "answer"])
    src = raw["source"].fillna(source or path.stem) if "source" in raw else [source or path.stem] * len(raw)
    ids = raw["id"] if "id" in raw else range(len(raw))
    answers = [
        _ground_truth(a, path, i) if isinstance(a, (str, list, dict)) else "" for i, a in enumerate(raw["answer"])
    ]
    return _qa_frame(ids, raw["question"], answers, src, path, require_answer)


def sample_per_source(qa: pd.DataFrame, n: int | None, seed: int = 0) -> pd.DataFrame:
    """At most ``n`` questions of each source (all when ``n`` is None), reproducibly drawn.

    When the table has a ``hops`` column (the offline world), each (source, hops) group gets ``n``: the world
    has one source, and a draw by hops keeps its 3- and 4-hop questions in small evaluations.
    """
    if n is None:
        return qa.reset_index(drop=True)
    keys = ["source", "hops"] if "hops" in qa.columns else ["source"]
    parts = [g.sample(n=min(n, len(g)), random_state=seed) for _, g in qa.groupby(keys, sort=True)]
    return pd.concat(parts).reset_index(drop=True) if parts else qa.iloc[:0]


def stratified_sample(
    qa: pd.DataFrame, n: int | None, by: Sequence[str] = ("template", "hops"), seed: int = 0
) -> pd.DataFrame:
    """``n`` questions drawn so that every group of ``by`` keeps its share of ``qa`` (all when ``n`` is None).

    Group sizes follow the table's own proportions (largest remainder), so the sample has the split's mix of
    templates and hop counts instead of its first rows; within a group the rows are a seeded random draw (which
    also mixes the sub-worlds).  Keys missing from the table are ignored, so a benchmark table without them is
    a plain random draw.  The result is shuffled, reproducibly.
    """
    if n is None or n >= len(qa):
        return qa.sample(frac=1, random_state=seed).reset_index(drop=True)
    if n <= 0:
        return qa.iloc[:0].reset_index(drop=True)
    keys = [k for k in by if k in qa.columns]
    if not keys:
        return qa.sample(n=n, random_state=seed).reset_index(drop=True)
    rng = np.random.default_rng(seed)  # one generator: equal-sized groups must not get the same positions
    groups = [g for _, g in qa.groupby(keys, sort=True)]
    quota = [n * len(g) / len(qa) for g in groups]
    take = [int(q) for q in quota]
    by_remainder = sorted(range(len(groups)), key=lambda i: (-(quota[i] - take[i]), i))
    for i in by_remainder[: n - sum(take)]:
        take[i] += 1
    parts = [g.sample(n=k, random_state=rng) for g, k in zip(groups, take) if k]
    return pd.concat(parts).sample(frac=1, random_state=rng).reset_index(drop=True)


# --------------------------------------------------------------------------------------------------------
# Benchmarks (files the user brings; never downloaded by the recipe)
# --------------------------------------------------------------------------------------------------------
def load_browsecomp(path: str | Path) -> pd.DataFrame:
    """OpenAI's ``browse_comp_test_set.csv``: ``problem``, ``answer``, ``problem_topic``, ``canary`` (encrypted)."""
    path = Path(path)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    _require(raw, path, ["problem", "answer", "canary"])
    plain = _decrypt_columns(raw, path, ["problem", "answer"], decrypt)
    return _qa_frame(
        [f"browsecomp-{i}" for i in range(len(plain))],
        plain["problem"],
        plain["answer"],
        ["BrowseComp"] * len(plain),
        path,
    )


def load_browsecomp_zh(path: str | Path) -> pd.DataFrame:
    """BrowseComp-ZH's ``browsecomp-zh-encrypted.xlsx`` (``Topic``, ``Question``, ``Answer``, ``canary``).

    Reading xlsx needs ``openpyxl``; a CSV export of the same sheet is accepted too.
    """
    path = Path(path)
    if path.suffix == ".csv":
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        try:
            raw = pd.read_excel(path, dtype=str).fillna("")
        except ImportError as exc:
            raise ImportError(f"{path}: reading .xlsx needs openpyxl (pip install openpyxl): {exc}") from None
    _require(raw, path, ["Question", "Answer", "canary"])
    plain = _decrypt_columns(raw, path, ["Question", "Answer"], decrypt)
    return _qa_frame(
        [f"browsecomp_zh-{i}" for i in range(len(plain))],
        plain["Question"],
        plain["Answer"],
        ["BrowseComp-ZH"] * len(plain),
        path,
    )


def load_xbench(path: str | Path, name: str | None = None) -> pd.DataFrame:
    """xBench-DeepSearch's ``DeepSearch.csv`` / ``DeepSearch-2510.csv`` (``id``, ``prompt``, ``answer``,
    ``canary``)."""
    path = Path(path)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    _require(raw, path, ["prompt", "answer", "canary"])
    plain = _decrypt_columns(raw, path, ["prompt", "answer"], xbench_decrypt)
    name = name or ("xBench-DS-2510" if "2510" in path.stem else "xBench-DS-2505")
    ids = plain["id"] if "id" in plain else range(len(plain))
    return _qa_frame([f"{name}-{i}" for i in ids], plain["prompt"], plain["answer"], [name] * len(plain), path)


def load_gaia_text(path: str | Path) -> pd.DataFrame:
    """GAIA's ``metadata.jsonl`` (or ``.parquet``), keeping the text-only questions (no attached file).

    Rows with an attachment are not errors: they are outside the "GAIA (Text)" subset the paper reports
    (103 of the 165 validation questions); their count is in ``df.attrs["dropped"]``.
    """
    path = Path(path)
    if path.suffix == ".parquet":
        raw = pd.read_parquet(path)
    else:
        raw = pd.DataFrame(read_jsonl(path))
    _require(raw, path, ["task_id", "Question", "Final answer"])
    files = raw["file_name"].fillna("").astype(str) if "file_name" in raw else pd.Series([""] * len(raw))
    text = raw[files.str.strip() == ""]
    df = _qa_frame(text["task_id"], text["Question"], text["Final answer"], ["GAIA (Text)"] * len(text), path)
    df.attrs["dropped"] = {"has_attachment": int(len(raw) - len(text))}
    return df


def write_questions(qa: pd.DataFrame, path: str | Path) -> Path:
    """The questions as the agent CLI's input JSONL (``index``, ``question``, ``answer``, ``data_source``)."""
    return write_jsonl(
        path,
        (
            {"index": r.id, "question": r.question, "answer": r.answer, "data_source": r.source}
            for r in qa.itertuples(index=False)
        ),
    )


def made_with(path: str | Path, fingerprint: dict, ignore: tuple[str, ...] = ()) -> bool:
    """Whether the resumable predictions file ``path`` was made with ``fingerprint`` (its ``<name>.params.json``),
    the keys in ``ignore`` left out of the comparison (recorded, not deciding: e.g. a model's folder when its
    content digest is in the fingerprint)."""
    sidecar = Path(path).with_name(Path(path).name + ".params.json")
    if not sidecar.exists():
        return False
    recorded, wanted = read_json(sidecar), json.loads(json.dumps(fingerprint, default=str))
    if not isinstance(recorded, dict):  # a damaged sidecar: nothing to resume
        return False
    for key in ignore:
        recorded.pop(key, None)
        wanted.pop(key, None)
    return recorded == wanted


def fresh_predictions(path: str | Path, fingerprint: dict, ignore: tuple[str, ...] = ()) -> bool:
    """Keep ``path`` (a resumable predictions file) only if it was made with the same ``fingerprint``.

    The fingerprint (model, questions, sampling...) is stored beside it as ``<name>.params.json``; a
    different one removes the old predictions so that a rerun with new settings does not mix them in.
    Returns True when existing predictions will be resumed.  Keys in ``ignore`` do not decide (:func:`made_with`).
    """
    path = Path(path)
    same = made_with(path, fingerprint, ignore)
    if not same and path.exists():
        path.unlink()
    write_json(path.with_name(path.name + ".params.json"), json.loads(json.dumps(fingerprint, default=str)))
    return same and path.exists()


BENCHMARK_LOADERS = {
    "BrowseComp": load_browsecomp,
    "BrowseComp-ZH": load_browsecomp_zh,
    "xBench-DS-2505": load_xbench,
    "xBench-DS-2510": load_xbench,
    "GAIA (Text)": load_gaia_text,
}


def load_benchmark(name: str, path: str | Path) -> pd.DataFrame:
    """Load a benchmark by the name used in the paper's table (``reference.BENCHMARKS``)."""
    if name not in BENCHMARK_LOADERS:
        raise ValueError(f"unknown benchmark {name!r}; known: {sorted(BENCHMARK_LOADERS)}")
    loader = BENCHMARK_LOADERS[name]
    return loader(path, name) if loader is load_xbench else loader(path)


# --------------------------------------------------------------------------------------------------------
# Predictions (the agent CLI's JSONL)
# --------------------------------------------------------------------------------------------------------
PREDICTION_DEFAULTS = {
    "prediction": "",
    "termination": "unknown",
    "turns": 0,
    "tool_call_count": 0,
    "parse_error_count": 0,
    "elapsed_seconds": float("nan"),
}


def load_predictions(path: str | Path) -> pd.DataFrame:
    """The agent's predictions JSONL, one row per (question, sample).

    Required per line: ``question``.  ``id`` (or the agent CLI's ``index``) and ``sample`` are used when
    present (``sample`` defaults to 0); missing inference fields get neutral defaults (see
    :data:`PREDICTION_DEFAULTS`); every other field (``messages``, ``gt``, ``turn_log``...) is kept.
    """
    rows = read_jsonl(path)
    for n, rec in enumerate(rows):
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str):
            raise ValueError(f"{path}: prediction {n + 1}: needs a 'question' string")
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=["question", "sample", *PREDICTION_DEFAULTS])
    if "id" not in df and "index" in df:  # the agent CLI calls the question id ``index``
        df["id"] = df["index"].astype(str)
    for col, default in {"sample": 0, **PREDICTION_DEFAULTS}.items():
        df[col] = df[col].fillna(default) if col in df else default
    df["prediction"] = df["prediction"].astype(str)
    df["sample"] = df["sample"].astype(int)
    return df


# --------------------------------------------------------------------------------------------------------
# The notebooks' question source
# --------------------------------------------------------------------------------------------------------
def load_qa(
    qa_file: str | Path | None, benchmark: str | None = None, default: str | Path | None = None
) -> pd.DataFrame:
    """The notebooks' question source: ``benchmark`` read from ``qa_file``, else ``qa_file`` (verl parquet / JSONL /
    CSV), else ``default`` (the offline world's test split)."""
    if benchmark:
        if not qa_file:
            raise ValueError(f"benchmark={benchmark!r} needs qa_file, the benchmark file you downloaded")
        return load_benchmark(benchmark, user_path(qa_file))
    if qa_file is None and default is None:
        raise ValueError("no question file: give qa_file")
    return load_questions(user_path(qa_file) if qa_file else default)
