"""Build the offline research world folder (deterministic for a seed).

Layout (the run-folder contract): ``pages.jsonl``, ``qa/{train,val,test}.parquet`` (+ ``qa/rl.parquet`` with
``rl_frac``: questions for RL only; the verl QA schema of
DR-Venus's ``RL/data/test.parquet``), ``trajectories/train-NNNNN.parquet`` (raw REDSearcher schema: ``meta``
{question, answer}, ``messages`` without a system message, tool results as role ``user`` with raw Serper
text, ``system_prompt``), ``trajectory_noise.jsonl`` (the noise injected in each row and, with
``expert_guess_rate``, the teacher's guesses) and ``world.json`` (counts, the cleaner's expected report, the
teacher's flaws).
The file names and the readers of the folder live in :mod:`venus_utils.core.world_store` (below the tools, which the
builder runs).
"""

from __future__ import annotations

import difflib
import hashlib
import random
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from ..core import protocol
from ..core.io import atomic_dir, atomic_path, check_replaceable, write_json, write_jsonl
from ..core.validation import FRACTION, NON_NEGATIVE, SEED, Range, check_fields
from ..core.world_store import (
    META_FILE,
    NOISE_FILE,
    PAGES_FILE,
    TRAJECTORIES_DIR,
    qa_path,
    subworld_group,
    subworld_tier,
)
from ..tools.search import LocalSearch
from ..tools.visit import LocalVisit
from .expert import NOISE_KINDS, VISIT_POLICIES, Expert, NoiseLog, Trace, inject_noise
from .graph import SIZES, NameMaker, build_graph
from .question_templates import HARD_TEMPLATES, TEMPLATES, make_questions

DATA_SOURCE = "venus_world"
WORLD_TOOL = "venus_utils.world"  # what writes a world folder; it replaces only a folder that holds nothing else
ABILITY = "search & question answering"  # DR-Venus's constant

#: The most sub-worlds one index may hold: a small sub-world is ~300 pages and ~1,800 questions in memory at once.
MAX_WORLDS = 256


