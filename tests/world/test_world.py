"""The offline world: layout contract, determinism, questions, expert trajectories and their noise."""

from __future__ import annotations

import json
import random

import pandas as pd
import pyarrow.parquet as pq
import pytest

from venus_utils.core import protocol
from venus_utils.core.io import read_json, read_jsonl
from venus_utils.core.world_store import load_pages
from venus_utils.tools import LocalSearch, LocalVisit, serper_raw_text
from venus_utils.world import build_world
from venus_utils.world.graph import SIZES, NameMaker, build_graph

TINY = dict(size="tiny", progress=False, search_top_k=3, snippet_chars=60, visit_max_sentences=1)


def _files(d):
    return {
        p.relative_to(d).as_posix(): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name != "world.json"
    }


def test_layout_and_counts(world_dir):
    meta = read_json(world_dir / "world.json")
    for rel in (
        "pages.jsonl",
        "qa/train.parquet",
        "qa/val.parquet",
        "qa/test.parquet",
        "trajectories/train-00000.parquet",
    ):
        assert (world_dir / rel).is_file(), rel
    pages = load_pages(world_dir)
    assert meta["counts"]["pages"] == len(pages) == 3 * sum(SIZES["tiny"].values())
    assert len({p["url"] for p in pages}) == len(pages)
    assert {"url", "title", "text"} <= set(pages[0])
    qa = {s: pd.read_parquet(world_dir / "qa" / f"{s}.parquet") for s in ("train", "val", "test")}
    assert {s: len(df) for s, df in qa.items()} == meta["counts"]["questions"]
    assert (
        meta["trajectories"]["rows"]
        == len(qa["train"])
        == pq.read_metadata(world_dir / "trajectories/train-00000.parquet").num_rows
    )
    assert meta["tools"] == {
        "search": {"top_k": 3, "snippet_chars": 60},
        "visit": {"max_sentences": 1, "with_evidence": False},
    }


def test_deterministic_for_a_seed(tmp_path, world_dir):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, 3), (b, 3), (c, 4)):
        build_world(out, seed=seed, n_worlds=3, heldout_worlds=1, **TINY)
    assert _files(a) == _files(b)
    assert read_json(a / "world.json")["counts"] == read_json(b / "world.json")["counts"]
    assert (a / "pages.jsonl").read_bytes() != (c / "pages.jsonl").read_bytes()


def test_sizes_small_and_medium_page_counts():
    assert 280 <= sum(SIZES["small"].values()) <= 320
    assert 2800 <= sum(SIZES["medium"].values()) <= 3200


def test_qa_schema_matches_dr_venus(world_dir, dr_venus_dir):
    ours = pq.read_schema(world_dir / "qa" / "test.parquet")
    ref = pq.read_schema(dr_venus_dir / "qa_test.parquet")
    for name in ("data_source", "prompt", "ability", "reward_model"):
        assert ours.field(name).type == ref.field(name).type, name
    ref_extra = {f.name: f.type for f in ref.field("extra_info").type}
    ours_extra = {f.name: f.type for f in ours.field("extra_info").type}
    assert ref_extra.items() <= ours_extra.items()


def test_questions_splits_and_answers(world_dir):
    meta = read_json(world_dir / "world.json")
    qa = pd.concat([pd.read_parquet(world_dir / "qa" / f"{s}.parquet") for s in ("train", "val", "test")])
    info = pd.DataFrame(list(qa["extra_info"]))
    assert info["hops"].between(2, 4).all() and set(info["hops"]) == {2, 3, 4}
    assert info["index"].is_unique
    assert (
        info["split"]
        == pd.Series(
            ["train"] * meta["counts"]["questions"]["train"]
            + ["val"] * meta["counts"]["questions"]["val"]
            + ["test"] * meta["counts"]["questions"]["test"]
        ).values
    ).all()
    heldout = info[info["world"] == 2]
    assert len(heldout) and set(heldout["split"]) <= {"val", "test"}
    assert set(info[info["world"] < 2]["split"]) == {"train", "val", "test"}
    for gt in qa["reward_model"]:
        aliases = protocol.split_aliases(gt["ground_truth"])
        assert aliases and len(set(a.lower() for a in aliases)) == len(aliases)
    prompts = [p[0]["content"] for p in qa["prompt"]]
    assert len(set(prompts)) == len(prompts)


def _turns(messages):
    return [m["content"] for m in messages[1:] if m["role"] == "assistant"]


