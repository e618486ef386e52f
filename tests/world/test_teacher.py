"""The imperfect, limited teacher (``expert_guess_rate``, ``max_trajectories``): lucky routes the correctness filter
keeps, wrong routes it drops, and world.json's ``trajectories.teacher`` counts both."""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from venus_utils.core import protocol
from venus_utils.core.io import read_json, read_jsonl
from venus_utils.world import build_world
from venus_utils.world.build import WorldConfig, _entities_and_pages, _expert, _questions

TINY = dict(size="tiny", progress=False, search_top_k=3, snippet_chars=60, visit_max_sentences=1)
#: params/cpu.yaml's 00_setup.world_knobs scaled down to 4 tiny sub-worlds: 2 easy, 2 hard (namesakes among the top-2
#: results, facts only on the pages), the last held out
HARD = dict(
    size="tiny",
    progress=False,
    n_worlds=4,
    heldout_worlds=1,
    hard_worlds=2,
    hard_min_hops=3,
    hard_max_hops=4,
    search_top_k=2,
    snippet_chars=130,
    max_hops=3,
    visit_max_sentences=1,
    visit_policy="needed",
)
#: noise without injected wrong answers: every wrong final answer is the teacher's
NO_WRONG = {"duplicate": 0.08, "malformed": 0.05, "disallowed": 0.05, "wrong_answer": 0.0}
GUESS_RE = re.compile(r"Result \d+ looks like [^;]+; I will take it that ")
SHARD = "trajectories/train-00000.parquet"


def _files(d):
    return {
        p.relative_to(d).as_posix(): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name != "world.json"
    }


def _rows(d):
    """(messages, final answer, right?, visited urls, noise record) per trajectory row."""
    qa = pd.read_parquet(d / "qa" / "train.parquet")
    aliases = {
        p[0]["content"]: protocol.split_aliases(r["ground_truth"]) for p, r in zip(qa["prompt"], qa["reward_model"])
    }
    df = pd.read_parquet(d / SHARD)
    out = []
    for (_, row), log in zip(df.iterrows(), read_jsonl(d / "trajectory_noise.jsonl")):
        msgs = list(row["messages"])
        answer = protocol.extract_answer(msgs[-1]["content"])
        right = answer.lower() in {a.lower() for a in aliases[row["meta"]["question"]]}
        text = "\n".join(m["content"] for m in msgs)
        out.append((msgs, answer, right, set(re.findall(r'"url": \["([^"]+)"\]', text)), log))
    return out


def test_rate_zero_is_the_world_without_the_knob(tmp_path):
    build_world(tmp_path / "a", seed=3, **HARD)
    build_world(tmp_path / "b", seed=3, expert_guess_rate=0.0, **HARD)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert "guesses" not in read_jsonl(tmp_path / "a" / "trajectory_noise.jsonl")[0]
    teacher = read_json(tmp_path / "a" / "world.json")["trajectories"]["teacher"]
    assert teacher["hops_guessable"] > 0  # namesakes were there to guess among
    assert teacher["hops_guessed"] == teacher["trajectories_guessed"] == 0

    # the expert given the entities (what a guessing one needs) writes what the expert without them writes
    cfg = WorldConfig(seed=3, **{k: v for k, v in HARD.items() if k != "progress"})
    entities, pages, hard = _entities_and_pages(cfg, 3)
    questions = _questions(cfg, entities, hard)[::7]
    plain, aware = _expert(cfg, pages, []), _expert(cfg, pages, entities)
    for n, q in enumerate(questions):
        assert plain.solve(q, random.Random(n)) == aware.solve(q, random.Random(n))


