"""The answer flow end to end on the offline default, through Prefect."""

from __future__ import annotations

import json

import pytest

from hifirag_core.pipeline.specs import BASE_STAGES
from hifirag_core.questions import InputError
from hifirag_core.store.warehouse import Warehouse

pytestmark = pytest.mark.usefixtures("prefect_harness")

STAGE_TABLES = ("query_plans", "search_results", "url_decisions", "pages", "sections", "section_decisions",
                "drafts", "citations", "answer_sentences", "answers", "stage_runs")


def test_every_stage_is_stored_and_a_second_run_reuses_everything(questions_file, data_root, run_flow):
    first = run_flow(questions_file)
    w = Warehouse(data_root)
    run_id = first["run_id"]
    assert first["status"] == "finished" and first["n_answered"] == 3
    assert first["stage_computations"] == 3 * len(BASE_STAGES) and first["cache_hits"] == 0
    for table in STAGE_TABLES:
        (n,) = w.query(f"SELECT count(DISTINCT question_id) FROM {table} WHERE run_id = ?", [run_id]).rows[0]
        assert n == 3, table
    answer, cited = w.query(
        "SELECT text, cited_urls FROM answers WHERE run_id = ? AND question_id = 'T1'", [run_id]).rows[0]
    assert "--max-rate" in answer
    assert "https://docs.tidewater.example/sync.html" in cited
    # the answer as the user reads it: each sentence followed by the [k] of its source (cited_urls[k - 1])
    cited_text, sentences = w.query(
        """SELECT a.cited_text, list(s.sentence ORDER BY s.sentence_index) FROM answers a
           JOIN answer_sentences s USING (run_id, question_id)
           WHERE run_id = ? AND question_id = 'T1' GROUP BY a.cited_text""", [run_id]).rows[0]
    assert "[1]" in cited_text and cited_text.replace(" [1]", "").replace(" [2]", "").replace(" [3]", "") == answer
    assert all(sentence in answer for sentence in sentences)
    per_sentence = w.query("SELECT urls, support, method FROM answer_sentences WHERE run_id = ? AND urls <> []",
                           [run_id]).rows
    assert per_sentence and all(support >= 0.6 and method.startswith("offline+") for _, support, method in per_sentence)
    (junk,) = w.query("SELECT count(*) FROM answers WHERE text ILIKE '%documentation generator%'").rows[0]
    assert junk == 0
    counts = {t: w.query(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).rows[0][0] for t in STAGE_TABLES}
    keys = w.query("SELECT stage, cache_key FROM stage_runs WHERE run_id = ?", [run_id]).rows
    assert all(key and key.startswith(stage) for stage, key in keys)  # each stage's cache key, in the ledger
    ledger = "SELECT question_id, stage, compute_seconds FROM stage_runs WHERE run_id = ? ORDER BY 1, 2"
    computed = w.query(ledger, [run_id]).rows
    assert all(seconds is not None and seconds >= 0 for _, _, seconds in computed)

    second = run_flow(questions_file)
    assert second["run_id"] == run_id  # the same questions and config: the same run
    assert second["stage_computations"] == 0 and second["cache_hits"] == 3 * len(BASE_STAGES)
    assert {t: w.query(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).rows[0][0]
            for t in STAGE_TABLES} == counts
    (cached,) = w.query("SELECT bool_and(cached) FROM stage_runs WHERE run_id = ?",
                        [run_id]).rows[0]
    assert cached is True
    assert w.query(ledger, [run_id]).rows == computed  # a cache hit keeps what computing the stage took
    (status,) = w.query("SELECT status FROM runs WHERE run_id = ?", [run_id]).rows[0]
    assert status == "finished"


def test_a_changed_stage_setting_recomputes_that_stage_and_not_the_ones_before(questions_file, data_root, run_flow):
    run_flow(questions_file)
    changed = run_flow(questions_file, overrides=["section_rank.max_sections_total=2"])
    w = Warehouse(data_root)
    rows = dict(w.query("SELECT stage, bool_or(NOT cached) FROM stage_runs WHERE run_id = ? GROUP BY stage",
                        [changed["run_id"]]).rows)
    assert not any(rows[s] for s in ("query_plan", "search", "url_filter", "fetch", "sections"))
    assert rows["section_rank"]


def test_a_failing_backend_leaves_status_rows_and_the_run_goes_on(questions_file, data_root, run_flow, monkeypatch):
    from hifirag_core.backends.offline import LocalFetcher
    from hifirag_core.errors import TransientError
    from tasks.stage_tasks import STAGE_TASKS

    def broken(self, url):
        raise TransientError("connection reset")

    monkeypatch.setattr(LocalFetcher, "fetch", broken)
    monkeypatch.setattr(STAGE_TASKS["fetch"], "retry_delay_seconds", [0, 0])
    summary = run_flow(questions_file)
    assert summary["status"] == "partial" and summary["n_failed"] == 3
    w = Warehouse(data_root)
    rows = w.query("SELECT status, error FROM stage_runs WHERE run_id = ? AND stage = 'fetch'",
                   [summary["run_id"]]).rows
    assert len(rows) == 3 and all(s == "failed" and "connection reset" in e for s, e in rows)
    answers = w.query("SELECT status, text FROM answers WHERE run_id = ?", [summary["run_id"]]).rows
    assert all(s == "no_answer" and t is None for s, t in answers)  # no error text posing as an answer


def test_bad_input_fails_before_anything_is_written(tmp_path, data_root, run_flow):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query": "fine", "iid": "A"}) + "\n{broken\n")
    with pytest.raises(InputError, match="line 2"):
        run_flow(bad)
    assert not (data_root / "tables").exists()
