"""The project's one answer judge: an OpenAI-compatible LLM with the BrowseComp grading prompt, or offline.

DR-Venus grades answers with an LLM judge (Qwen3-235B-A22B-Instruct-2507 by default) and the BrowseComp
grader prompt, after an exact-match shortcut.  Here:

1. an empty answer is incorrect; an answer that, normalised, equals *any* alias is correct without a call
   (:func:`venus_utils.judging.answers.exact_answer`, the offline judge's rule below);
2. with an endpoint configured, the LLM judges the rest (temperature 0.1, top_p 0.95, 3 attempts); all
   aliases are shown to it as acceptable answers; verdicts are cached on disk (SQLite) keyed by
   (question, answer, ground truth, judge model), so a rerun costs nothing;
3. with no endpoint, a deterministic offline judge, ``offline-exact``, refuses the rest: an answer is correct only
   when, after normalisation, it EQUALS one of the ground truth's aliases (as exact-match scoring does in Search-R1).
   The normalisation: accents and Unicode forms folded, thousands separators, letter case, articles (a / an / the),
   punctuation (but not ``? ~ < >`` and the like: they qualify an answer), markdown emphasis, surrounding whitespace
   and a leading "the answer is" / "answer:" / "final answer:"; a date that is the whole answer is compared as a date;
   an alias written "Label: value" also counts as its value.  Lists, words added to a name, possessives, hedges
   ("probably A", "A?"), ranges and estimates, negations and sentences around the answer are refused.  (The earlier
   rules paid wrong answers: token F1 >= 0.5 near misses, then ``offline-strict`` and ``offline-strict-2``, which
   looked for an alias stated inside the answer, lists with the right name first, words added to a name,
   possessives and hedges.)

A judge error (endpoint down, no verdict in the reply) is never a wrong answer: its :attr:`Verdict.value` is NaN,
scorers leave it out and count it.  When the LLM judge fails on more than a small share of a batch
(``JUDGE_MAX_ERROR_SHARE``, default 0.05) the batch raises :class:`JudgeUnavailable` naming the endpoint and the
error, so the stage stops instead of reporting accuracies of unjudged answers; with ``JUDGE_FALLBACK=offline``
the failed answers are judged offline instead (method ``offline-fallback``) and :meth:`Judge.describe` says how
many.  A dead endpoint is given up on after its first few failures (no success yet), not after every item's retries.

The endpoint comes from the environment or ``.env`` (:func:`venus_utils.core.env.secret`): ``JUDGE_API_BASE``,
``JUDGE_API_KEY`` and ``JUDGE_MODEL`` (or DR-Venus's ``JUDGE_MODEL_NAME``), falling back to ``API_BASE`` /
``API_KEY``; ``JUDGE_FALLBACK`` (``stop`` or ``offline``) and ``JUDGE_MAX_ERROR_SHARE`` as above.
:meth:`Judge.describe` says which judge ran; keep it next to any number it produced.
:func:`judge_function` gives a judge as a plain function of lists (questions, predictions, ground truths),
the form the RL trainer takes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tqdm.auto import tqdm

from ..core.env import redact, redact_url, secret
from ..core.paths import RUNS_DIR
from . import answers

# From openai/simple-evals browsecomp_eval.py (itself from HLE's run_judge_results.py), verbatim.
GRADER_TEMPLATE = """
Judge whether the following [response] to [question] is correct or not based on the precise and unambiguous [correct_answer] below.

[question]: {question}

[response]: {response}

Your judgement must be in the format and criteria specified below:

extracted_final_answer: The final exact answer extracted from the [response]. Put the extracted answer as 'None' if there is no exact, final answer to extract from the response.

[correct_answer]: {correct_answer}

reasoning: Explain why the extracted_final_answer is correct or incorrect based on [correct_answer], focusing only on if there are meaningful differences between [correct_answer] and the extracted_final_answer. Do not comment on any background to the problem, do not attempt to solve the problem, do not argue for any answer different than [correct_answer], focus only on whether the answers match.

