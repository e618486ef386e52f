"""The DR-Venus loss mask (verl's ``MultiTurnSFTDataset``) and the example accounting."""

import json

import pytest

from venus_utils.core import protocol
from venus_utils.modeling import GENERATION_PROMPT, synthetic_conversations
from venus_utils.sft.data import (
    IGNORE,
    ConversationError,
    build_examples,
    loss_mask_html,
    read_sft_parquet,
    tokenize_conversation,
)


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_model_dir)


def _trained_spans(ex, tok):
    spans, cur = [], []
    for i, label in zip(ex["input_ids"], ex["labels"]):
        if label != IGNORE:
            assert label == i
            cur.append(i)
        elif cur:
            spans.append(tok.decode(cur))
            cur = []
    if cur:
        spans.append(tok.decode(cur))
    return spans


def _expected_spans(messages):
    out = []
    for m in messages:
        if m["role"] == "assistant":
            reasoning = protocol.THINK_RE.search(m["content"]).group(1).strip("\n")
            out.append(f"{reasoning}\n</think>\n\n{m['content'].split('</think>')[-1].lstrip(chr(10))}<|im_end|>\n")
    return out


def test_mask_trains_exactly_the_assistant_turns_after_the_generation_prompt(tok):
    msgs = synthetic_conversations(1, seed=7)[0]["messages"]
    ex = tokenize_conversation(msgs, tok)
    assert _trained_spans(ex, tok) == _expected_spans(msgs)
    text = tok.decode(ex["input_ids"])
    assert text == tok.apply_chat_template(msgs, tokenize=False)  # the input is the whole rendered trajectory
    # the generation prompt right before each trained span is masked
    prompt_ids = tok(GENERATION_PROMPT, add_special_tokens=False)["input_ids"]
    starts = [i for i in range(1, len(ex["labels"])) if ex["labels"][i] != IGNORE and ex["labels"][i - 1] == IGNORE]
    for s in starts:
        assert ex["input_ids"][s - len(prompt_ids) : s] == prompt_ids
        assert all(label == IGNORE for label in ex["labels"][s - len(prompt_ids) : s])


def test_mask_on_the_shared_real_examples(tok, dr_venus_dir):
    for path in sorted((dr_venus_dir / "sft_examples").glob("*.json"))[:5]:
        msgs = json.loads(path.read_text(encoding="utf-8"))["messages"]
        ex = tokenize_conversation(msgs, tok)
        spans = _trained_spans(ex, tok)
        assert spans == _expected_spans(msgs), path.name
        full = tok.apply_chat_template(msgs, tokenize=False)
        assert ex["input_ids"] == tok(full, add_special_tokens=False)["input_ids"]  # segment-wise == whole-text
        # earlier reasoning stays in the input; tool responses and the system prompt are never trained
        first = protocol.THINK_RE.search(msgs[2]["content"]).group(1).strip()
        assert first[:200] in tok.decode(ex["input_ids"])
        assert not any("<tool_response>" in s or "deep research assistant" in s for s in spans)


def test_matches_trl_assistant_mask_with_the_training_template(tok):
    from venus_utils.modeling import QWEN3_THINKING_TRAINING_TEMPLATE

    msgs = synthetic_conversations(1, seed=11)[0]["messages"]
    ours = tokenize_conversation(msgs, tok)
    out = tok.apply_chat_template(
        msgs, chat_template=QWEN3_THINKING_TRAINING_TEMPLATE, return_assistant_tokens_mask=True, return_dict=True
    )
    assert list(out["input_ids"]) == ours["input_ids"]
    assert list(out["assistant_masks"]) == [int(label != IGNORE) for label in ours["labels"]]


def test_bad_and_long_rows_are_counted_not_lost(tok):
    good = synthetic_conversations(3, seed=1)
    rows = [
        good[0]["messages"],
        "not a list",
        [{"role": "user", "content": "q"}],
        good[1]["messages"],
        good[2]["messages"],
    ]
    n = len(tokenize_conversation(good[1]["messages"], tok)["input_ids"])
    out = build_examples(rows, tok, max_length=n - 1, source="f.parquet")
    kept = {r["source_row"] for r in out.rows}
    dropped = sum(out.dropped.values())
    assert len(kept) + dropped == out.rows_in == 5
    assert out.dropped["invalid_conversation"] == 2
    assert out.dropped["too_long"] >= 1
    assert any(e.startswith("f.parquet:1:") for e in out.examples_dropped)
    stats = out.stats()
    assert stats["rows_in"] == 5 and 0 < stats["loss_token_share"] < 1 or stats["rows_kept"] == 0
    with pytest.raises(ConversationError, match="too_long"):
        tokenize_conversation(good[1]["messages"], tok, max_length=10)


def test_worker_processes_give_the_same_examples_and_drop_counts(tok):
    """Tokenizing in worker processes (contiguous chunks) keeps the input order, the row numbers and every drop."""
    good = [c["messages"] for c in synthetic_conversations(9, seed=2)]
    rows = [*good[:4], "not a list", *good[4:], [{"role": "user", "content": "q"}]]
    n = sorted(len(tokenize_conversation(m, tok)["input_ids"]) for m in good)[-2]
    alone = build_examples(rows, tok, max_length=n, source="f.parquet", workers=1)
    pooled = build_examples(rows, tok, max_length=n, source="f.parquet", workers=2)
    assert pooled.rows == alone.rows and pooled.stats() == alone.stats()
    assert pooled.dropped == alone.dropped == {"invalid_conversation": 2, "too_long": 1}
    assert pooled.examples_dropped == alone.examples_dropped
    kept = [r["source_row"] for r in pooled.rows]
    assert len(kept) == 8 and kept == sorted(kept) and not {4, 10} & set(kept)
    assert {e.split(":")[1] for e in pooled.examples_dropped} >= {"4", "10"}


def test_parquet_reader_names_the_file_and_missing_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"question": ["q"], "messages": [[{"role": "user", "content": "q"}]]}), path)
    with pytest.raises(ValueError, match=r"train.parquet.*gt"):
        read_sft_parquet(path)
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        read_sft_parquet(tmp_path / "nope.parquet")


def test_loss_mask_html_highlights_trained_tokens(tok):
    msgs = synthetic_conversations(1, seed=2)[0]["messages"]
    html = loss_mask_html(msgs, tok)
    assert html.count("background:#b7e4c7") == sum(
        1 for label in tokenize_conversation(msgs, tok)["labels"] if label != IGNORE
    )
    assert "&lt;|im_start|&gt;system" in html
