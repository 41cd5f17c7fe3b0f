"""The Runs table counts the service run's answers as they land (issue 39, item 5).

The day's service run row is refreshed from the warehouse before a stream's last message, so a client that reads
the runs once its answer is complete (the Ask page's own table, `hifirag runs`, the MCP `runs` tool) finds that
answer counted; the quick refresh after an answer leaves a due compaction to the periodic one, which still does it.
The service runs in this process over a real warehouse, with an answerer that answers at once (no pipeline).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from starlette.testclient import TestClient

from hifirag_core.config import build_config
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.questions import Question
from hifirag_core.records import AnswerRecord, StageRunRecord
from hifirag_core.serving.app import create_app
from hifirag_core.serving.ledger import ServiceRuns
from hifirag_core.serving.service import ANSWER_STAGE, QuestionResult, Service
from hifirag_core.serving.settings import ServiceSettings
from hifirag_core.store.warehouse import COMPACTED, Warehouse
from tests.support.sitegen import write_examples

URL = "https://docs.tidewater.example/sync.html"


class AtOnce:
    """Answers every question with one cited sentence, reporting the answer stage as the pipeline would."""

    def warm_up(self, plan) -> None:
        pass

    def answer(self, question, plan, observer):
        record = AnswerRecord(text="Use --max-rate.", cited_text="Use --max-rate. [1]", cited_urls=[URL],
                              answerability="answered")
        output = StageOutput(stage=ANSWER_STAGE, records=[record])
        row = StageRunRecord(stage=ANSWER_STAGE)
        observer(output, row)
        return QuestionResult(question, [output], [row])


def _runs_row(root: Path, run_id: str) -> dict:
    result = Warehouse(root).query("SELECT * FROM runs WHERE run_id = ?", [run_id])
    return dict(zip(result.columns, result.rows[0], strict=True))


def test_the_service_run_counts_each_answer_before_its_stream_ends(tmp_path):
    examples = write_examples(tmp_path / "examples.jsonl")
    service = Service(ServiceSettings(data_root=tmp_path / "data", overrides=(f"generation.examples={examples}",)),
                      AtOnce())
    client = TestClient(create_app(service), base_url="http://127.0.0.1")
    for n in (1, 2):
        with client.stream("POST", "/run", json={"question": f"How do I limit the bandwidth ({n})?"}) as response:
            assert response.status_code == 200
            last = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")][-1]
            run_id = response.headers["x-hifirag-run-id"]
        assert last["complete"] and last["citations"] == [URL]
        # read as soon as the last message is in: the row already counts this answer
        row = _runs_row(tmp_path / "data", run_id)
        assert (row["status"], row["n_questions"], row["n_answered"]) == ("serving", n, n)
        front = client.get("/", headers={"Accept": "text/html"}).text  # the Ask page's Runs table says so too
        assert f"<td>{n}</td><td>{n}</td>" in front.replace("\n", "").replace(" ", ""), front
    service.bookkeeping.shutdown(wait=True)
    service.pipeline.shutdown(wait=True)


def test_a_due_compaction_waits_for_the_periodic_refresh_and_is_not_lost(tmp_path):
    w = Warehouse(tmp_path)
    runs = ServiceRuns(w, "offline", build_config(), ExampleSet("", ()), compact_every=2,
                       clock=lambda: datetime(2026, 12, 1, 12, tzinfo=UTC))
    plan = runs.plan()
    for n in (1, 2):
        runs.add_question(plan, Question(f"r{n}", "q?", None, n, {"endpoint": "/run"}))
        w.write("answers", [AnswerRecord(text="an answer")], run_id=plan.run_id, stage="answer", question_id=f"r{n}")
        runs.answered()
        runs.refresh(compact=False)  # the refresh after each answer: counts, never compacts
    assert _runs_row(tmp_path, plan.run_id)["n_answered"] == 2
    questions = w.partition("questions", plan.run_id)
    assert COMPACTED not in [p.name for p in questions.glob("*.parquet")]
    runs.refresh()  # the periodic refresh: nothing new to count, but the compaction is due
    assert [p.name for p in questions.glob("*.parquet")] == [COMPACTED]
    assert _runs_row(tmp_path, plan.run_id)["n_answered"] == 2
