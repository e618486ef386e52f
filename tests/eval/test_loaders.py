"""QA, prediction and benchmark loaders, including the canary decryption round trips."""

from __future__ import annotations

import base64
import json

import pandas as pd
import pytest

from venus_utils.core import qa_files as loaders
from venus_utils.core.protocol import ANSWER_SPLIT

CANARY = "BENCHMARK DATA SHOULD NEVER APPEAR AS PLAIN TEXT ONLINE. canary GUID test:0000"


@pytest.mark.parametrize("text", ["", "Paris", "Who wrote 'Kim'? ÿ 北京 🎉" * 7, "x" * 1000])
def test_browsecomp_cipher_round_trip(text):
    enc = loaders.encrypt(text, CANARY)
    assert loaders.decrypt(enc, CANARY) == text
    if text:
        assert enc != base64.b64encode(text.encode()).decode()  # really encrypted


def test_derive_key_is_sha256_repeated():
    import hashlib

    digest = hashlib.sha256(b"pw").digest()
    assert loaders.derive_key("pw", 70) == digest * 2 + digest[:6]


def test_wrong_password_or_garbage_is_an_error():
    enc = loaders.encrypt("北京 is the capital", CANARY)
    with pytest.raises((ValueError, UnicodeDecodeError)):
        loaders.decrypt(enc, "another canary")
    with pytest.raises(ValueError):
        loaders.decrypt("not base64 !!", CANARY)


def test_xbench_cipher_round_trip_differs_from_browsecomp():
    text = "中文问题 and English"
    enc = loaders.xbench_encrypt(text, CANARY)
    assert loaders.xbench_decrypt(enc, CANARY) == text
    assert enc != loaders.encrypt(text, CANARY)


def test_load_browsecomp_decrypts_each_row_with_its_canary(tmp_path):
    rows = [("What year?", "1999", "history", CANARY), ("Which river?", "Medway", "geo", CANARY + "-2")]
    df = pd.DataFrame(
        [
            {"problem": loaders.encrypt(q, c), "answer": loaders.encrypt(a, c), "problem_topic": t, "canary": c}
            for q, a, t, c in rows
        ]
    )
    path = tmp_path / "browse_comp_test_set.csv"
    df.to_csv(path, index=False)
    qa = loaders.load_browsecomp(path)
    assert qa.columns.tolist() == loaders.QA_COLUMNS
    assert qa["question"].tolist() == ["What year?", "Which river?"]
    assert qa["answer"].tolist() == ["1999", "Medway"] and set(qa["source"]) == {"BrowseComp"}
    assert "What year?" not in path.read_text()  # the fixture really is encrypted


def test_load_browsecomp_names_the_bad_row(tmp_path):
    df = pd.DataFrame(
        [
            {"problem": loaders.encrypt("ok", CANARY), "answer": loaders.encrypt("a", CANARY), "canary": CANARY},
            {"problem": "%%%garbage", "answer": loaders.encrypt("a", CANARY), "canary": CANARY},
        ]
    )
    path = tmp_path / "bc.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"bc\.csv: row 1, column 'problem'"):
        loaders.load_browsecomp(path)
    df.drop(columns="canary").to_csv(path, index=False)
    with pytest.raises(ValueError, match="missing column"):
        loaders.load_browsecomp(path)


def test_load_browsecomp_zh_csv_and_xlsx(tmp_path):
    df = pd.DataFrame(
        [
            {
                "Topic": loaders.encrypt("艺术", CANARY),
                "Question": loaders.encrypt("哪一年？", CANARY),
                "Answer": loaders.encrypt("1998年", CANARY),
                "canary": CANARY,
            }
        ]
    )
    path = tmp_path / "zh.csv"
    df.to_csv(path, index=False)
    qa = loaders.load_browsecomp_zh(path)
    assert qa.loc[0, "question"] == "哪一年？" and qa.loc[0, "answer"] == "1998年"
    pytest.importorskip("openpyxl")
    df.to_excel(tmp_path / "zh.xlsx", index=False)
    assert loaders.load_benchmark("BrowseComp-ZH", tmp_path / "zh.xlsx").equals(qa)


def test_load_xbench(tmp_path):
    df = pd.DataFrame(
        [
            {
                "id": 7,
                "prompt": loaders.xbench_encrypt("问题一", CANARY),
                "answer": loaders.xbench_encrypt("答案", CANARY),
                "canary": CANARY,
            }
        ]
    )
    path = tmp_path / "DeepSearch-2510.csv"
    df.to_csv(path, index=False, encoding="utf-8-sig")
    qa = loaders.load_benchmark("xBench-DS-2510", path)
    assert qa.iloc[0].tolist() == ["xBench-DS-2510-7", "问题一", "答案", "xBench-DS-2510"]


def test_load_gaia_text_keeps_questions_without_attachments(tmp_path):
    rows = [
        {"task_id": "t1", "Question": "How many?", "Final answer": "3", "file_name": "", "Level": 1},
        {"task_id": "t2", "Question": "See file", "Final answer": "x", "file_name": "a.xlsx", "Level": 2},
    ]
    path = tmp_path / "metadata.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qa = loaders.load_gaia_text(path)
    assert qa["id"].tolist() == ["t1"] and qa.attrs["dropped"] == {"has_attachment": 1}


def _verl_frame():
    return pd.DataFrame(
        {
            "data_source": ["nq", "hotpotqa", "nq"],
            "prompt": [[{"role": "user", "content": f"question {i}?"}] for i in range(3)],
            "ability": ["qa"] * 3,
            "reward_model": [{"ground_truth": f"a{i}{ANSWER_SPLIT}alias{i}", "style": "rule"} for i in range(3)],
            "extra_info": [{"index": f"id{i}", "split": "test"} for i in range(3)],
        }
    )


