import json

from venus_utils import protocol


def test_system_prompt_is_byte_identical_to_dr_venus(dr_venus_dir):
    for path in sorted((dr_venus_dir / "sft_examples").glob("*.json")):
        system = json.loads(path.read_text())["messages"][0]
        assert system["role"] == "system"
        assert protocol.system_prompt("2026-03-01") == system["content"], path.name


def test_system_prompt_without_date_ends_after_tool_call_block():
    assert protocol.system_prompt().endswith("</tool_call>")
    assert protocol.system_prompt("2026-01-02").endswith("\n\nCurrent date: 2026-01-02\n")
