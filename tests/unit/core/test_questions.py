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


def test_a_file_that_is_not_utf8_names_its_first_bad_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'{"query": "fine", "iid": "A"}\n\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\n')
    with pytest.raises(InputError) as info:
        load_questions(path)
    text = str(info.value)
    assert "line 2: not UTF-8 text (byte 0x89 at column 1)" in text and "UTF-8 JSONL" in text
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"query": "caf\u00e9", "iid": "A"}\n'.encode("latin-1"))
    with pytest.raises(InputError, match="line 1: not UTF-8 text"):
        load_questions(latin)


def test_a_byte_order_mark_is_not_an_error(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"query": "why", "iid": "A"}).encode() + b"\n")
    assert load_questions(path).questions[0].id == "A"


def test_runs_are_named_after_the_file_unless_it_is_the_shared_data_set(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "mmu_ragent").mkdir(parents=True)
    official = shared / "mmu_ragent" / "t2t_val.jsonl"
    official.write_text(json.dumps({"query": "why", "iid": "V_1", "reference": None}) + "\n")
    monkeypatch.setenv("HIFIRAG_SHARED_DATA", str(shared))
    copy = tmp_path / "wiki questions.jsonl"
    copy.write_text(official.read_text())
    assert load_questions(official).slug == "mmu_ragent"
    assert load_questions(copy).slug == "custom-wiki-questions"
    from hifirag_core.pipeline.plan import plan_run

    plan = plan_run(copy, root=tmp_path / "data", overrides=["generation.examples=none"])
    assert plan.run_id.startswith("custom-wiki-questions-final-")