def test_load_verl_qa_and_sample_per_source(tmp_path):
    path = tmp_path / "test.parquet"
    _verl_frame().to_parquet(path)
    qa = loaders.load_questions(path)
    assert qa["id"].tolist() == ["id0", "id1", "id2"]
    assert qa.loc[0, "question"] == "question 0?" and qa.loc[0, "answer"] == f"a0{ANSWER_SPLIT}alias0"
    one = loaders.sample_per_source(qa, 1, seed=0)
    assert sorted(one["source"]) == ["hotpotqa", "nq"]
    assert loaders.sample_per_source(qa, 1, seed=0).equals(one)


def test_load_verl_qa_names_the_bad_row(tmp_path):
    df = _verl_frame()
    df.at[1, "prompt"] = [{"role": "system", "content": "no user"}]
    path = tmp_path / "bad.parquet"
    df.to_parquet(path)
    with pytest.raises(ValueError, match=r"bad\.parquet: row 1: 'prompt' has no user message"):
        loaders.load_verl_qa(path)


def test_shared_qa_test_parquet(dr_venus_dir):
    qa = loaders.load_verl_qa(dr_venus_dir / "qa_test.parquet")
    assert len(qa) == 3197 and qa["id"].is_unique
    assert qa["source"].value_counts()["Bamboogle"] == 125
    assert qa["answer"].str.contains(ANSWER_SPLIT, regex=False).mean() > 0.2


def test_load_predictions(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(
        json.dumps({"question": "q?", "prediction": "a", "termination": "answered", "turns": 3, "sample": 1})
        + "\n\n"
        + json.dumps({"question": "q2?"})
        + "\n"
    )
    df = loaders.load_predictions(path)
    assert df["sample"].tolist() == [1, 0] and df["termination"].tolist() == ["answered", "unknown"]
    assert df.loc[1, "prediction"] == ""
    path.write_text('{"question": "q"}\n{oops\n')
    with pytest.raises(ValueError, match=r"predictions\.jsonl:2: not valid JSON"):
        loaders.load_predictions(path)


def test_world_test_split(tmp_path):
    world = pytest.importorskip("venus_utils.world")
    world.build_world(tmp_path / "world", seed=0, size="small", progress=False)
    qa = loaders.load_questions(tmp_path / "world" / "qa" / "test.parquet")
    assert len(qa) > 10 and qa["id"].is_unique and {"hops", "template"} <= set(qa.columns)
    assert qa["answer"].str.len().min() > 0
    drawn = loaders.sample_per_source(qa, 2, seed=1)
    assert drawn.groupby("hops").size().max() == 2 and drawn["hops"].nunique() == qa["hops"].nunique()


def test_predictions_from_the_agent_cli_and_fresh_predictions(tmp_path):
    qa = pd.DataFrame({"id": ["a", "b"], "question": ["q a", "q b"], "answer": ["x", "y"], "source": ["s", "s"]})
    loaders.write_questions(qa, tmp_path / "q.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert rows[1] == {"index": "b", "question": "q b", "answer": "y", "data_source": "s"}
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"index": "b", "sample": 0, "question": "q b", "prediction": "y", "gt": "y"}) + "\n")
    df = loaders.load_predictions(preds)
    assert df.loc[0, "id"] == "b" and df.loc[0, "gt"] == "y"
    assert not loaders.fresh_predictions(preds, {"model": "m1"})  # no record yet: start over
    assert not preds.exists()
    preds.write_text("{}\n")
    assert loaders.fresh_predictions(preds, {"model": "m1"}) and preds.exists()  # same settings: resume
    assert not loaders.fresh_predictions(preds, {"model": "m2"}) and not preds.exists()


def test_load_qa_dispatch(tmp_path):
    path = tmp_path / "test.parquet"
    _verl_frame().to_parquet(path)
    assert len(loaders.load_qa(None, default=path)) == 3
    with pytest.raises(ValueError, match="needs qa_file"):
        loaders.load_qa(None, "BrowseComp", default=path)


def test_stratified_sample_keeps_the_mix_and_is_reproducible():
    qa = pd.DataFrame(
        {
            "id": [str(i) for i in range(200)],
            "template": ["a"] * 100 + ["b"] * 50 + ["c"] * 50,
            "hops": [2] * 100 + [3] * 100,
            "world": list(range(50)) * 4,  # rows ordered by world inside every group
        }
    )
    s = loaders.stratified_sample(qa, 20, seed=3)
    assert len(s) == 20 and s["id"].is_unique
    assert s.groupby("template").size().to_dict() == {"a": 10, "b": 5, "c": 5}
    assert loaders.stratified_sample(qa, 20, seed=3).equals(s)
    assert not loaders.stratified_sample(qa, 20, seed=4).equals(s)
    # equal-sized groups are not drawn at the same positions (they would all hit the same worlds)
    b, c = (sorted(s.loc[s["template"] == t, "world"]) for t in ("b", "c"))
    assert b != c
    assert s["template"].tolist() != sorted(s["template"])  # shuffled, not grouped
    # largest remainder: 7 of 200 -> a 3.5, b 1.75, c 1.75 -> 3 / 1 / 1, and the two spare go to b and c (.75 > .5)
    assert loaders.stratified_sample(qa, 7).groupby("template").size().to_dict() == {"a": 3, "b": 2, "c": 2}
    assert len(loaders.stratified_sample(qa, None)) == 200 and len(loaders.stratified_sample(qa, 500)) == 200
    assert loaders.stratified_sample(qa, 0).empty
    plain = loaders.stratified_sample(qa[["id"]], 5, seed=0)  # no stratification keys: a random draw
    assert len(plain) == 5 and plain["id"].is_unique