correct: Answer 'yes' if extracted_final_answer matches the [correct_answer] given above, or is within a small margin of error for numerical problems. Answer 'no' otherwise, i.e. if there if there is any inconsistency, ambiguity, non-equivalency, or if the extracted answer is incorrect.


confidence: The extracted confidence score between 0|\\%| and 100|\\%| from [response]. Put 100 if there is no confidence score available.
""".strip()  # noqa: E501 (the prompt's lines are kept verbatim)

DEFAULT_MODEL = "Qwen3-235B-A22B-Instruct-2507"  # DR-Venus's JUDGE_MODEL_NAME default
OFFLINE_NAME = "offline-exact"  # the answer, normalised, equals an alias (answers.exact_answer)
MAX_ERROR_SHARE = 0.05  # a batch with more LLM-judge failures than this share stops (JudgeUnavailable)
DEAD_AFTER = 8  # this many failures before any success: the endpoint is down, the rest of the batch is not tried
FALLBACKS = ("stop", "offline")
KINDS = ("auto", "llm", "offline")  # Judge.from_env's kinds (the notebooks' ``judge`` parameters)
_VERDICT_RE = re.compile(r"\bcorrect\**\s*:\s*\**\s*(yes|no)\b", re.IGNORECASE)


def default_cache_path() -> Path:
    return Path(os.environ.get("VENUS_JUDGE_CACHE", RUNS_DIR / ".cache" / "judge.sqlite"))


def format_correct_answer(ground_truth: Any) -> str:
    """The ``[correct_answer]`` text: the answer, or every alias when there are several."""
    names = answers.aliases(ground_truth)
    if len(names) <= 1:
        return names[0] if names else ""
    return "any one of the following (they are equivalent): " + "; ".join(names)


def grader_prompt(question: str, answer: str, ground_truth: Any) -> str:
    return GRADER_TEMPLATE.format(
        question=question, response=answer, correct_answer=format_correct_answer(ground_truth)
    )


def parse_verdict(reply: str) -> bool | None:
    """``correct: yes|no`` from the judge's reply (after any ``</think>``); None when absent."""
    reply = reply.split("</think>")[-1]
    found = _VERDICT_RE.findall(reply)
    return found[-1].lower() == "yes" if found else None


@dataclass
class Verdict:
    correct: bool
    method: str  # "exact" | "llm" | "offline" | "empty" | "error"
    judge: str  # the judge's name: the LLM model, or OFFLINE_NAME
    score: float | None = None  # token F1 of the best span and alias (exact / offline; for audit), None for the LLM
    reply: str | None = None  # the LLM's text, for audit
    cached: bool = False
    error: str | None = None

    @property
    def value(self) -> float:
        """1.0 / 0.0; NaN when the judge failed (an unjudged answer is not a wrong one)."""
        if self.method == "error":
            return math.nan
        return 1.0 if self.correct else 0.0


class JudgeUnavailable(RuntimeError):
    """The LLM judge failed on more than a small share of a batch: nothing of that batch can be reported."""


_STATE_LOCK = threading.Lock()  # a judge's error counters, updated from its worker threads