@dataclass
class WorldConfig:
    """Knobs of the offline world (defaults: DR-Venus's tool settings, a small world, light noise); each field holds
    its default, ``help`` and, where they apply, its ``range`` and ``choices`` (:func:`check_fields` reads them)."""

    seed: int = field(
        default=0,
        metadata={"range": SEED, "help": "the world's seed: entities, pages, questions and expert trajectories"},
    )
    size: str = field(
        default="small", metadata={"help": "tiny (~90 pages) | small (~300) | medium (~3,000) pages per sub-world"}
    )
    n_worlds: int = field(
        default=1,
        metadata={
            "range": Range(1, MAX_WORLDS),
            "help": "sub-worlds in one index (more entities -> more training data, facts cannot be memorised)",
        },
    )
    heldout_worlds: int = field(
        default=0,
        metadata={
            "range": Range(0, MAX_WORLDS),
            "help": "the last sub-worlds' questions go only to val/test (their pages stay in the index)",
        },
    )
    val_frac: float = field(
        default=0.05, metadata={"range": FRACTION, "help": "share of start entities whose questions form val"}
    )
    test_frac: float = field(
        default=0.10, metadata={"range": FRACTION, "help": "share of start entities whose questions form test"}
    )
    rl_frac: float = field(
        default=0.0,
        metadata={
            "range": FRACTION,
            "help": "share of start entities (trained sub-worlds) whose questions form rl: RL's own questions, never"
            " in the SFT trajectories nor in val/test (DR-Venus: REDSearcher's RL 1K set)",
        },
    )
    min_hops: int = field(
        default=2, metadata={"range": Range(1, 10), "help": "questions: chains of at least this many relations"}
    )
    max_hops: int = field(default=4, metadata={"range": Range(1, 10), "help": "...and at most this many"})
    # --- the hard research tier: sub-worlds by index, [sft easy | sft hard | rl | held-out] -------------
    hard_worlds: int = field(
        default=0,
        metadata={
            "range": Range(0, MAX_WORLDS),
            "help": "the last sub-worlds are the hard tier (held-out and RL ones included when they are within)",
        },
    )
    rl_worlds: int = field(
        default=0,
        metadata={
            "range": Range(0, MAX_WORLDS),
            "help": "the sub-worlds before the held-out ones whose questions all go to RL (qa/rl.parquet): no fact, "
            "page or answer of theirs is in any SFT trajectory (DR-Venus's separate RL set)",
        },
    )
    hard_min_hops: int = field(
        default=4, metadata={"range": Range(1, 10), "help": "hard-tier questions: chains of this many relations..."}
    )
    hard_max_hops: int = field(
        default=5, metadata={"range": Range(1, 10), "help": "...to this many (HARD_TEMPLATES add the 4-5 hop chains)"}
    )
    hard_page_only_facts: bool = field(
        default=True,
        metadata={
            "help": "hard pages open with fact-free sentences until their facts start after snippet_chars: search "
            "shows none of them, a visit reads them"
        },
    )
    hard_namesake_rate: float = field(
        default=0.5,
        metadata={"range": FRACTION, "help": "near-namesakes in hard sub-worlds (search results to tell apart)"},
    )
    namesake_rate: float = field(
        default=0.10,
        metadata={"range": FRACTION, "help": "share of people / organisations that are near-namesakes of another"},
    )
    distractor_rate: float = field(
        default=0.25, metadata={"range": FRACTION, "help": "share of pages with a misleading extra sentence"}
    )
    search_top_k: int = field(
        default=10,
        metadata={"range": Range(1, 100), "help": "results per query (Serper default 10; offline profiles use fewer)"},
    )
    snippet_chars: int = field(
        default=160,
        metadata={"range": Range(1, 100_000), "help": "snippet length (Serper snippets are ~160 characters)"},
    )
    visit_max_sentences: int = field(
        default=2, metadata={"range": Range(1, 1_000), "help": "sentences a local visit returns"}
    )
    visit_with_evidence: bool = field(
        default=False, metadata={"help": 'local visit also returns the whole page as "Evidence in page"'}
    )
    visit_policy: str = field(
        default="always",
        metadata={
            "choices": VISIT_POLICIES,
            "help": 'expert: visit every hop\'s page | "needed": only when the snippet lacks the fact',
        },
    )
    noise: dict = field(
        default_factory=lambda: {"duplicate": 0.08, "malformed": 0.05, "disallowed": 0.05, "wrong_answer": 0.05},
        metadata={
            "help": "per kind of defect the cleaner must catch (a duplicate call, a malformed call, a disallowed "
            "tool, a wrong final answer), the share of expert trajectories given it"
        },
    )
    query_string_rate: float = field(
        default=0.10,
        metadata={
            "range": FRACTION,
            "help": "expert search calls with a plain-string query (valid; the cleaner normalises)",
        },
    )
    expert_guess_rate: float = field(
        default=0.0,
        metadata={
            "range": FRACTION,
            "help": "an imperfect teacher (REDSearcher's kind): at a hop it would visit whose results hold near-"
            "namesakes, the share where the expert takes one of them to be the entity unread (Expert); "
            "world.json's trajectories.teacher counts the guesses",
        },
    )
    max_trajectories: int | None = field(
        default=None,
        metadata={"range": NON_NEGATIVE, "help": "cap on expert trajectories (None: one per train question)"},
    )
    shard_size: int = field(
        default=10_000, metadata={"range": Range(1, 10_000_000), "help": "rows per trajectory parquet shard"}
    )
    current_date: str = field(
        default=protocol.DEFAULT_DATE, metadata={"help": "date line of the expert trajectories' system prompt"}
    )

    def __post_init__(self):
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, got {self.size!r}")
        check_fields(self, "WorldConfig")
        if self.min_hops > self.max_hops:
            raise ValueError(f"WorldConfig.min_hops={self.min_hops}: must be <= max_hops {self.max_hops}")
        for kind, rate in self.noise.items():
            if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and FRACTION.ok(rate)):
                raise ValueError(f"WorldConfig.noise[{kind!r}]={rate!r}: must be a number {FRACTION.describe()}")
        if not (0 <= self.rl_frac and self.val_frac + self.test_frac + self.rl_frac < 1):
            raise ValueError("need rl_frac >= 0 and val_frac + test_frac + rl_frac < 1")
        if not 0 <= self.heldout_worlds < max(self.n_worlds, 1) or self.n_worlds < 1:
            raise ValueError("need n_worlds >= 1 and 0 <= heldout_worlds < n_worlds")
        if self.rl_worlds + self.heldout_worlds >= self.n_worlds:
            raise ValueError(
                f"rl_worlds ({self.rl_worlds}) + heldout_worlds ({self.heldout_worlds}) must leave at least one of "
                f"the {self.n_worlds} sub-worlds for the SFT trajectories"
            )
        if self.hard_worlds > self.n_worlds:
            raise ValueError(f"hard_worlds ({self.hard_worlds}) must be <= n_worlds ({self.n_worlds})")
        if self.hard_min_hops > self.hard_max_hops:
            raise ValueError(f"hard_min_hops={self.hard_min_hops}: must be <= hard_max_hops {self.hard_max_hops}")
        unknown = set(self.noise) - set(NOISE_KINDS)
        if unknown:
            raise ValueError(f"unknown noise kinds {sorted(unknown)}; known: {NOISE_KINDS}")

    @classmethod
    def from_knobs(cls, knobs: dict[str, Any], **base: Any) -> WorldConfig:
        """``WorldConfig(**base, **knobs)`` where ``knobs`` are a profile's ``world_knobs`` (or ``build_world``'s):
        a key that is no field, or one that ``base`` sets (``seed``, ``size``: the notebook's own parameters), is a
        ValueError naming it."""
        names = [f.name for f in fields(cls)]
        for key in knobs:
            if key in base:
                raise ValueError(f"'{key}' is not a world knob: it is set by the stage's own '{key}' parameter")
            if key not in names:
                close = difflib.get_close_matches(str(key), [n for n in names if n not in base], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                known = ", ".join(n for n in names if n not in base)
                raise ValueError(f"unknown world knob {key!r}{hint}; knobs: {known}")
        return cls(**base, **knobs)


def _unit(*parts) -> float:
    """A stable number in [0, 1) from ``parts`` (not Python's salted hash)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _split(cfg: WorldConfig, q) -> str:
    u = _unit(cfg.seed, "split", q.chain[0].id)
    group = subworld_group(q.world, cfg.n_worlds, cfg.heldout_worlds, cfg.rl_worlds)
    if group == "rl":
        return "rl"
    if group == "heldout":
        return "val" if u < cfg.val_frac / max(cfg.val_frac + cfg.test_frac, 1e-9) else "test"
    if u < cfg.test_frac:
        return "test"
    if u < cfg.test_frac + cfg.val_frac:
        return "val"
    return "rl" if u < cfg.test_frac + cfg.val_frac + cfg.rl_frac else "train"


def _tier_counts(cfg: WorldConfig, qa: dict) -> dict:
    """Questions per tier, sub-world group and split (``world.json``), e.g. ``{"hard": {"rl": {"rl": 310}}}``."""
    out: dict = {}
    for split, items in qa.items():
        for q, _, _ in items:
            tier = subworld_tier(q.world, cfg.n_worlds, cfg.hard_worlds)
            group = subworld_group(q.world, cfg.n_worlds, cfg.heldout_worlds, cfg.rl_worlds)
            cell = out.setdefault(tier, {}).setdefault(group, {})
            cell[split] = cell.get(split, 0) + 1
    return out


def _qa_table(rows: list[dict]):
    schema = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("index", pa.string()),
                        ("split", pa.string()),
                        ("template", pa.string()),
                        ("hops", pa.int32()),
                        ("world", pa.int32()),
                    ]
                ),
            ),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _trajectory_table(rows: list[dict]):
    schema = pa.schema(
        [
            ("meta", pa.struct([("question", pa.string()), ("answer", pa.string())])),
            ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("system_prompt", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _write_parquet(path: Path, table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def build_world(out_dir: str | Path, seed: int = 0, size: str = "small", progress: bool = True, **knobs) -> dict:
    """Generate the world into ``out_dir`` and return its ``world.json`` content (see the module docstring): the
    sub-worlds' entities and pages, their questions, the expert's trajectories (the questions it cannot solve with
    these tools are dropped), the question splits, the noisy raw trajectories, and the counts that describe them.
    The folder is written aside and swapped in whole; an existing ``out_dir`` is replaced only while it holds nothing
    but a world this function wrote (:func:`venus_utils.core.io.check_replaceable`)."""
    cfg = WorldConfig.from_knobs(knobs, seed=seed, size=size)
    check_replaceable(out_dir, WORLD_TOOL)  # before anything is generated
    t0 = time.perf_counter()
    entities, pages, hard_entities = _entities_and_pages(cfg, seed)
    questions = _questions(cfg, entities, hard_entities)
    expert = _expert(cfg, pages, entities)
    solved, traces, unsolvable = [], [], 0
    for n, q in enumerate(tqdm(questions, desc="expert", disable=not progress, mininterval=2)):
        # the teacher's guesses draw from their own generator per question: none at expert_guess_rate 0
        guess = random.Random(f"{seed}-guess-{n}") if cfg.expert_guess_rate > 0 else None
        out = expert.solve_traced(q, random.Random(f"{seed}-expert-{n}"), guess)
        if out is None:
            unsolvable += 1
        else:
            solved.append((q, out[0]))
            traces.append(out[1])
    with atomic_dir(out_dir, WORLD_TOOL) as out:  # the whole world or none of it
        meta = _write_world(out, cfg, seed, solved, traces, expert, pages, entities, questions, unsolvable, t0)
    return meta


def _write_world(
    out: Path, cfg: WorldConfig, seed: int, solved, traces, expert, pages, entities, questions, unsolvable, t0
):
    """Write the world's files into ``out``; returns ``world.json``'s content."""
    qa = _write_splits(out, cfg, seed, solved)
    trajectories = _write_trajectories(out, cfg, seed, qa["train"], solved, traces, expert)
    write_jsonl(out / PAGES_FILE, pages)
    meta = {
        "format": "venus-world/1",
        "config": asdict(cfg),
        "current_date": cfg.current_date,
        "tools": {
            "search": {"top_k": cfg.search_top_k, "snippet_chars": cfg.snippet_chars},
            "visit": {"max_sentences": cfg.visit_max_sentences, "with_evidence": cfg.visit_with_evidence},
        },
        "counts": _counts(cfg, pages, entities, questions, unsolvable, solved, qa),
        "trajectories": trajectories,
        "build_seconds": round(time.perf_counter() - t0, 2),
    }
    write_json(out / META_FILE, meta)
    return meta


def _entities_and_pages(cfg: WorldConfig, seed: int) -> tuple[list, list[dict], list]:
    """Every sub-world's entity graph and pages (entity pages and trivia), and the hard tier's entities."""
    names = NameMaker(random.Random(f"{seed}-names"))
    entities, pages, hard_entities = [], [], []
    for w in range(cfg.n_worlds):
        hard = subworld_tier(w, cfg.n_worlds, cfg.hard_worlds) == "hard"
        ents, trivia = build_graph(
            w,
            SIZES[cfg.size],
            random.Random(f"{seed}-graph-{w}"),
            names,
            cfg.hard_namesake_rate if hard else cfg.namesake_rate,
            cfg.distractor_rate,
            cfg.snippet_chars if hard and cfg.hard_page_only_facts else 0,
        )
        entities += ents
        pages += [
            {"url": e.url, "title": e.name, "text": e.text, "id": e.id, "type": e.type, "world": e.world} for e in ents
        ]
        pages += trivia
        hard_entities += ents if hard else []
    return entities, pages, hard_entities


def _questions(cfg: WorldConfig, entities: list, hard_entities: list) -> list:
    """The easy tier's questions in the order of a build without a hard tier (same indices, same expert draws), then
    the hard tier's longer chains."""
    by_id = {e.id: e for e in entities}
    hard_ids = {e.id for e in hard_entities}
    questions = make_questions([e for e in entities if e.id not in hard_ids], by_id, cfg.min_hops, cfg.max_hops)
    questions += make_questions(hard_entities, by_id, cfg.hard_min_hops, cfg.hard_max_hops, TEMPLATES + HARD_TEMPLATES)
    return questions


def _expert(cfg: WorldConfig, pages: list[dict], entities: list) -> Expert:
    """The expert researcher, with the world's own search and visit tools (and, for its guesses, the entity behind
    each page)."""
    search = LocalSearch(pages, top_k=cfg.search_top_k, snippet_chars=cfg.snippet_chars)
    visit = LocalVisit(pages, max_sentences=cfg.visit_max_sentences, with_evidence=cfg.visit_with_evidence)
    return Expert(search, visit, cfg.visit_policy, cfg.query_string_rate, cfg.expert_guess_rate, entities)


def _write_splits(out: Path, cfg: WorldConfig, seed: int, solved: list) -> dict[str, list]:
    """The solved questions split (train, val, test and, with RL questions, rl) and written as verl QA parquet;
    returns ``{split: [(question, expert messages, question index)]}``."""
    qa = {"train": [], "val": [], "test": [], **({"rl": []} if cfg.rl_frac > 0 or cfg.rl_worlds > 0 else {})}
    for n, (q, msgs) in enumerate(solved):
        qa[_split(cfg, q)].append((q, msgs, n))
    for split, items in qa.items():
        rows = [
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"content": q.text, "role": "user"}],
                "ability": ABILITY,
                "reward_model": {"ground_truth": protocol.ANSWER_SPLIT.join(q.aliases), "style": "rule"},
                "extra_info": {
                    "index": f"{DATA_SOURCE}_{seed}_{n}",
                    "split": split,
                    "template": q.template,
                    "hops": q.hops,
                    "world": q.world,
                },
            }
            for q, _, n in items
        ]
        _write_parquet(qa_path(out, split), _qa_table(rows))
    return qa