def test_trajectories_raw_schema_and_known_noise(world_dir):
    meta = read_json(world_dir / "world.json")
    df = pd.read_parquet(world_dir / "trajectories" / "train-00000.parquet")
    assert list(df.columns) == ["meta", "messages", "system_prompt"]
    noise = read_jsonl(world_dir / "trajectory_noise.jsonl")
    found = {"duplicate": 0, "malformed": 0, "disallowed": 0, "wrong_answer": 0}
    qa = pd.read_parquet(world_dir / "qa" / "train.parquet")
    aliases = {
        p[0]["content"]: protocol.split_aliases(r["ground_truth"]) for p, r in zip(qa["prompt"], qa["reward_model"])
    }
    for (_, row), log in zip(df.iterrows(), noise):
        msgs = list(row["messages"])
        assert msgs[0]["role"] == "user" and msgs[0]["content"] == row["meta"]["question"]
        assert [m["role"] for m in msgs[1:]] == ["assistant", "user"] * ((len(msgs) - 2) // 2) + ["assistant"]
        assert all(m["content"].startswith("<tool_response>\n") for m in msgs[2:-1:2])
        seen, kinds = set(), []
        for text in _turns(msgs)[:-1]:
            call = protocol.parse_tool_call(text)
            if not call.ok:
                kinds.append("malformed")
            elif call.name == "PythonInterpreter":
                kinds.append("disallowed")
            else:
                args = call.arguments
                sig = (
                    call.name,
                    tuple(
                        sorted(
                            args.get("query", args.get("url"))
                            if isinstance(args.get("query", args.get("url")), list)
                            else [args.get("query")]
                        )
                    ),
                )
                if sig in seen:
                    kinds.append("duplicate")
                seen.add(sig)
        answer = protocol.extract_answer(msgs[-1]["content"])
        assert (answer == row["meta"]["answer"]) == ("wrong_answer" not in log["noise"])
        if answer.lower() not in {a.lower() for a in aliases[row["meta"]["question"]]}:
            kinds.append("wrong_answer")
        assert sorted(kinds) == sorted(log["noise"])
        for k in kinds:
            found[k] += 1
    expected = meta["trajectories"]["expected_cleaner"]
    assert found["duplicate"] == expected["duplicate_tool_turns_removed"] > 0
    assert found["disallowed"] == expected["pruned_tool_turns_removed"] > 0
    assert found["malformed"] == expected["malformed_tool_turns_skipped"] > 0
    assert found["wrong_answer"] == expected["wrong_final_answers"] > 0


def test_tool_outputs_are_genuine(world_dir):
    """Every tool response in the raw trajectories is what the real local tools return now."""
    meta = read_json(world_dir / "world.json")
    pages = load_pages(world_dir)
    search = LocalSearch(pages, **meta["tools"]["search"])
    visit = LocalVisit(pages, **meta["tools"]["visit"])
    df = pd.read_parquet(world_dir / "trajectories" / "train-00000.parquet")
    checked = 0
    for msgs in df["messages"].head(60):
        msgs = list(msgs)
        for a, u in zip(msgs[1:-1:2], msgs[2:-1:2]):
            call = protocol.parse_tool_call(a["content"])
            body = protocol.TOOL_RESPONSE_RE.search(u["content"]).group(1).strip("\n")
            if call.ok and call.name == "search":
                q = call.arguments["query"]
                q = q if isinstance(q, str) else q[0]
                assert body == serper_raw_text(q, search.hits(q))
                checked += 1
            elif call.ok and call.name == "visit":
                assert body == visit.visit_one(call.arguments["url"][0], call.arguments["goal"])
                checked += 1
    assert checked > 100


def test_near_namesakes_and_distractors_exist(world_dir):
    pages = load_pages(world_dir)
    firsts = [p["title"].split()[0] for p in pages if p.get("type") == "person"]
    assert len(firsts) > len(set(firsts))  # people sharing a first name (near-namesakes)
    assert any(p["type"] == "trivia" and "claims" in p["text"] for p in pages)
    assert any("once visited" in p["text"] or "twinned" in p["text"] for p in pages)


def test_names_split_into_shared_syllables():
    from venus_utils.world.graph import _split_syllables

    names = NameMaker(random.Random(0))
    ents, _ = build_graph(0, SIZES["tiny"], random.Random(1), names, 0.1, 0.25)
    for e in ents:
        for word in e.name.split():
            if word not in (
                "Labs",
                "Works",
                "Group",
                "Press",
                "Studios",
                "Foundry",
                "Song",
                "Tale",
                "Garden",
                "River",
                "Dream",
                "Winter",
                "Letters",
                "Road",
            ):
                assert _split_syllables(word.lower().removesuffix("ia")) or _split_syllables(word.lower()), word


def test_bad_knobs_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="size"):
        build_world(tmp_path, size="huge")
    with pytest.raises(ValueError, match="noise"):
        build_world(tmp_path, noise={"typo": 0.1})
    with pytest.raises(ValueError, match="heldout"):
        build_world(tmp_path, n_worlds=1, heldout_worlds=1)


