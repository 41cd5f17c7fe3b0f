from __future__ import annotations

import multiprocessing
from pathlib import Path

import duckdb
import pytest

from hifirag_core.records import AnswerRecord, SectionRecord
from hifirag_core.store.warehouse import Warehouse, WarehouseError


def _answers(w: Warehouse, run_id: str = "r1"):
    return w.query("SELECT question_id, text FROM answers WHERE run_id = ? ORDER BY question_id", [run_id]).rows


def test_writing_the_same_key_twice_leaves_one_copy(tmp_path):
    w = Warehouse(tmp_path)
    w.write("answers", [AnswerRecord(text="first")], run_id="r1", stage="answer", question_id="q1")
    w.write("answers", [AnswerRecord(text="second")], run_id="r1", stage="answer", question_id="q1")
    w.write("answers", [AnswerRecord(text="other")], run_id="r1", stage="answer", question_id="q2")
    assert _answers(w) == [("q1", "second"), ("q2", "other")]


def test_an_empty_write_replaces_earlier_rows(tmp_path):
    w = Warehouse(tmp_path)
    rows = [SectionRecord(url="u", section_id=f"s{i}") for i in range(3)]
    w.write("sections", rows, run_id="r1", stage="sections", question_id="q1")
    w.write("sections", [], run_id="r1", stage="sections", question_id="q1")
    assert w.query("SELECT count(*) FROM sections").rows == [(0,)]


def test_compaction_merges_files_and_later_writes_replace_compacted_rows(tmp_path):
    w = Warehouse(tmp_path)
    for q in ("q1", "q2", "q3"):
        w.write("answers", [AnswerRecord(text=q)], run_id="r1", stage="answer", question_id=q)
    assert w.compact_run("r1") == 3
    part = w.partition("answers", "r1")
    assert [p.name for p in part.glob("*.parquet")] == ["_compacted.parquet"]
    w.write("answers", [AnswerRecord(text="q2 again")], run_id="r1", stage="answer", question_id="q2")
    assert _answers(w) == [("q1", "q1"), ("q2", "q2 again"), ("q3", "q3")]
    w.compact_run("r1")
    assert _answers(w) == [("q1", "q1"), ("q2", "q2 again"), ("q3", "q3")]


def test_runs_are_separate_partitions(tmp_path):
    w = Warehouse(tmp_path)
    w.write("answers", [AnswerRecord(text="a")], run_id="r1", stage="answer", question_id="q1")
    w.write("answers", [AnswerRecord(text="b")], run_id="r2", stage="answer", question_id="q1")
    assert _answers(w, "r2") == [("q1", "b")]
    assert (tmp_path / "tables" / "answers" / "run_id=r2").is_dir()


def test_views_exist_for_tables_with_no_files_yet(tmp_path):
    w = Warehouse(tmp_path)
    result = w.query("SELECT * FROM section_decisions")
    assert result.rows == [] and "final_score" in result.columns


def test_derived_views_and_the_duckdb_file(tmp_path):
    w = Warehouse(tmp_path)
    w.write("answers", [AnswerRecord(text="a", cited_urls=["https://x"])], run_id="r1", stage="answer",
            question_id="q1")
    path = w.refresh_duckdb_file()
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT cited_urls FROM answers").fetchall() == [(["https://x"],)]
    con.close()


def test_bad_sql_and_bad_run_ids_are_clear_errors(tmp_path):
    w = Warehouse(tmp_path)
    with pytest.raises(WarehouseError, match="nonexistent"):
        w.query("SELECT * FROM nonexistent")
    with pytest.raises(WarehouseError, match="run id"):
        w.write("answers", [], run_id="../escape", stage="answer", question_id="q")


def _writer(root: str, worker: int) -> None:
    w = Warehouse(Path(root))
    for i in range(40):
        # both workers write every key: the last write of a key wins, none is duplicated or lost
        w.write("answers", [AnswerRecord(text=f"w{worker}-{i}")], run_id="r1", stage="answer", question_id=f"q{i}")
        if i % 10 == 9:
            w.compact_run("r1")


def test_two_processes_writing_at_once_leave_one_row_per_key(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), n)) for n in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    w = Warehouse(tmp_path)
    rows = w.query("SELECT question_id, count(*) FROM answers GROUP BY question_id").rows
    assert len(rows) == 40 and all(n == 1 for _, n in rows)
    assert {t for (t,) in w.query("SELECT text FROM answers").rows} <= {f"w{k}-{i}" for k in (1, 2) for i in range(40)}


