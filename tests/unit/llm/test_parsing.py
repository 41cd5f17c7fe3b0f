"""Reply parsers against the quirks real models show."""

from __future__ import annotations

import pytest

from hifirag_core.llm.parsing import (
    extract_json_list,
    parse_queries,
    parse_section_indices,
    parse_source_numbers,
    parse_url_selection,
    strip_reasoning,
    url_match_key,
)


@pytest.mark.parametrize(("reply", "expected"), [
    ('["a", "b"]', ["a", "b"]),
    ('```json\n["a", "b"]\n```', ["a", "b"]),
    ('```\n["a"]\n```', ["a"]),
    ('Sure! Here are the queries:\n["a", "b"]\nHope this helps.', ["a", "b"]),
    ("['a', 'b']", ["a", "b"]),
    ('["a", "b",]', ["a", "b"]),
    ('{"queries": ["a", "b"]}', ["a", "b"]),
    ('Result: {"result": [1, 2]}', [1, 2]),
    ('<think>maybe ["x"]</think>\n["a"]', ["a"]),
    ('The list [1, 2] is what I would pick: [3]', [1, 2]),
    ("Here's what I'd choose: [\"don't\", \"b\"]", ["don't", "b"]),
    ('```json\n["a", "b"', None),  # truncated: no closing bracket
    ("no list here", None),
    ("", None),
])
def test_extract_json_list(reply: str, expected: list | None) -> None:
    assert extract_json_list(reply, keys=("queries",)) == expected


def test_json_fence_is_preferred_over_lists_in_prose() -> None:
    reply = "I considered [9] but the answer is:\n```json\n[1, 2]\n```"
    assert extract_json_list(reply) == [1, 2]


def test_nothing_is_evaluated_as_code() -> None:
    assert extract_json_list("[__import__('os').system('true')]") is None


def test_queries_dedup_trim_and_cap() -> None:
    r = parse_queries('["  python venv ", "Python VENV", "", 5, "pip install"]', max_queries=2)
    assert r.ok and r.value == ["python venv", "pip install"]
    assert any("duplicate" in p for p in r.problems) and any("not a string" in p for p in r.problems)
    capped = parse_queries('["a", "b", "c"]', max_queries=2)
    assert capped.value == ["a", "b"] and "beyond max_queries" in capped.problems[-1]


def test_queries_objects_and_failures() -> None:
    assert parse_queries('[{"query": "x"}]', max_queries=2).value == ["x"]
    empty = parse_queries("[]", max_queries=2)
    assert not empty.ok and empty.found_json  # an empty plan cannot drive a search
    none = parse_queries("I can't help", max_queries=2)
    assert not none.ok and none.error == "no JSON list in the reply"


@pytest.mark.parametrize(("reply", "expected", "ok"), [
    ("[3, 2, 6, 7]", [3, 2, 6, 7], True),
    ('["3", "2"]', [3, 2], True),
    ('["[3]", "#2", "Section 1", 4.0]', [3, 2, 1, 4], True),
    ("[3, 3, 2]", [3, 2], True),
    ("[9, 3, -1]", [3], True),
    ("[]", [], True),  # "none of them is useful" is an answer
    ("[9, 10]", [], False),  # every index out of range: nothing valid came back
    ('[true, "x", null]', [], False),
    ('[{"index": 2}, {"index": 0}]', [2, 0], True),
    ("Sections 2 and 3 look useful.", [], False),
])
def test_section_indices(reply: str, expected: list[int], ok: bool) -> None:
    r = parse_section_indices(reply, n_sections=8)
    assert r.value == expected and r.ok is ok
    if not ok:
        assert r.error


def test_section_indices_report_what_was_dropped() -> None:
    r = parse_section_indices('[1, "1", 12, "x"]', n_sections=5)
    assert r.value == [1]
    assert r.problems == ["duplicate: 1", "out of range: 12", "not an index: 'x'"]
    assert r.raw_items == 4


def test_source_numbers_use_the_given_numbers_not_a_range() -> None:
    r = parse_source_numbers("[1, 2, 4, 7]", numbers=[1, 4, 7])
    assert r.value == [1, 4, 7] and r.problems == ["out of range: 2"]
    assert parse_source_numbers("[]", numbers=[1]).ok


CANDIDATES = [
    "https://docs.python.org/3/library/venv.html",
    "https://www.example.com/guide/",
    "http://blog.example.org/post?id=5&utm_source=x",
]


@pytest.mark.parametrize(("reply", "expected", "ok"), [
    ('["https://docs.python.org/3/library/venv.html"]', [0], True),
    ('["https://example.com/guide", "https://docs.python.org/3/library/venv.html"]', [1, 0], True),
    ('["https://blog.example.org/post?id=5"]', [2], True),
    ('["docs.python.org/3/library/venv.html#creating"]', [0], True),
    ('["https://invented.example/page"]', [], False),
    ('["https://www.example.com/guide/", "https://example.com/guide"]', [1], True),
    ('[{"url": "https://www.example.com/guide/"}]', [1], True),
    ("[]", [], True),
    ("```json\n[\"https://www.example.com/guide/\",\n]\n```", [1], True),
])
def test_url_selection_matches_exact_then_normalized(reply: str, expected: list[int], ok: bool) -> None:
    r = parse_url_selection(reply, candidate_urls=CANDIDATES)
    assert r.value == expected and r.ok is ok


def test_url_selection_reports_invented_urls() -> None:
    r = parse_url_selection('["https://www.example.com/guide/", "https://evil.example/"]', candidate_urls=CANDIDATES)
    assert r.value == [1] and r.problems == ["not among the candidates: 'https://evil.example/'"]


def test_normalize_url() -> None:
    assert url_match_key("HTTPS://WWW.Example.com:443/a/b/?utm_medium=m&z=1&a=2#frag") == "//example.com/a/b?a=2&z=1"
    assert url_match_key("http://example.com/a%20b") == url_match_key("https://example.com/a b/")
    assert url_match_key("https://example.com:8080/") != url_match_key("https://example.com/")


@pytest.mark.parametrize(("text", "expected"), [
    ("<think>let me think [1]</think>\nThe answer.", "The answer."),
    ("<THINKING>x</THINKING>answer", "answer"),
    ("reasoning without opening tag</think>\n[2]", "[2]"),
    ("answer first <think>then an unfinished thought", "answer first"),
    ("no tags", "no tags"),
])
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected
