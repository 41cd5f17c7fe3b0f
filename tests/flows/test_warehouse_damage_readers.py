"""What reads a damaged run never takes the rows it lost for the whole run (issue 42, item 1).

* A run that takes rows from it (a reprocess) is not stopped and takes no hole: it says which file it
  skipped, and computes those stages again, from the stage cache. Before, a reprocess of a run whose
  answers file was cut short reused the answer stage with no rows and ended Failed with ``IndexError``.
* Scoring it refuses, naming the files and the repair, instead of scoring the lost answers as empty.
* ``hifirag answers`` shows those answers as not readable, and scores only the ones it read.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.cli.common import EXIT_INCOMPLETE
from hifirag_core.pipeline.reuse import StoredRun
from hifirag_core.questions import Question
from hifirag_core.records import AnswerRecord, StageRunRecord
from hifirag_core.store.warehouse import COMPACTED, Warehouse, WarehouseError


def _truncate(path, size: int = 200) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def test_a_stage_whose_rows_are_gone_is_not_served_from_the_stored_run(tmp_path):
    w = Warehouse(tmp_path)
    for qid in ("q1", "q2"):
        w.write("answers", [AnswerRecord(text=f"answer {qid}")], run_id="p", stage="answer", question_id=qid)
        w.write("stage_runs", [StageRunRecord(stage="answer", status="ok", n_rows=1)], run_id="p", stage=None,
                question_id=qid)
    w.write("answers", [], run_id="p", stage="answer", question_id="q3")  # ran, wrote nothing: served as such
    w.write("stage_runs", [StageRunRecord(stage="answer", status="ok", n_rows=0)], run_id="p", stage=None,
            question_id="q3")
    w.compact_run("p")
    healthy = StoredRun(w, "p")
    assert [r.text for r in healthy.output("answer", Question("q1", "", None, 0)).records] == ["answer q1"]

    _truncate(w.partition("answers", "p") / COMPACTED)
    damaged = StoredRun(Warehouse(tmp_path), "p")
    assert damaged.output("answer", Question("q1", "", None, 0)) is None  # computed again, never a hole
    assert damaged.output("answer", Question("q3", "", None, 0)).records == []


@pytest.mark.usefixtures("prefect_harness")
def test_a_reprocess_of_a_damaged_run_says_so_and_computes_what_it_lost_again(run_flow, data_root,
                                                                              questions_file):
    from flows.environment import stage_cache_at
    from flows.reprocess import reprocess

    parent = run_flow(questions_file, run_id="parent")
    w = Warehouse(data_root)
    answers = "SELECT question_id, text, cited_urls FROM answers WHERE run_id = ? ORDER BY question_id"
    sections = "SELECT question_id, heading_path, text FROM sections WHERE run_id = ? ORDER BY ALL"
    before = w.query(answers, ["parent"]).rows, w.query(sections, ["parent"]).rows
    assert len(before[0]) == parent["n_questions"] == 3 and before[1]
    truncated = w.partition("answers", "parent") / COMPACTED
    _truncate(truncated, 2000 if truncated.stat().st_size > 2000 else 100)
    (w.partition("sections", "parent") / COMPACTED).unlink()

    with stage_cache_at(data_root):
        child = reprocess(run_id="parent", from_stage="answer", questions=["T1"], data_root=str(data_root))
    assert child["status"] == "finished" and child["n_answered"] == 3
    lines = [n for n in child["notes"] if n.startswith("INCOMPLETE")]
    assert len(lines) == 2, child["notes"]
    assert any("tables/answers/run_id=parent/_compacted.parquet" in n for n in lines)
    assert any("table sections, run parent" in n for n in lines)
    assert all("this run computes the stages it held again" in n
               and n.endswith("repair with: hifirag warehouse check --repair --run parent") for n in lines)
    run_id = child["run_id"]
    assert (w.query(answers, [run_id]).rows, w.query(sections, [run_id]).rows) == before
    # the lost stages came from the stage cache (no parent's rows to copy), the rest from the parent
    sources = dict(w.query("SELECT stage, list(DISTINCT coalesce(source_run_id, 'cache') ORDER BY 1) FROM stage_runs "
                           "WHERE run_id = ? AND cached GROUP BY stage", [run_id]).rows)
    assert sources["sections"] == ["cache"] and sources["answer"] == ["cache"]
    assert sources["search"] == ["parent"]


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_whose_answers_were_skipped_is_not_scored_and_its_answers_say_so(run_flow, data_root, questions_file):
    from hifirag_core.evaluation.eval_config import build_evaluation_config
    from hifirag_core.evaluation.eval_steps import Scorer, plan_evaluation, score_variant

    run_flow(questions_file, run_id="scored")
    cfg = build_evaluation_config(["bootstrap_resamples=200", "bertscore=false"])
    plan = plan_evaluation(str(questions_file), ["final"], cfg=cfg, root=data_root)
    scorer = Scorer(cfg, data_root)
    assert score_variant(Warehouse(data_root), plan, "final", "scored", scorer).n_answered == 3
    healthy = CliRunner().invoke(app, ["answers", "scored", "--data-root", str(data_root)])
    assert healthy.exit_code == 0 and healthy.stdout.count("ROUGE-L F1 vs gold") == 3
    _truncate(Warehouse(data_root).partition("answers", "scored") / COMPACTED)

    with pytest.raises(WarehouseError) as refused:
        score_variant(Warehouse(data_root), plan, "final", "scored", scorer)
    assert "run 'scored' is not scored" in str(refused.value)
    assert "tables/answers/run_id=scored/_compacted.parquet" in str(refused.value)
    assert "hifirag warehouse check --repair --run scored" in str(refused.value)

    shown = CliRunner().invoke(app, ["answers", "scored", "--data-root", str(data_root)])
    assert shown.exit_code == EXIT_INCOMPLETE
    assert shown.stdout.count("answer not readable: its row is in a damaged file") == 3
    assert "ROUGE-L F1 vs gold" not in shown.stdout and "3 answer(s) not readable, not scored" in shown.stdout
    assert shown.stderr.startswith("INCOMPLETE: skipped tables/answers/run_id=scored/_compacted.parquet")