class _Cache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS verdicts "
            "(key TEXT PRIMARY KEY, model TEXT, correct INTEGER, reply TEXT, created REAL)"
        )
        self._db.commit()

    @staticmethod
    def key(question: str, answer: str, ground_truth: Any, model: str) -> str:
        gt = ground_truth if isinstance(ground_truth, str) else answers.aliases(ground_truth)
        return hashlib.sha256(json.dumps([question, answer, gt, model], ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> tuple[bool, str] | None:
        with self._lock:
            row = self._db.execute("SELECT correct, reply FROM verdicts WHERE key = ?", (key,)).fetchone()
        return (bool(row[0]), row[1]) if row else None

    def put(self, key: str, model: str, correct: bool, reply: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                (key, model, int(correct), reply, time.time()),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class Judge:
    """Decides whether an answer matches the ground truth; see the module docstring for the steps."""

    def __init__(
        self,
        api_base: str | None = None,
        api_key: str | None = None,
        model: str = DEFAULT_MODEL,
        cache_path: str | Path | None = None,
        timeout: float = 300.0,
        attempts: int = 3,
        backoff: float = 2.0,
        max_workers: int = 8,
        enable_thinking: bool | None = None,
        reason: str = "",
        fallback: str = "stop",
        max_error_share: float = MAX_ERROR_SHARE,
    ):
        if fallback not in FALLBACKS:
            raise ValueError(f"judge fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
        if not (isinstance(max_error_share, (int, float)) and 0.0 <= max_error_share <= 1.0):
            raise ValueError(f"the judge's max_error_share must be within [0, 1], got {max_error_share!r}")
        self.api_base = api_base.rstrip("/") if api_base else None
        self._api_key = api_key
        self.model = model
        self.timeout, self.attempts, self.backoff = timeout, max(1, attempts), backoff
        self.max_workers = max(1, max_workers)
        self.enable_thinking = enable_thinking
        self.reason = reason
        self.fallback, self.max_error_share = fallback, float(max_error_share)
        self.errors = 0  # LLM failures seen (all batches)
        self.fallbacks = 0  # of which judged offline instead (fallback="offline")
        # per batch (judge_many): set after DEAD_AFTER failures and no success, the endpoint counts as down
        self._dead: str | None = None
        self._batch_errors = self._batch_successes = 0
        self._cache = _Cache(cache_path or default_cache_path()) if self.api_base else None
        self._client = None

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_env(cls, kind: str = "auto", cache_path: str | Path | None = None, **kwargs) -> Judge:
        """``kind``: ``auto`` (LLM when an endpoint is configured, else offline), ``llm`` or ``offline``."""
        if kind not in KINDS:
            raise ValueError(f"judge kind must be {', '.join(KINDS[:-1])} or {KINDS[-1]}, got {kind!r}")
        base = secret("JUDGE_API_BASE") or secret("API_BASE")
        if kind == "offline" or (kind == "auto" and not base):
            reason = "asked for" if kind == "offline" else "no JUDGE_API_BASE / API_BASE configured"
            return cls(api_base=None, reason=reason)
        if not base:
            raise ValueError(
                "an LLM judge was asked for but neither JUDGE_API_BASE nor API_BASE is set (environment or .env)"
            )
        fallback = (os.environ.get("JUDGE_FALLBACK") or "stop").strip().lower()
        if fallback not in FALLBACKS:
            raise ValueError(f"JUDGE_FALLBACK must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
        kwargs.setdefault("fallback", fallback)
        share = os.environ.get("JUDGE_MAX_ERROR_SHARE")
        if share is not None and "max_error_share" not in kwargs:
            try:
                kwargs["max_error_share"] = float(share)
            except ValueError:
                raise ValueError(f"JUDGE_MAX_ERROR_SHARE must be a number in [0, 1], got {share!r}") from None
        key = secret("JUDGE_API_KEY") or secret("API_KEY")
        model = os.environ.get("JUDGE_MODEL") or os.environ.get("JUDGE_MODEL_NAME") or DEFAULT_MODEL
        thinking = os.environ.get("ENABLE_JUDGE_THINKING")
        if thinking is not None and "enable_thinking" not in kwargs:
            kwargs["enable_thinking"] = thinking.strip().lower() in ("1", "true", "yes")
        return cls(api_base=base, api_key=key, model=model, cache_path=cache_path, **kwargs)

    @property
    def kind(self) -> str:
        return "llm" if self.api_base else "offline"

    @property
    def name(self) -> str:
        return self.model if self.api_base else OFFLINE_NAME

    @property
    def endpoint(self) -> str | None:
        """The endpoint's URL as it may be shown: credentials masked (:func:`venus_utils.core.env.redact_url`)."""
        return redact(redact_url(self.api_base)) if self.api_base else None

    def describe(self) -> str:
        if self.api_base:
            fell_back = (
                f"; {self.fallbacks} answers judged by the offline judge after LLM errors (JUDGE_FALLBACK=offline)"
                if self.fallbacks
                else ""
            )
            return redact(
                f"LLM judge {self.model} at {self.endpoint} (BrowseComp grading prompt, exact-match shortcut, "
                f"all aliases, verdicts cached in {self._cache.path}{fell_back})"
            )
        why = f" ({self.reason})" if self.reason else ""
        return (
            f"offline judge{why}: the answer must equal one of the aliases after normalisation (letter case, "
            "articles, punctuation, accents, markdown emphasis and a leading 'the answer is' aside; dates compared as "
            "dates); anything else (lists, added words, hedges, ranges, sentences) is refused. "
            "Set JUDGE_API_BASE / JUDGE_API_KEY / JUDGE_MODEL for the LLM judge."
        )

    # -- judging ------------------------------------------------------------------------------------
    def _shortcut(self, answer: str, ground_truth: Any) -> Verdict | None:
        if not answer or not str(answer).strip() or str(answer).strip().lower() == "answer here":
            return Verdict(False, "empty", self.name, 0.0)
        # the exact-match shortcut: the offline judge's normalised equality with an alias
        if answers.exact_answer(answer, ground_truth):
            return Verdict(True, "exact", self.name, 1.0)
        if not self.api_base:  # the offline judge accepts exact answers only: the rest is refused
            score = answers.best_span_f1(answer, ground_truth)
            return Verdict(False, "offline", self.name, round(score, 4))
        return None

    def _http(self):
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def _ask(self, prompt: str) -> str:
        body: dict = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.1,
            "top_p": 0.95,
            "n": 1,
        }
        if self.enable_thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                resp = self._http().post(f"{self.api_base}/chat/completions", json=body, headers=headers)
                resp.raise_for_status()
                return resp.json()["choices"][0]["message"]["content"] or ""
            except Exception as exc:  # network errors, HTTP errors, malformed replies: retry
                last = exc
                if attempt + 1 < self.attempts:
                    time.sleep(self.backoff * (2**attempt))
        raise RuntimeError(
            redact(f"judge request failed after {self.attempts} attempts: {type(last).__name__}: {last}")
        )

    def _llm(self, question: str, answer: str, ground_truth: Any) -> Verdict:
        key = _Cache.key(question, answer, ground_truth, self.model)
        hit = self._cache.get(key)
        if hit is not None:
            return Verdict(hit[0], "llm", self.name, None, hit[1], cached=True)
        if self._dead is not None:  # the endpoint is down: do not wait through this item's retries too
            return Verdict(False, "error", self.name, error=self._dead)
        try:
            reply = self._ask(grader_prompt(question, answer, ground_truth))
        except RuntimeError as exc:
            with _STATE_LOCK:
                self.errors += 1
                self._batch_errors += 1
                if self._batch_successes == 0 and self._batch_errors >= DEAD_AFTER:
                    self._dead = f"endpoint given up on after {self._batch_errors} failures and no success: {exc}"
            return Verdict(False, "error", self.name, error=str(exc))
        with _STATE_LOCK:
            self._batch_successes += 1
        correct = parse_verdict(reply)
        if correct is None:  # DR-Venus scores an unreadable reply 0; not cached so a rerun asks again
            return Verdict(False, "error", self.name, reply=reply, error="no 'correct: yes|no' in the judge's reply")
        self._cache.put(key, self.model, correct, reply)
        return Verdict(correct, "llm", self.name, None, reply)

    def judge(self, question: str, answer: str, ground_truth: Any) -> Verdict:
        return self.judge_many([(question, answer, ground_truth)])[0]

    def _settle_errors(self, items: list[tuple[str, str, Any]], out: list[Verdict], asked: int) -> list[Verdict]:
        """Judge errors are never wrong answers: fall back to the offline judge when asked, else stop when they
        are more than ``max_error_share`` of the ``asked`` answers (those the exact-match shortcut did not decide),
        or when the endpoint never answered; a few stay ``error`` (value NaN) for scorers to leave out."""
        failed = [i for i, v in enumerate(out) if v.method == "error"]
        if not failed:
            return out
        if self.fallback == "offline":
            offline = Judge(api_base=None)
            for i in failed:
                v = offline._shortcut(items[i][1], items[i][2])
                out[i] = Verdict(v.correct, "offline-fallback", offline.name, v.score, error=out[i].error)
            self.fallbacks += len(failed)
            return out
        if len(failed) > self.max_error_share * asked or self._dead is not None:
            first = out[failed[0]].error or "no verdict"
            raise JudgeUnavailable(
                redact(
                    f"the LLM judge {self.model} at {self.endpoint} failed on {len(failed)} of the {asked} answers it "
                    f"was asked about (more than {self.max_error_share:.0%}, or no answer at all; first error: "
                    f"{first}). Nothing of this batch was "
                    "scored: unjudged answers are not wrong answers. Fix the endpoint (JUDGE_API_BASE, JUDGE_API_KEY) "
                    "and rerun (verdicts already given are cached), set JUDGE_FALLBACK=offline to judge failed "
                    "answers offline (the summary says how many), or unset JUDGE_API_BASE for the offline judge."
                )
            )
        return out

    def judge_many(self, items: Iterable[tuple[str, str, Any]], progress: bool = False) -> list[Verdict]:
        """Verdicts for (question, answer, ground truth) triples, in order; LLM calls run concurrently."""
        items = list(items)
        out: list[Verdict | None] = [self._shortcut(a, g) for _, a, g in items]
        todo = [i for i, v in enumerate(out) if v is None]
        self._dead, self._batch_errors, self._batch_successes = None, 0, 0  # each batch tries the endpoint afresh
        for attempt in range(2):  # the answers that failed get one more round (a transient failure)
            ask = todo if attempt == 0 else [i for i in todo if out[i].method == "error" and self._dead is None]
            if not ask:
                break
            with ThreadPoolExecutor(self.max_workers) as pool:
                results = pool.map(lambda i: self._llm(*items[i]), ask)
                bar = tqdm(results, total=len(ask), desc="judge", disable=not progress or attempt > 0)
                for i, verdict in zip(ask, bar):
                    out[i] = verdict
        return self._settle_errors(items, out, len(todo))  # type: ignore[arg-type]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cache is not None:
            self._cache.close()


def judged_score(value: Any) -> float:
    """A judge function's score as 1.0 / 0.0, or NaN where the judge failed (an unjudged answer is not wrong)."""
    value = float(value)
    return value if math.isnan(value) else (1.0 if value >= 1.0 else 0.0)


#: ``judge(questions, predictions, ground_truths)`` -> one score in [0, 1] per prediction, in order (NaN: the judge
#: failed on it; never count it as wrong)
JudgeFn = Callable[[Sequence[str], Sequence[str], Sequence[Any]], list[float]]


def judge_function(kind: str | Judge = "auto") -> tuple[JudgeFn, str]:
    """The project's judge as a plain function ``judge(questions, predictions, ground_truths) -> [1.0 | 0.0, ...]``
    (what the RL trainer, :func:`venus_utils.rl.rollout.evaluate_accuracy` and :func:`venus_utils.eval.metrics.score`
    take), and :meth:`Judge.describe` of the judge behind it (keep it next to any number it produced).  ``kind``: auto
    (the LLM judge when an endpoint is configured, else the exact offline judge), llm or offline
    (:meth:`Judge.from_env`), or a :class:`Judge` already made."""
    judge = Judge.from_env(kind) if isinstance(kind, str) else kind

    def scores(questions: Sequence[str], predictions: Sequence[str], ground_truths: Sequence[Any]) -> list[float]:
        return [v.value for v in judge.judge_many(zip(questions, predictions, ground_truths))]

    return scores, judge.describe()
