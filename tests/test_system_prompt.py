import json

from venus_utils.core import protocol


def test_system_prompt_is_byte_identical_to_dr_venus(dr_venus_dir):
    for path in sorted((dr_venus_dir / "sft_examples").glob("*.json")):
        system = json.loads(path.read_text())["messages"][0]
        assert system["role"] == "system"
        assert protocol.system_prompt("2026-03-01") == system["content"], path.name


def test_system_prompt_without_date_ends_after_tool_call_block():
    assert protocol.system_prompt().endswith("</tool_call>")
    assert protocol.system_prompt("2026-01-02").endswith("\n\nCurrent date: 2026-01-02\n")


def test_compact_style_carries_every_tool_and_the_call_format():
    full, compact = protocol.system_prompt("2026-03-01"), protocol.system_prompt("2026-03-01", style="compact")
    assert protocol.system_prompt("2026-03-01", style="dr-venus") == full  # the default is DR-Venus's prompt
    assert len(compact) < len(full) / 4
    assert "search(query: string[])" in compact and "visit(url: string[], goal: string)" in compact
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in compact
    assert "<answer></answer>" in compact and compact.endswith("\n\nCurrent date: 2026-03-01\n")
    assert protocol.system_prompt(style="compact").endswith("</tool_call>")


def test_compact_signatures_follow_the_tool_schemas():
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "x",
            "parameters": {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": "integer"}}, "note": {"type": "string"}},
                "required": ["ids"],
            },
        },
    }
    assert "\nlookup(ids: integer[], note: string)\n" in protocol.system_prompt(tools=[tool], style="compact")


def test_unknown_style_is_an_error():
    import pytest

    with pytest.raises(ValueError, match="compact"):
        protocol.system_prompt(style="short")