def test_cli_builds(tmp_path):
    from venus_utils.world.__main__ import main

    assert main(["build", "--out", str(tmp_path / "w"), "--seed", "1", "--size", "tiny", "--top-k", "2"]) == 0
    assert json.loads((tmp_path / "w" / "world.json").read_text())["tools"]["search"]["top_k"] == 2


def test_cleaner_counts_match_world_json(world_dir, tmp_path):
    """The project's cleaner removes exactly the injected noise (skips when the data package is absent)."""
    clean = pytest.importorskip("venus_utils.data.clean")
    stats = clean.run_clean(
        clean.CleanConfig(
            input=str(world_dir / "trajectories"),
            output_dir=str(tmp_path / "c"),
            compat="strict",
            workers=1,
            progress=False,
            judge="offline",
        )
    )
    expected = read_json(world_dir / "world.json")["trajectories"]["expected_cleaner"]
    assert stats["duplicate_tool_turns_removed"] == expected["duplicate_tool_turns_removed"]
    assert stats["pruned_tool_turns_removed"] == expected["pruned_tool_turns_removed"]
    assert stats["pruned_tool_name_counts"] == expected["pruned_tool_name_counts"]
    assert (
        stats["turns_removed_in_valid_rows"]["tool_turn_unparseable_tool_call"]
        == expected["malformed_tool_turns_skipped"]
    )
    assert stats["drop_reasons"].get("incorrect_answer", 0) == expected["wrong_final_answers"]


def test_visit_policy_needed_skips_visits_when_the_snippet_has_the_fact(tmp_path):
    always = build_world(tmp_path / "a", seed=2, **{**TINY, "snippet_chars": 400})
    needed = build_world(tmp_path / "n", seed=2, visit_policy="needed", **{**TINY, "snippet_chars": 400})
    assert needed["counts"]["questions"] == always["counts"]["questions"]

    def visits(d):
        df = pd.read_parquet(d / "trajectories" / "train-00000.parquet")
        return sum('"name": "visit"' in m["content"] for msgs in df["messages"] for m in msgs)

    assert visits(tmp_path / "n") < visits(tmp_path / "a") / 4


def test_load_world_questions_marks_the_held_out_sub_world(world_dir):
    from venus_utils.core.world_store import load_world_questions

    test = load_world_questions(world_dir, "test")
    assert {"template", "hops", "world", "subworld"} <= set(test.columns)
    assert (test["subworld"] == "held-out").equals(test["world"] == 2)  # n_worlds 3, heldout_worlds 1
    assert set(test["subworld"]) == {"trained", "held-out"}
    assert set(load_world_questions(world_dir, "train")["subworld"]) == {"trained"}
    with pytest.raises(FileNotFoundError, match="no 'dev' split"):
        load_world_questions(world_dir, "dev")


def test_rl_split_holds_questions_that_no_trajectory_and_no_test_question_has(tmp_path):
    """DR-Venus trains RL on its own question set (REDSearcher RL 1K), never on the SFT questions."""
    import pandas as pd

    from venus_utils.world import build_world

    meta = build_world(tmp_path, seed=5, size="tiny", progress=False, n_worlds=2, heldout_worlds=1, rl_frac=0.2)
    qa = {s: pd.read_parquet(tmp_path / "qa" / f"{s}.parquet") for s in ("train", "val", "test", "rl")}
    text = {s: {p[0]["content"] for p in t["prompt"]} for s, t in qa.items()}
    assert meta["counts"]["questions"]["rl"] == len(qa["rl"]) > 0
    assert not text["rl"] & (text["train"] | text["val"] | text["test"])
    trajectories = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / "trajectories").glob("*.parquet")))
    assert not text["rl"] & {m["question"] for m in trajectories["meta"]}
    assert set(qa["rl"]["extra_info"].map(lambda e: e["world"])) == {0}  # only the trained sub-world


