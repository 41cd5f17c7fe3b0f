"""The service's day runs in the warehouse: started on the first question, counted from the rows, closed at day end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hifirag_core.config import build_config
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.questions import Question
from hifirag_core.records import AnswerRecord, StageRunRecord
from hifirag_core.records.serving import ServedRequestRecord
from hifirag_core.serving.ledger import ServiceRuns
from hifirag_core.store.warehouse import COMPACTED, Warehouse


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _answer(w: Warehouse, run_id: str, qid: str, *, cached: bool) -> None:
    w.write("answers", [AnswerRecord(text="an answer")], run_id=run_id, stage="answer", question_id=qid)
    w.write("stage_runs", [StageRunRecord(stage=s, cached=cached) for s in ("query_plan", "search")], run_id=run_id,
            stage=None, question_id=qid)


def _run(w: Warehouse, run_id: str) -> dict:
    result = w.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
    return dict(zip(result.columns, result.rows[0], strict=True))


def test_a_day_run_counts_its_questions_and_closes_when_the_next_day_begins(tmp_path):
    w = Warehouse(tmp_path)
    clock = Clock(datetime(2026, 12, 1, 23, 59, tzinfo=UTC))
    runs = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), clock=clock)
    day1 = runs.plan()
    assert day1.run_id.startswith("service-offline-final-") and day1.run_id.endswith("-20261201")
    runs.add_question(day1, Question("r1", "first question?", None, 1, {"endpoint": "/run"}))
    _answer(w, day1.run_id, "r1", cached=False)
    runs.add_question(day1, Question("V_1", "second question?", None, 2, {"endpoint": "/evaluate", "iid": "V_1"}))
    _answer(w, day1.run_id, "V_1", cached=True)
    runs.record_served(day1, "V_1", ServedRequestRecord(endpoint="/evaluate", iid="V_1", outcome="complete"))
    runs.refresh()
    row = _run(w, day1.run_id)
    assert (row["status"], row["dataset"], row["n_questions"], row["n_answered"]) == ("serving", "service", 2, 2)
    assert (row["stage_computations"], row["cache_hits"]) == (2, 2)
    assert w.query("SELECT outcome FROM served_requests WHERE question_id = 'V_1'").rows == [("complete",)]

    clock.now += timedelta(minutes=2)  # past midnight (UTC): the next question opens the next day's run
    day2 = runs.plan()
    assert day2.run_id.endswith("-20261202")
    runs.add_question(day2, Question("r2", "third?", None, 3))
    closed = _run(w, day1.run_id)
    assert closed["status"] == "finished" and closed["finished_at"] is not None and closed["n_questions"] == 2
    part = w.partition("questions", day1.run_id)
    assert [p.name for p in part.glob("*.parquet")] == [COMPACTED]
    assert _run(w, day2.run_id)["status"] == "serving"
    runs.close()
    assert _run(w, day2.run_id)["status"] == "finished"


def test_a_restart_on_the_same_day_writes_to_the_same_run_and_keeps_its_start(tmp_path):
    w = Warehouse(tmp_path)
    clock = Clock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    first = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), clock=clock)
    plan = first.plan()
    first.add_question(plan, Question("r1", "q?", None, 1))
    first.close()
    started = _run(w, plan.run_id)["started_at"]
    clock.now += timedelta(hours=3)
    again = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), clock=clock)
    assert again.plan().run_id == plan.run_id
    again.add_question(plan, Question("r2", "q2?", None, 2))
    again.refresh()
    row = _run(w, plan.run_id)
    assert (row["status"], row["n_questions"], row["started_at"]) == ("serving", 2, started)


def test_another_configuration_serves_into_another_run(tmp_path):
    w = Warehouse(tmp_path)
    clock = Clock(datetime(2026, 12, 1, tzinfo=UTC))
    a = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), clock=clock).plan().run_id
    b = ServiceRuns(w, "offline", build_config(overrides={"url_filter": {"max_urls": 3}}), ExampleSet("", ()),
                    clock=clock).plan().run_id
    assert a != b


def test_an_answer_that_lands_after_a_refresh_is_counted_by_the_next_one(tmp_path):
    # The day run's row said "answered 0" for good: a refresh between the question's arrival and its answer
    # used up the "something changed" flag, and the answer itself never set it again.
    w = Warehouse(tmp_path)
    runs = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), clock=Clock(datetime(2026, 12, 1, tzinfo=UTC)))
    plan = runs.plan()
    runs.add_question(plan, Question("r1", "q?", None, 1, {"endpoint": "/run"}))
    runs.refresh()  # the periodic refresh while the question is still being answered
    assert (_run(w, plan.run_id)["n_questions"], _run(w, plan.run_id)["n_answered"]) == (1, 0)
    _answer(w, plan.run_id, "r1", cached=False)
    runs.answered()
    runs.refresh()
    assert _run(w, plan.run_id)["n_answered"] == 1