def test_guesses_change_only_the_guessing_rows(tmp_path):
    """Solvability is the tools', not the teacher's: the same questions and splits; a row without a guess is the row of
    the perfect teacher, byte for byte."""
    build_world(tmp_path / "a", seed=3, **HARD)
    build_world(tmp_path / "b", seed=3, expert_guess_rate=0.5, **HARD)
    for name in ("pages.jsonl", "qa/train.parquet", "qa/val.parquet", "qa/test.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    perfect, guessing = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    assert len(perfect) == len(guessing)
    changed = 0
    for p, g in zip(perfect, guessing):
        if g[4]["guesses"]:
            changed += p[0] != g[0]
        else:
            assert p[0] == g[0]
    assert changed > 0


def test_a_guessing_teacher_leaves_lucky_and_wrong_routes_that_world_json_counts(tmp_path):
    meta = build_world(tmp_path, seed=3, expert_guess_rate=1.0, noise=NO_WRONG, **HARD)
    teacher = meta["trajectories"]["teacher"]
    rows = _rows(tmp_path)

    # the counts are what the trajectories show
    guessed = [r for r in rows if r[4]["guesses"]]
    for msgs, _, _, _, log in rows:
        marks = sum(len(GUESS_RE.findall(m["content"])) for m in msgs if m["role"] == "assistant")
        assert marks == len(log["guesses"])
    assert teacher["hops_guessed"] == sum(len(r[4]["guesses"]) for r in rows) == teacher["hops_guessable"]  # rate 1
    assert teacher["hops_guessed_namesake"] == sum(g["namesake"] for r in rows for g in r[4]["guesses"])
    assert teacher["trajectories_guessed"] == len(guessed)
    assert teacher["trajectories_guessed_right"] == sum(r[2] for r in guessed) == teacher["trajectories_guessed_kept"]
    assert teacher["trajectories_guessed_wrong"] == sum(not r[2] for r in guessed)
    assert teacher["hops_guessed_kept"] == sum(len(r[4]["guesses"]) for r in guessed if r[2])
    assert 0 < teacher["hops_guessed_kept"] < teacher["hops_guessed"]
    assert teacher["trajectories"] == len(rows) == teacher["train_questions"]
    assert teacher["trajectories_per_train_question"] == 1.0
    assert meta["trajectories"]["expected_cleaner"]["wrong_final_answers"] == teacher["trajectories_guessed_wrong"]
    assert all(r[2] for r in rows if not r[4]["guesses"])  # the perfect teacher's rows are all right

    # lucky routes: right, with the guessed hop's page never visited (the fact stated unread)
    lucky = [r for r in guessed if r[2] and not any(g["entity"] in r[3] for g in r[4]["guesses"])]
    assert len(lucky) >= 5
    assert any(not g["namesake"] for r in lucky for g in r[4]["guesses"])  # the entity's own page, taken unread
    # wrong routes: a namesake taken, its fact stated about the entity, the answer off the question's chain
    wrong = [r for r in guessed if not r[2]]
    assert len(wrong) >= 5 and all(any(g["namesake"] for g in r[4]["guesses"]) for r in wrong)

    # the correctness filter (the offline judge) keeps the lucky routes and drops the wrong ones as wrong answers
    clean = pytest.importorskip("venus_utils.data.clean")
    stats = clean.run_clean(
        clean.CleanConfig(
            input=str(tmp_path / "trajectories"),
            output_dir=str(tmp_path / "c"),
            compat="strict",
            workers=1,
            progress=False,
            judge="offline",
        )
    )
    assert stats["drop_reasons"].get("incorrect_answer", 0) == teacher["trajectories_guessed_wrong"]
    kept = set(pd.read_parquet(tmp_path / "c" / "cleaned_resampled.parquet")["question"])
    assert {r[0][0]["content"] for r in guessed if r[2]} <= kept
    assert not {r[0][0]["content"] for r in wrong} & kept


def test_teacher_record_with_noise_and_a_cap(tmp_path):
    """Injected wrong answers also hit lucky routes: ``*_kept`` counts what the filter keeps; a cap on trajectories
    shows as trajectories per train question."""
    meta = build_world(tmp_path, seed=3, expert_guess_rate=0.5, max_trajectories=300, **HARD)
    teacher, expected = meta["trajectories"]["teacher"], meta["trajectories"]["expected_cleaner"]
    rows = _rows(tmp_path)
    assert teacher["trajectories"] == len(rows) == 300 < teacher["train_questions"]
    assert teacher["trajectories_per_train_question"] == round(300 / teacher["train_questions"], 4)
    assert 0 < teacher["hops_guessed"] < teacher["hops_guessable"]
    assert expected["wrong_final_answers"] == sum(not r[2] for r in rows)
    assert teacher["trajectories_guessed_kept"] == sum(r[2] for r in rows if r[4]["guesses"])
    assert teacher["trajectories_guessed_kept"] <= teacher["trajectories_guessed_right"]


def test_guess_rate_is_checked(tmp_path):
    with pytest.raises(ValueError, match="expert_guess_rate"):
        build_world(tmp_path, expert_guess_rate=1.5, **TINY)
    with pytest.raises(ValueError, match="expert_guess_rate"):
        build_world(tmp_path, expert_guess_rate=-0.1, **TINY)