def test_the_hard_tier_has_longer_chains_page_only_facts_and_its_own_sub_world_groups(tmp_path):
    """Issue 21: the last ``hard_worlds`` sub-worlds hold 4-5 hop questions whose facts are off the search snippet (a
    visit reads them) among namesakes; ``rl_worlds`` sub-worlds give RL questions whose facts, pages and answers are in
    no SFT trajectory; the tier and group of every question are known to the evaluation."""
    import re

    from venus_utils.core.world_store import load_world_questions

    knobs = dict(
        size="tiny",
        progress=False,
        n_worlds=5,
        heldout_worlds=1,
        rl_worlds=1,
        hard_worlds=3,
        search_top_k=3,
        snippet_chars=130,
        max_hops=3,
        visit_max_sentences=1,
        visit_policy="needed",
    )
    meta = build_world(tmp_path, seed=4, **knobs)
    tiers = meta["counts"]["questions_by_tier"]
    assert set(tiers) == {"easy", "hard"} and set(tiers["easy"]) == {"sft"}
    assert set(tiers["hard"]) == {"sft", "rl", "heldout"} and set(tiers["hard"]["rl"]) == {"rl"}
    assert set(tiers["hard"]["heldout"]) == {"val", "test"}

    test = load_world_questions(tmp_path, "test")
    hard = test[test["tier"] == "hard"]
    assert set(hard["hops"]) <= {4, 5} and 5 in set(hard["hops"])
    assert set(test[test["tier"] == "easy"]["hops"]) <= {2, 3}
    assert set(test["tier_group"]) == {"easy/sft", "hard/sft", "hard/heldout"}
    assert set(load_world_questions(tmp_path, "rl")["tier_group"]) == {"hard/rl"}

    pages = read_jsonl(tmp_path / "pages.jsonl")
    facts = re.compile(
        r" (born in|works for|founded by|headquartered in|located in|capital of|published by|created by) "
    )
    hard_pages = [p for p in pages if p["type"] != "trivia" and p["world"] >= 2]  # sub-worlds 2-4 are hard
    assert hard_pages and not [p["text"] for p in hard_pages if facts.search(p["text"][:130])]
    easy_pages = [p for p in pages if p["type"] != "trivia" and p["world"] < 2]
    assert any(facts.search(p["text"][:130]) for p in easy_pages)  # easy pages: facts in the snippet

    # RL sub-world: none of its pages is visited and none of its facts is read in any SFT trajectory (its pages can
    # show up among the search results of other names, with fact-free snippets)
    rl = load_world_questions(tmp_path, "rl")
    rl_pages = [p for p in pages if p.get("world") == 3 and p["type"] != "trivia"]
    trajectories = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / "trajectories").glob("*.parquet")))
    sft_text = "\n".join(m["content"] for msgs in trajectories["messages"] for m in msgs)
    visited = set(re.findall(r'"url": \["([^"]+)"\]', sft_text))
    assert len(rl) > 0 and not visited & {p["url"] for p in rl_pages}
    rl_facts = {s for p in rl_pages for s in re.split(r"(?<=\.) ", p["text"]) if facts.search(f" {s} ")}
    assert rl_facts and not [f for f in rl_facts if f in sft_text]

    # without the hard-tier knobs the world is exactly what it was (same pages, questions and trajectories)
    plain = {k: v for k, v in knobs.items() if k not in ("rl_worlds", "hard_worlds")}
    a, b = build_world(tmp_path / "a", seed=4, **plain), build_world(tmp_path / "b", seed=4, **plain, hard_worlds=0)
    assert a["counts"] == b["counts"]
    for name in ("pages.jsonl", "qa/train.parquet", "trajectories/train-00000.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_hard_tier_knobs_are_checked(tmp_path):
    with pytest.raises(ValueError, match="must leave at least one"):
        build_world(tmp_path, n_worlds=3, heldout_worlds=1, rl_worlds=2, progress=False)
    with pytest.raises(ValueError, match="hard_worlds"):
        build_world(tmp_path, n_worlds=3, hard_worlds=4, progress=False)
    with pytest.raises(ValueError, match="hard_min_hops"):
        build_world(tmp_path, n_worlds=3, hard_min_hops=5, hard_max_hops=4, progress=False)
