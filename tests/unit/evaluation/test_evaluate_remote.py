"""`evaluate-remote` against another team's service: a fake on 127.0.0.1 that speaks (or breaks) the contract."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from flows.cli import app
from hifirag_core.evaluation.eval_config import build_evaluation_config
from hifirag_core.evaluation.remote import RemoteError, RemoteService, default_label, evaluate_remote
from hifirag_core.questions import Question
from hifirag_core.serving.contract import NO_ANSWER_RESPONSE, StreamMessage
from hifirag_core.store.warehouse import Warehouse
from tests.support.fakes.server import FakeServer, Fault, Request, Response
from tests.support.sitegen import QUESTIONS, write_questions

REFERENCES = {q["iid"]: q["reference"] for q in QUESTIONS}
URL = "https://docs.tidewater.example/sync.html"


class TeamService(FakeServer):
    """Another team's service: canned answers by question; its /run stream can leave out the last message."""

    name = "team"

    def __init__(self, answers: dict[str, str], *, complete: bool = True):
        super().__init__()
        self.answers = answers
        self.by_query = {q["query"]: q["iid"] for q in QUESTIONS}
        self.complete = complete

    def route(self, request: Request) -> Response:
        if request.method == "GET" and request.path == "/health":
            return Response(200, {"status": "healthy"})
        body = request.json() or {}
        if request.path == "/evaluate":
            return Response(200, {"query_id": body["iid"], "generated_response": self.answers.get(body["iid"], "")})
        if request.path == "/run":
            answer = self.answers.get(self.by_query.get(body.get("question"), ""), "")
            messages = [StreamMessage("**Searching**\n", None, True, False),
                        StreamMessage("**Searching**\n", answer, False, self.complete, (URL,) if self.complete else None)]
            return Response(200, b"".join(m.sse() for m in messages), content_type="text/event-stream")
        return Response(404, {"detail": "Not Found"})


@pytest.fixture
def questions(tmp_path) -> Path:
    return write_questions(tmp_path / "questions.jsonl")


def _evaluate(url: str, questions: Path, root: Path, **kwargs) -> dict:
    return evaluate_remote(url, str(questions), cfg=build_evaluation_config(["bertscore=false"]), root=root,
                           parallel=2, **kwargs)


def test_answers_become_result_jsonl_and_a_scored_run_and_missing_ones_get_the_fixed_sentence(questions, tmp_path):
    answers = {"T1": REFERENCES["T1"], "T2": "   ", "T3": REFERENCES["T3"]}
    with TeamService(answers) as team:
        team.inject(Fault("status", Response(500, {"detail": "boom"}), match=lambda r: b'"T3"' in r.body))
        result = _evaluate(team.base_url, questions, tmp_path / "data", label="team-x")
    lines = [json.loads(line) for line in Path(result["result_path"]).read_text().splitlines()]
    assert lines == [{"query_id": "T1", "generated_response": REFERENCES["T1"]},
                     {"query_id": "T2", "generated_response": NO_ANSWER_RESPONSE},
                     {"query_id": "T3", "generated_response": NO_ANSWER_RESPONSE}]
    assert set(result["not_answered"]) == {"T2", "T3"} and result["not_answered"]["T3"].startswith("http_500")
    w = Warehouse(tmp_path / "data")
    (status, variant, answered), = w.query("SELECT status, variant, n_answered FROM runs WHERE run_id = ?",
                                           [result["run_id"]]).rows
    assert (status, variant, answered) == ("partial", "team-x", 1)
    scores = dict(w.query("SELECT question_id, value FROM evaluation_scores WHERE evaluation_id = ? "
                          "AND metric = 'rouge_l_f1'", [result["evaluation_id"]]).rows)
    assert scores == {"T1": 1.0, "T2": 0.0, "T3": 0.0}
    latency = w.query("SELECT count(*) FROM evaluation_scores WHERE evaluation_id = ? AND metric = 'latency_s' "
                      "AND value > 0", [result["evaluation_id"]]).rows
    assert latency == [(3,)]  # each request's own seconds


def test_a_second_evaluation_of_the_same_service_is_compared_with_the_first(questions, tmp_path):
    answers = {q: REFERENCES[q] for q in ("T1", "T2", "T3")}
    with TeamService(answers) as team:
        first = _evaluate(team.base_url, questions, tmp_path / "data")
        team.answers = {"T1": "no idea", "T2": "no idea", "T3": "no idea"}
        second = _evaluate(team.base_url, questions, tmp_path / "data")
    assert first["label"] == second["label"] == default_label(team.base_url)
    assert first["verdicts"] == {first["label"]: "first"}
    assert second["baselines"] == {second["label"]: first["evaluation_id"]}
    assert second["verdicts"] == {second["label"]: "regressed"} and "rouge_l_f1" in second["regressed"][second["label"]]


def test_the_run_endpoint_is_read_as_a_stream_and_checked_against_the_contract(questions, tmp_path):
    answers = {q: REFERENCES[q] for q in ("T1", "T2", "T3")}
    with TeamService(answers) as team:
        good = _evaluate(team.base_url, questions, tmp_path / "good", endpoint="run")
        team.complete = False
        broken = _evaluate(team.base_url, questions, tmp_path / "broken", endpoint="run")
    assert good["contract_problems"] == {} and good["not_answered"] == {}
    cited = Warehouse(tmp_path / "good").query("SELECT DISTINCT cited_urls FROM answers WHERE run_id = ?",
                                               [good["run_id"]]).rows
    assert cited == [([URL],)]
    assert set(broken["not_answered"]) == {"T1", "T2", "T3"}
    assert all("the last message does not have complete true" in problems
               for problems in broken["contract_problems"].values())


def test_a_full_service_is_asked_again_after_its_retry_after():
    waits: list[float] = []
    with TeamService({"T1": "an answer"}) as team:
        team.inject(Fault("status", Response(503, {"error": "full"}, {"Retry-After": "2"}), times=2))
        answer = RemoteService(team.base_url, sleep=waits.append).ask(Question("T1", "q", None, 1), "evaluate")
    assert (answer.status, answer.text, waits) == ("ok", "an answer", [2.0, 2.0])


def test_a_service_that_does_not_answer_its_health_check_is_a_clear_error(tmp_path):
    with TeamService({}) as team:
        team.inject(Fault("status", Response(502, "bad gateway")))
        with pytest.raises(RemoteError, match="answered HTTP 502"):
            RemoteService(team.base_url).health()
        url = team.base_url
    with pytest.raises(RemoteError, match="no answer"):
        RemoteService(url, client=httpx.Client(timeout=2)).health()


def test_the_cli_prints_the_metrics_and_where_result_jsonl_is(questions, tmp_path):
    answers = {q: REFERENCES[q] for q in ("T1", "T2", "T3")}
    out = tmp_path / "result.jsonl"
    with TeamService(answers) as team:
        result = CliRunner().invoke(app, ["evaluate-remote", team.base_url, "--dataset", str(questions), "--out",
                                          str(out), "--eval-set", "bertscore=false", "--data-root",
                                          str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    assert "rouge_l_f1" in result.output.replace("-", "_").lower() or "ROUGE" in result.output
    assert str(out) in result.output.replace("\n", "") and len(out.read_text().splitlines()) == 3
    dead = CliRunner().invoke(app, ["evaluate-remote", team.base_url, "--dataset", str(questions), "--data-root",
                                    str(tmp_path / "data")])
    assert dead.exit_code == 2 and "no answer" in dead.output
