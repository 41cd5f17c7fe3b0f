from __future__ import annotations

import json

import pytest

from hifirag_core.questions import InputError, load_questions


def _write(tmp_path, lines):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_mmu_format_with_null_reference(tmp_path):
    path = _write(tmp_path, [json.dumps({"query": "why is the sky blue", "reference": None, "iid": "V_1"}),
                             json.dumps({"query": "how do bees fly", "reference": "They flap.", "iid": "V_2"})])
    qs = load_questions(path)
    assert qs.format == "mmu_ragent"
    assert [(q.id, q.reference) for q in qs.questions] == [("V_1", None), ("V_2", "They flap.")]


def test_faq_format_keeps_extra_fields_as_meta(tmp_path):
    path = _write(tmp_path, [json.dumps({"id": "py:faq#x", "question": "Why?", "answer": "Because.",
                                         "corpus": "python3.11-doc", "anchor": "x"})])
    qs = load_questions(path)
    assert qs.format == "docs_faq" and qs.dataset == "docs_faq"
    assert qs.questions[0].meta["anchor"] == "x"


def test_every_problem_is_reported_with_its_line(tmp_path):
    path = _write(tmp_path, [
        json.dumps({"query": "ok", "iid": "A"}),
        "{not json",
        json.dumps({"query": "   ", "iid": "B"}),
        json.dumps({"iid": "C"}),
        json.dumps({"query": "dup", "iid": "A"}),
        json.dumps(["a", "list"]),
    ])
    with pytest.raises(InputError) as info:
        load_questions(path)
    text = str(info.value)
    assert "line 2: not valid JSON" in text
    assert "line 3: empty query" in text
    assert "line 4: missing field 'query'" in text
    assert "line 5: duplicate id 'A' (first on line 1)" in text
    assert "line 6: expected a JSON object" in text
    assert "nothing was written" in text


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_questions(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="no questions"):
        load_questions(empty)


def test_selection_sample_limit_ids_and_excluded_examples(tmp_path):
    path = _write(tmp_path, [json.dumps({"query": f"q{i}", "iid": f"I{i}"}) for i in range(10)])
    assert [q.id for q in load_questions(path, sample=5).questions] == ["I0", "I2", "I4", "I6", "I8"]
    assert [q.id for q in load_questions(path, limit=2).questions] == ["I0", "I1"]
    assert [q.id for q in load_questions(path, ids=["I7", "I3"]).questions] == ["I7", "I3"]
    qs = load_questions(path, exclude_ids=["I0", "I1"], limit=2)
    assert [q.id for q in qs.questions] == ["I2", "I3"] and qs.dropped == ("I0", "I1") and "few-shot" in qs.note
    with pytest.raises(InputError, match="it is a few-shot example"):
        load_questions(path, ids=["I0"], exclude_ids=["I0"])


def test_custom_fields_map(tmp_path):
    path = _write(tmp_path, [json.dumps({"qid": 7, "q": "what is x", "gold": "x is y"})])
    qs = load_questions(path, fields={"id": "qid", "query": "q", "reference": "gold"})
    assert (qs.questions[0].id, qs.questions[0].query, qs.questions[0].reference) == ("7", "what is x", "x is y")
    assert qs.dataset == "custom:q"


def test_fingerprint_depends_on_the_selected_questions(tmp_path):
    path = _write(tmp_path, [json.dumps({"query": f"q{i}", "iid": f"I{i}"}) for i in range(4)])
    assert load_questions(path, limit=2).fingerprint == load_questions(path, limit=2).fingerprint
    assert load_questions(path, limit=2).fingerprint != load_questions(path, limit=3).fingerprint
