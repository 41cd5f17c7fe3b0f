"""The pure parts of the fresh test-set builder: A.6 replies, grounding metadata, style examples, run names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hifirag_core.backends.grounding import grounding_from_parts
from hifirag_core.config import ConfigError
from hifirag_core.questions import load_questions
from hifirag_core.testset.pair_sources import heading_text, standin_answer, standin_question
from hifirag_core.testset.pairs import parse_qa_pairs
from hifirag_core.testset.style import parse_style, render_examples, style_examples

# --- A.6 replies ---------------------------------------------------------------------------------


def test_fenced_jsonl_with_prose_around_it():
    reply = ('Here are 2 pairs focusing on 2025:\n```jsonl\n{"query": "Who won?", "reference": "Team A won."}\n'
             '{"query": "When?", "reference": "In March."}\n```\nLet me know if you need more.')
    parsed = parse_qa_pairs(reply)
    assert [(p.query, p.reference) for p in parsed.pairs] == [("Who won?", "Team A won."), ("When?", "In March.")]
    assert reply[parsed.pairs[1].start:parsed.pairs[1].end] == '{"query": "When?", "reference": "In March."}'
    assert parsed.problems == []


@pytest.mark.parametrize("reply", [
    '[{"query": "Who won?", "reference": "Team A won."}, {"query": "When?", "reference": "In March."}]',
    '{"pairs": [{"question": "Who won?", "answer": "Team A won."}, {"Question": "When?", "Answer": "In March."}]}',
    "1. {\"query\": \"Who won?\", \"reference\": \"Team A won.\"},\n2. {'query': 'When?', 'reference': 'In March.',}",
    '{"query": "Who   won?", "reference": "Team A won.", "iid": "X_1"}\n{"query": "When?", "reference": "In March."}',
])
def test_arrays_wrappers_numbering_trailing_commas_single_quotes_and_other_keys(reply):
    parsed = parse_qa_pairs(reply)
    assert [(p.query, p.reference) for p in parsed.pairs] == [("Who won?", "Team A won."), ("When?", "In March.")]


def test_braces_inside_answers_and_unusable_objects():
    reply = ('{"query": "What is the syntax?", "reference": "Write {name} in braces."}\n'
             '{"query": "No answer here"}\n{"query": "", "reference": "An answer without a question."}\n'
             '{"note": "not a pair"}\n{"query": "Broken", "reference": "never closed"')
    parsed = parse_qa_pairs(reply)
    assert [(p.query, p.reference) for p in parsed.pairs] == [("What is the syntax?", "Write {name} in braces.")]
    assert len(parsed.problems) == 3 and "lacks an answer" in parsed.problems[0]
    assert "lacks a question" in parsed.problems[1]
    assert "unreadable object" in parsed.problems[2]  # cut short: its answer may be cut too


@pytest.mark.parametrize("reply", [None, "", "I cannot browse the web right now.", "```json\n[]\n```"])
def test_a_reply_without_pairs_says_so(reply):
    parsed = parse_qa_pairs(reply)
    assert not parsed.ok and parsed.problems


# --- grounding metadata --------------------------------------------------------------------------

TEXT = 'Pairs:\n{"query": "Ciné?", "reference": "Über café résumé."}\n{"query": "Q2?", "reference": "Plain."}'


def _byte_span(text: str, piece: str) -> tuple[int, int]:
    data, raw = text.encode(), piece.encode()
    start = data.index(raw)
    return start, start + len(raw)


def test_byte_offsets_become_character_spans_and_zeros_may_be_left_out():
    start, end = _byte_span(TEXT, "Über café résumé.")
    metadata = {
        "webSearchQueries": ["café résumé 2025"],
        "groundingChunks": [{"web": {"uri": "https://r/1", "title": "news.example"}},
                            {"web": {"uri": "https://r/2", "title": "other.example"}}],
        "groundingSupports": [
            {"segment": {"startIndex": start, "endIndex": end, "text": "Über café résumé."},
             "groundingChunkIndices": [1, 0], "confidenceScores": [0.9, 0.7]},
            {"segment": {"endIndex": 6, "text": "Pairs:"}, "groundingChunkIndices": [0]},  # startIndex 0 left out
        ],
    }
    grounding = grounding_from_parts(metadata, [TEXT])
    first, second = grounding.supports
    assert TEXT[first.start:first.end] == "Über café résumé." and first.sources == (1, 0)
    assert (second.start, second.end) == (0, 6)
    pair = parse_qa_pairs(TEXT).pairs[0]
    assert grounding.sources_within(pair.start, pair.end) == [1, 0]
    assert grounding.sources_within(*_char_span(parse_qa_pairs(TEXT).pairs[1])) == []
    assert grounding.queries == ("café résumé 2025",)


def _char_span(pair) -> tuple[int, int]:
    return pair.start, pair.end


def test_segments_of_later_parts_and_offsets_that_disagree_with_the_quoted_text():
    parts = ["Intro ", None, "the answer is here"]  # a thought part in the middle is not answer text
    metadata = {"grounding_chunks": [{"web": {"uri": "https://r/1", "title": "t"}}],  # an SDK dump, snake_case
                "grounding_supports": [
                    {"segment": {"part_index": 2, "start_index": 4, "end_index": 10, "text": "answer"},
                     "grounding_chunk_indices": [0]},
                    {"segment": {"startIndex": 0, "endIndex": 3, "text": "is here"}, "groundingChunkIndices": [0]}]}
    grounding = grounding_from_parts(metadata, parts)
    text = "Intro the answer is here"
    assert [text[s.start:s.end] for s in grounding.supports] == ["answer", "is here"]


def test_no_metadata_or_no_source_is_no_grounding():
    assert grounding_from_parts(None, ["x"]) is None
    assert grounding_from_parts({"webSearchQueries": ["q"]}, ["x"]) is None
    only_sources = grounding_from_parts({"groundingChunks": [{"web": {"uri": "https://r/1"}}]}, ["x"])
    assert only_sources.supports == () and len(only_sources.sources) == 1


# --- style examples ------------------------------------------------------------------------------


def _style_file(tmp_path: Path, n: int = 6) -> Path:
    path = tmp_path / "style.jsonl"
    rows = [{"query": f"question {i}?", "reference": f"answer number {i} in a few words.", "iid": f"S_{i}"}
            for i in range(n)]
    rows.append({"query": "no reference?", "reference": None, "iid": "S_null"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_style_examples_depend_on_the_seed_only_and_skip_null_references(tmp_path):
    path = _style_file(tmp_path)
    spec = parse_style(f"{path}:3")
    a, b, c = style_examples(spec, 1), style_examples(spec, 1), style_examples(spec, 2)
    assert a == b and len(a) == 3 and {e.example_id for e in a} != {e.example_id for e in c}
    assert all(e.example_id != "S_null" for e in style_examples(parse_style(f"{path}:6"), 0))
    assert [json.loads(line)["query"] for line in render_examples(a).splitlines()] == [e.query for e in a]
    assert spec.description == "these 3 samples of style.jsonl"
    with pytest.raises(ConfigError, match="7 asked for"):
        style_examples(parse_style(f"{path}:7"), 0)
    with pytest.raises(ConfigError, match="no file"):
        style_examples(parse_style(str(tmp_path / "missing.jsonl")), 0)


@pytest.mark.shared_data
def test_mmu_style_never_uses_the_first_100_lines():
    spec = parse_style("mmu:10")
    scored = {q.id for q in load_questions(spec.path, limit=100).questions}
    for seed in range(5):
        chosen = style_examples(spec, seed)
        assert len(chosen) == 10 and not {e.example_id for e in chosen} & scored


# --- the offline stand-in's pairs ---------------------------------------------------------------


def test_standin_questions_come_from_headings_and_answers_from_their_sections():
    assert heading_text("E.9.2. Changes¶") == "Changes"
    assert standin_question("E.9. Release 15.12", "E.9.2. Changes") == "What does Release 15.12 say about Changes?"
    assert standin_question("E.9. Release 15.12", "E.9. Release 15.12") == "What does Release 15.12 cover?"
    assert standin_question("FAQ", "How do I sync hidden files?") == "How do I sync hidden files?"
    text = "- First fix (Tom) §\n  It fixes one thing. It fixes another.\n- Second fix. More text here."
    assert standin_answer(text, 5) == "First fix (Tom) It fixes one thing."
    assert standin_answer("word " * 40, 5).endswith(" ...")


# --- runs over a custom file are named after it --------------------------------------------------


def test_runs_over_a_file_in_mmu_format_are_named_after_the_file(tmp_path):
    path = tmp_path / "fresh 2025.jsonl"
    path.write_text(json.dumps({"query": "q?", "reference": "r", "iid": "F_0001"}) + "\n")
    questions = load_questions(path)
    assert questions.format == "mmu_ragent" and questions.slug == "custom-fresh-2025"
    canonical = tmp_path / "t2t_val.jsonl"
    canonical.write_text(path.read_text())
    assert load_questions(canonical).slug == "mmu_ragent"
