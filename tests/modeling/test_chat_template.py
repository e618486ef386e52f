"""The tiny model's chat template renders like Qwen3-4B-Thinking-2507's (re-typed: no hub access here)."""

import importlib.util
import json
from pathlib import Path

import pytest

from venus_utils.core import protocol
from venus_utils.modeling import GENERATION_PROMPT, QWEN3_THINKING_TEMPLATE, QWEN3_THINKING_TRAINING_TEMPLATE


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_model_dir)


def _render(tok, messages, **kw):
    return tok.apply_chat_template(messages, tokenize=False, **kw)


def test_template_is_trl_qwen3_with_the_thinking_2507_generation_prompt():
    spec = importlib.util.find_spec("trl")
    path = Path(spec.origin).parent / "chat_templates" / "qwen3.jinja"
    if not path.exists():
        pytest.skip("this TRL has no packaged qwen3.jinja")
    original = path.read_text(encoding="utf-8")
    head, _, _ = original.partition("{%- if add_generation_prompt %}")
    ours_head, _, ours_tail = QWEN3_THINKING_TEMPLATE.partition("{%- if add_generation_prompt %}")
    assert ours_head == head  # everything but the generation prompt is Qwen3's, byte for byte
    assert "'<|im_start|>assistant\\n<think>\\n'" in ours_tail and "enable_thinking" not in ours_tail


def test_generation_prompt_opens_reasoning(tok):
    text = _render(tok, [{"role": "user", "content": "Q"}], add_generation_prompt=True)
    assert text == "<|im_start|>user\nQ<|im_end|>\n" + GENERATION_PROMPT


def test_dr_venus_turns_render_with_reasoning_and_blank_line(tok):
    msgs = [
        {"role": "system", "content": protocol.system_prompt("2026-03-01")},
        {"role": "user", "content": "Who?"},
        {"role": "assistant", "content": protocol.tool_turn("think 1", "search", {"query": ["x"]})},
        {"role": "user", "content": protocol.wrap_tool_response("result")},
        {"role": "assistant", "content": protocol.answer_turn("think 2", "X")},
    ]
    text = _render(tok, msgs)
    assert text == (
        f"<|im_start|>system\n{msgs[0]['content']}<|im_end|>\n<|im_start|>user\nWho?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nthink 1\n</think>\n\n"
        '<tool_call>\n{"name": "search", "arguments": {"query": ["x"]}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nresult\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nthink 2\n</think>\n\n<answer>\nX\n</answer><|im_end|>\n"
    )
    # a tool-role message renders exactly like the wrapped user message (verified in the spec for the real template)
    as_tool = msgs[:3] + [{"role": "tool", "content": "result"}] + msgs[4:]
    assert _render(tok, as_tool) == text


def test_reasoning_before_the_last_real_query_is_dropped(tok):
    msgs = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nold answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "<think>\nnew reasoning\n</think>\n\nnew answer"},
    ]
    text = _render(tok, msgs)
    assert "old reasoning" not in text and "<|im_start|>assistant\nold answer<|im_end|>" in text
    assert "<think>\nnew reasoning\n</think>\n\nnew answer" in text
    # whitespace around the tool_response tags makes it a "real query": earlier reasoning silently disappears
    msgs2 = [msgs[0], msgs[1], {"role": "user", "content": " <tool_response>\nr\n</tool_response>"}]
    assert "old reasoning" not in _render(tok, msgs2)
    msgs3 = [msgs[0], msgs[1], {"role": "user", "content": "<tool_response>\nr\n</tool_response>"}]
    assert "old reasoning" in _render(tok, msgs3)


def test_tools_argument_appends_the_qwen_tools_block(tok):
    text = _render(
        tok, [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], tools=[protocol.SEARCH_TOOL]
    )
    assert text.startswith("<|im_start|>system\nS\n\n# Tools\n\nYou may call one or more functions")
    assert json.dumps(protocol.SEARCH_TOOL, ensure_ascii=False) in text or '"name": "search"' in text


def test_shared_sft_examples_render_every_turn_with_its_reasoning(tok, dr_venus_dir):
    from venus_utils.core.protocol import THINK_RE

    for path in sorted((dr_venus_dir / "sft_examples").glob("*.json"))[:4]:
        msgs = json.loads(path.read_text(encoding="utf-8"))["messages"]
        text = _render(tok, msgs)
        assert text.startswith(f"<|im_start|>system\n{msgs[0]['content']}<|im_end|>\n")
        for m in msgs[1:]:
            if m["role"] == "user":
                assert f"<|im_start|>user\n{m['content']}<|im_end|>\n" in text
            else:
                reasoning = THINK_RE.search(m["content"]).group(1).strip("\n")
                rest = m["content"].split("</think>")[-1].lstrip("\n")
                assert f"<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{rest}<|im_end|>\n" in text, (
                    path.name
                )
        assert text.count("<|im_start|>assistant\n<think>\n") == sum(m["role"] == "assistant" for m in msgs)


def test_rl_rollouts_render_without_losing_reasoning(tok, dr_venus_dir):
    path = sorted((dr_venus_dir / "rl_rollouts").glob("*.json"))[0]
    msgs = json.loads(path.read_text(encoding="utf-8"))["messages"]
    text = _render(tok, msgs)
    assert text.count("<|im_start|>assistant\n<think>\n") == sum(m["role"] == "assistant" for m in msgs)
    # RL rollouts write "<think>text" (no newline) and "</think>\n\n<tool_call>": the template normalises both
    assert "</think>\n\n\n" not in text


def test_training_template_renders_identically_and_marks_the_reference_span(tok):
    from venus_utils.modeling import synthetic_conversations

    msgs = synthetic_conversations(1, seed=5)[0]["messages"]
    plain = _render(tok, msgs)
    trained = tok.apply_chat_template(msgs, tokenize=False, chat_template=QWEN3_THINKING_TRAINING_TEMPLATE)
    assert trained == plain
    assert (
        "{%- generation %}" in QWEN3_THINKING_TRAINING_TEMPLATE
        and "{%- endgeneration %}" in QWEN3_THINKING_TRAINING_TEMPLATE
    )


@pytest.mark.unsloth
def test_template_renders_like_unsloth_qwen3_thinking(tok):
    pytest.importorskip("unsloth")
    from unsloth.chat_templates import CHAT_TEMPLATES

    from venus_utils.modeling import synthetic_conversations

    theirs = CHAT_TEMPLATES["qwen3-thinking"][0]
    for msgs in [c["messages"] for c in synthetic_conversations(3, seed=2)] + [
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "<think>\nr\n</think>\nb"},
            {"role": "user", "content": "c"},
        ]
    ]:
        for gen in (False, True):
            assert tok.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=gen, chat_template=theirs
            ) == tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