def _write_trajectories(
    out: Path, cfg: WorldConfig, seed: int, train: list, solved: list, traces: list[Trace], expert: Expert
) -> dict:
    """The training questions' expert trajectories with noise injected at the configured rates, written as raw
    REDSearcher shards (and the noise of each row as JSONL, with the teacher's guesses when it guesses); returns
    ``world.json``'s ``trajectories`` record, with what DR-Venus's cleaner should report on these shards and the
    teacher's flaws (:func:`_teacher_record`)."""
    train_questions = len(train)
    if cfg.max_trajectories is not None and len(train) > cfg.max_trajectories:
        train = random.Random(f"{seed}-cap").sample(train, cfg.max_trajectories)
        train.sort(key=lambda t: t[2])
    wrong_pools: dict[str, set] = {}  # wrong answers of the right kind: other answers of the same template
    for q, _ in solved:
        wrong_pools.setdefault(q.template, set()).add(q.answer)
    wrong_pool_all = sorted({q.answer for q, _ in solved})
    log, noise_rows, traj_rows, written = NoiseLog(), [], [], []
    sys_prompt = protocol.system_prompt(cfg.current_date)
    for row, (q, msgs, n) in enumerate(train):
        msgs, kinds = inject_noise(
            msgs,
            q,
            random.Random(f"{seed}-noise-{n}"),
            cfg.noise,
            expert,
            sorted(wrong_pools[q.template]) if len(wrong_pools[q.template]) > 1 else wrong_pool_all,
        )
        for k in kinds:
            log.rows[k] += 1
            if k in log.turns:
                log.turns[k] += 1
        record = {"row": row, "index": f"{DATA_SOURCE}_{seed}_{n}", "noise": kinds}
        if cfg.expert_guess_rate > 0:  # (a world without the knob keeps its file byte for byte)
            record["guesses"] = [g.as_dict() for g in traces[n].guesses]
        noise_rows.append(record)
        right = protocol.extract_answer(msgs[-1]["content"]).lower() in {a.lower() for a in q.aliases}
        written.append((traces[n], right))
        traj_rows.append(
            {"meta": {"question": q.text, "answer": q.answer}, "messages": msgs, "system_prompt": sys_prompt}
        )
    shards = []
    for s, start in enumerate(range(0, max(len(traj_rows), 1), cfg.shard_size)):
        path = out / TRAJECTORIES_DIR / f"train-{s:05d}.parquet"
        _write_parquet(path, _trajectory_table(traj_rows[start : start + cfg.shard_size]))
        shards.append(path.name)
    write_jsonl(out / NOISE_FILE, noise_rows)
    return {
        "rows": len(traj_rows),
        "shards": shards,
        "noise_rows": log.rows,
        "clean_rows": sum(not r["noise"] for r in noise_rows),
        # what DR-Venus's cleaner (prepare_trajectories.py) should report on these shards
        "expected_cleaner": {
            "duplicate_tool_turns_removed": log.turns["duplicate"],
            "pruned_tool_turns_removed": log.turns["disallowed"],
            "pruned_tool_response_turns_removed": log.turns["disallowed"],
            "pruned_tool_name_counts": {"PythonInterpreter": log.turns["disallowed"]}
            if log.turns["disallowed"]
            else {},
            "malformed_tool_turns_skipped": log.turns["malformed"],
            # injected wrong answers, and the teacher's wrong routes that no injected one replaced
            "wrong_final_answers": sum(not right for _, right in written),
        },
        "teacher": _teacher_record(cfg, train_questions, written),
    }


