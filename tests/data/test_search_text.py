"""The search-text parser (DR-Venus's ``parse_search_results``) on a search text with every hard case, in both
modes."""

from __future__ import annotations

import json
from collections import Counter

from venus_utils.data.search_text import parse_result_header, parse_search_reference, parse_search_strict

TEXT = """<tool_response>
ignored preamble
A Google search for 'O'Brien's "law"' found 2 results:

## Web Results
1. [Title [with] brackets](https://en.wikipedia.org/wiki/Law_(physics))
Date published: 2020-01-01
Source: Wikipedia

First snippet line.
second line.

2. [Second](https://b.org)Trailing text
Body.
=======
A Google search for "zero results query" found 0 results:

## Web Results
=======
A Google search for 'third' found 1 results:

## Web Results
1. [Only](https://c.org)
Date updated : 2021
Only snippet.
3. [](https://empty-title.org)
4. broken [header
</tool_response>"""


def test_reference_parser_quirks_included():
    assert json.loads(parse_search_reference(TEXT)) == [
        {
            "query": "O'Brien's \"law\"",
            "web_page_info_list": [
                {
                    "title": "Title [with] brackets",
                    "url": "https://en.wikipedia.org/wiki/Law_(physics)",
                    "snippet": "Source: Wikipedia\nFirst snippet line.\nsecond line.",
                },  # Source line kept
                {
                    "title": "Second",
                    "url": "https://b.org",
                    "snippet": "Trailing text\nBody.\n=======",
                },  # separator leaks
            ],
        },
        {"query": "zero results query", "web_page_info_list": []},
        {
            "query": "third",
            "web_page_info_list": [{"title": "Only", "url": "https://c.org", "snippet": "Only snippet."}],
        },
    ]
    assert parse_search_reference(TEXT) == json.dumps(json.loads(parse_search_reference(TEXT)), ensure_ascii=False)


def test_strict_parser_fixes():
    fixes = Counter()
    blocks = json.loads(parse_search_strict(TEXT, ["O'Brien's \"law\""], fixes))
    assert blocks[0]["web_page_info_list"][0]["snippet"] == "First snippet line.\nsecond line."
    assert blocks[0]["web_page_info_list"][1]["snippet"] == "Trailing text\nBody."
    assert blocks[1] == {"query": "zero results query", "web_page_info_list": []}
    assert fixes == {"search_separator_removed": 2, "search_source_line_removed": 1}
    assert [b["query"] for b in blocks] == ["O'Brien's \"law\"", "zero results query", "third"]


def test_strict_parser_keeps_failed_query_blocks():
    failed = "No results found for 'it's rare'. Try with a more general query."
    text = (
        "A Google search for 'a' found 1 results:\n## Web Results\n1. [T](u)\ns\n"
        f"=======\n{failed}\n=======\nSearch timeout"
    )
    ref = json.loads(parse_search_reference(text))
    assert ref == [
        {
            "query": "a",
            "web_page_info_list": [
                {"title": "T", "url": "u", "snippet": f"s\n=======\n{failed}\n=======\nSearch timeout"}
            ],
        }
    ]  # failures glued on
    fixes = Counter()
    strict = json.loads(parse_search_strict(text, ["a", "it's rare", "third q"], fixes))
    assert strict == [
        {"query": "a", "web_page_info_list": [{"title": "T", "url": "u", "snippet": "s"}]},
        {"query": "it's rare", "web_page_info_list": [], "message": failed},
        {"query": "third q", "web_page_info_list": [], "message": "Search timeout"},
    ]
    assert fixes["search_failure_kept"] == 2


def test_no_header_single_block():
    text = "## Web Results\n1. [T](https://t.org)\nsnip"
    assert json.loads(parse_search_reference(text)) == [
        {"query": "", "web_page_info_list": [{"title": "T", "url": "https://t.org", "snippet": "snip"}]}
    ]
    assert json.loads(parse_search_strict(text, ["q"])) == [
        {"query": "q", "web_page_info_list": [{"title": "T", "url": "https://t.org", "snippet": "snip"}]}
    ]


def test_result_header_parsing():
    assert parse_result_header("12. [a [b] c](http://x.org/(y)) tail") == ("a [b] c", "http://x.org/(y)", "tail")
    assert parse_result_header("1. [a](b") == (None, None, None)
    assert parse_result_header("1. [a] (b)") == (None, None, None)
    assert parse_result_header("1.[a](b)") == (None, None, None)