def test_a_rerun_splits_the_compacted_files_back_into_keys_once(tmp_path):
    from hifirag_core.records import LLMCallRecord

    w = Warehouse(tmp_path)
    for q in ("q1", "q2"):
        w.write("answers", [AnswerRecord(text=q)], run_id="r1", stage="answer", question_id=q)
        calls = [LLMCallRecord(stage=s, call_id=f"{q}-{s}") for s in ("draft", "refine")]
        w.write("llm_calls", calls, run_id="r1", stage=None, question_id=q)
    w.compact_run("r1")
    assert w.uncompact_run("r1") == 4  # answers: 2 keys; llm_calls: 2 questions
    assert not (w.partition("answers", "r1") / "_compacted.parquet").exists()
    w.write("llm_calls", [LLMCallRecord(stage="draft", call_id="q1-new")], run_id="r1", stage=None, question_id="q1")
    rows = w.query("SELECT question_id, call_id FROM llm_calls ORDER BY 1, 2").rows
    assert rows == [("q1", "q1-new"), ("q2", "q2-draft"), ("q2", "q2-refine")]
    assert _answers(w) == [("q1", "q1"), ("q2", "q2")]


def test_a_per_question_write_replaces_compacted_rows_of_every_stage(tmp_path):
    from hifirag_core.records import LLMCallRecord

    w = Warehouse(tmp_path)
    w.write("llm_calls", [LLMCallRecord(stage=s, call_id=s) for s in ("a", "b")], run_id="r1", stage=None,
            question_id="q1")
    w.compact_run("r1")
    w.write("llm_calls", [LLMCallRecord(stage="a", call_id="a2")], run_id="r1", stage=None, question_id="q1")
    assert w.query("SELECT call_id FROM llm_calls").rows == [("a2",)]


def _compacting_writer(root: str, rounds: int) -> None:
    w = Warehouse(Path(root))
    for r in range(rounds):
        for q in range(5):
            w.write("answers", [AnswerRecord(text=f"{r}-{q}")], run_id="busy", stage="answer", question_id=f"q{q}")
        w.compact_run("busy")


def test_readers_never_fail_while_another_process_compacts_its_run(tmp_path):
    w = Warehouse(tmp_path)
    w.write("answers", [AnswerRecord(text="mine")], run_id="mine", stage="answer", question_id="q1")
    writer = multiprocessing.get_context("spawn").Process(target=_compacting_writer, args=(str(tmp_path), 60))
    writer.start()
    try:
        reads = 0
        while writer.is_alive() or reads < 20:  # each read globs files the writer may delete under it
            w.refresh_duckdb_file()
            assert w.query("SELECT text FROM answers WHERE run_id = 'mine'").rows == [("mine",)]
            reads += 1
    finally:
        writer.join(120)
    assert writer.exitcode == 0
    assert w.query("SELECT count(*) FROM answers WHERE run_id = 'busy'").rows == [(5,)]


def test_a_rerun_that_looks_again_fewer_times_leaves_no_later_round(tmp_path):
    """The rows of rounds past the question's last one this time go, from plain and compacted files alike;
    the other rounds and the other questions stay."""
    w = Warehouse(tmp_path)

    def sections(q: str, rounds: range) -> None:
        for r in rounds:
            w.write("sections", [SectionRecord(url=f"u{r}", section_id=f"{q}-{r}")], run_id="r1", stage="sections",
                    question_id=q, round=r)

    def kept() -> list[tuple]:
        return w.query("SELECT question_id, round FROM sections ORDER BY 1, 2").rows

    sections("q1", range(3))
    sections("q2", range(3))
    assert w.drop_rounds_after("r1", "q1", 1, ["sections"]) == 1
    assert kept() == [("q1", 0), ("q1", 1), ("q2", 0), ("q2", 1), ("q2", 2)]
    w.compact_run("r1")
    assert w.drop_rounds_after("r1", "q2", 0, ["sections"]) == 1  # the compacted file rewritten once
    assert kept() == [("q1", 0), ("q1", 1), ("q2", 0)]
    assert w.drop_rounds_after("r1", "q2", 0, ["sections"]) == 0
    assert w.drop_rounds_after("other", "q1", 0, ["sections"]) == 0