def _teacher_record(cfg: WorldConfig, train_questions: int, written: list[tuple[Trace, bool]]) -> dict:
    """``world.json``'s ``trajectories.teacher``: the expert's flaws in the written trajectories, in numbers.

    A limited teacher: ``trajectories`` of the ``train_questions`` solved training questions have one
    (``max_trajectories``; ``trajectories_per_train_question``).  An imperfect one (``expert_guess_rate``): at
    ``hops_guessable`` hops it would visit, the results showed the entity's page and a near-namesake's; at
    ``hops_guessed`` of them it took one unread (``hops_guessed_namesake``: a namesake's; ``hops_assumed``: facts of
    a namesake route it could not read and assumed).  ``trajectories_guessed`` have a guess: by the teacher's own
    answer ``trajectories_guessed_right`` end right (right by luck, ``hops_guessed_in_right`` guesses) and
    ``trajectories_guessed_wrong`` wrong.  The ``*_kept`` counts are those whose written final answer is right, what a
    correctness filter keeps (a lucky route whose answer the ``wrong_answer`` noise replaced is not):
    ``hops_guessed_kept / hops_guessed`` is the share of guessing hops it keeps."""
    guessed = [(t, right) for t, right in written if t.guesses]
    return {
        "guess_rate": cfg.expert_guess_rate,
        "max_trajectories": cfg.max_trajectories,
        "train_questions": train_questions,
        "trajectories": len(written),
        "trajectories_per_train_question": round(len(written) / train_questions, 4) if train_questions else 0.0,
        "hops": sum(t.hops for t, _ in written),
        "hops_guessable": sum(t.guessable_hops for t, _ in written),
        "hops_guessed": sum(len(t.guesses) for t, _ in guessed),
        "hops_guessed_namesake": sum(g.namesake for t, _ in guessed for g in t.guesses),
        "hops_assumed": sum(t.assumed_hops for t, _ in guessed),
        "trajectories_guessed": len(guessed),
        "trajectories_guessed_right": sum(t.right for t, _ in guessed),
        "trajectories_guessed_wrong": sum(not t.right for t, _ in guessed),
        "hops_guessed_in_right": sum(len(t.guesses) for t, _ in guessed if t.right),
        "trajectories_guessed_kept": sum(right for _, right in guessed),
        "hops_guessed_kept": sum(len(t.guesses) for t, right in guessed if right),
    }


def _counts(cfg: WorldConfig, pages, entities, questions, unsolvable: int, solved, qa) -> dict:
    """``world.json``'s ``counts``: pages, entities by type, questions generated, unsolvable, per split, hops, tier."""
    hops: dict[str, int] = {}
    for q, _ in solved:
        hops[str(q.hops)] = hops.get(str(q.hops), 0) + 1
    return {
        "pages": len(pages),
        "entities": {t: sum(e.type == t for e in entities) for t in ("country", "city", "person", "org", "work")},
        "trivia_pages": sum(p["type"] == "trivia" for p in pages),
        "questions_generated": len(questions),
        "questions_unsolvable": unsolvable,
        "questions": {k: len(v) for k, v in qa.items()},
        "questions_by_hops": dict(sorted(hops.items())),
        "questions_by_tier": _tier_counts(cfg, qa),
    }
