"""Follow-up turns through the service: ``follows`` on /run and /evaluate, the pages' Follow up box, MCP ``ask``.

The app in this process over a real ``Service`` on the Tidewater site, its questions answered by the question runner
in this process (the stage functions as a Prefect task runs them, without Prefect), driven by Starlette's TestClient
and by the MCP SDK's own in-process client. The restart of a real ``hifirag serve`` process, and the contract without
the field, are in ``tests/flows/test_service_follow_up_restart.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, unquote

import anyio
import pytest
from starlette.testclient import TestClient

from hifirag_core.pipeline.runner import QuestionRunner
from hifirag_core.pipeline.wiring import runtime_for
from hifirag_core.records import AnswerRecord, QuestionRecord
from hifirag_core.serving.app import create_app
from hifirag_core.serving.contract import STEP_SEPARATOR, check_messages, parse_sse
from hifirag_core.serving.service import Service
from hifirag_core.serving.settings import ServiceSettings
from hifirag_core.store.warehouse import Warehouse
from tests.unit.serving.test_service_access import RecordingAnswerer

HOME = "http://127.0.0.1"  # a Host the service answers to
FIRST = "What does Tidewater need to run?"
SECOND = "And on Windows?"


class InProcessAnswerer:
    """The pipeline in this process: the question runner over the run's runtime, each stage shown to the observer."""

    def warm_up(self, plan) -> None:
        runtime_for(plan.context()).embedder.load()

    def answer(self, question, plan, observer):
        return QuestionRunner(question, runtime_for(plan.context()), observer=observer).run()


def _service(root: Path, examples: Path, answerer) -> Service:
    return Service(ServiceSettings(data_root=root, overrides=(f"generation.examples={examples}",)), answerer)


def _run(client: TestClient, question: str, **fields) -> tuple[int, dict, list[dict], list[str]]:
    """(status, headers, messages, contract problems) of one /run."""
    with client.stream("POST", "/run", json={"question": question, **fields}) as response:
        lines = list(response.iter_lines())
        status, headers = response.status_code, dict(response.headers)
    parsed = parse_sse(lines)
    return status, headers, parsed.messages, parsed.problems + (check_messages(parsed.messages) if status == 200 else [])


def _rows(root: Path, sql: str, *params) -> list[dict]:
    result = Warehouse(root).query(sql, list(params))
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


# --- what cannot be followed: 422, and nothing reaches the pipeline ---------------------------------------


def test_a_follow_up_of_an_unknown_foreign_or_failed_answer_gets_422_and_starts_nothing(data_root, examples_file):
    answerer = RecordingAnswerer()
    service = _service(data_root, examples_file, answerer)
    client = TestClient(create_app(service), base_url=HOME)
    own = service.runs.plan().run_id  # today's service run: the service's own answers live in runs like it
    other_day = own[:-8] + "20250101"
    warehouse = Warehouse(data_root)

    def question(run_id: str, qid: str, answer: AnswerRecord | None) -> None:
        warehouse.write("questions", [QuestionRecord(query="How do I install Tidewater?")], run_id=run_id,
                        stage="input", question_id=qid)
        if answer is not None:
            warehouse.write("answers", [answer], run_id=run_id, stage="answer", question_id=qid)

    question("batch-run", "q1", AnswerRecord(text="Install it with pip install tidewater."))  # a batch run's
    question(own, "failed", AnswerRecord(status="no_answer", error="no answer text was produced"))
    question(own, "in-flight", None)
    question(other_day, "no-such-day-run", AnswerRecord(text="x"))  # the right name, but no questions row here
    cases = {
        f"{own}/nope": f"follows: no answer {own}/nope",
        "batch-run/q1": "follows: batch-run/q1 is not an answer of this service (run batch-run is not one of this "
                        "service's runs",
        f"{own}/failed": f"follows: {own}/failed did not answer its question (status no_answer)",
        f"{own}/in-flight": f"follows: {own}/in-flight has no answer yet",
        "not-an-answer-id": "follows: 'not-an-answer-id' is not an answer id",
        f"{other_day}/elsewhere": f"follows: no answer {other_day}/elsewhere",
    }
    for follows, says in cases.items():
        for path, body in (("/run", {"question": SECOND}), ("/evaluate", {"query": SECOND, "iid": "F1"})):
            reply = client.post(path, json={**body, "follows": follows})
            assert reply.status_code == 422, (path, follows, reply.text)
            assert reply.json()["error"].startswith("invalid request body: "), reply.json()
            assert says in reply.json()["error"] and reply.json()["detail"], (says, reply.json())
    for bad in (7, "", ["a/b"]):
        reply = client.post("/run", json={"question": SECOND, "follows": bad})
        assert reply.status_code == 422 and "follows" in reply.json()["error"], reply.json()
    assert answerer.asked == []  # not one of them reached the pipeline
    assert not _rows(data_root, "SELECT * FROM turns")


# --- a thread through the service ------------------------------------------------------------------------


@pytest.fixture
def served(data_root, examples_file):
    service = _service(data_root, examples_file, InProcessAnswerer())
    with TestClient(create_app(service), base_url=HOME) as client:  # the lifespan runs: warm-up, then serving
        yield client, service, data_root


@pytest.mark.slow
def test_a_thread_of_three_turns_over_run_evaluate_and_the_pages(served):
    client, service, root = served
    status, headers, messages, problems = _run(client, FIRST)
    assert status == 200 and problems == [], problems
    first = unquote(headers["x-hifirag-answer-id"])
    assert first == f"{headers['x-hifirag-run-id']}/{unquote(headers['x-hifirag-question-id'])}"
    # without follows the question reads nothing of a thread: no step says so, and no turns row is written
    assert "Follow-up" not in messages[-1]["intermediate_steps"]

    status, headers, messages, problems = _run(client, SECOND, follows=first, render="html")
    assert status == 200 and problems == [], problems
    second = unquote(headers["x-hifirag-answer-id"])
    steps = messages[-1]["intermediate_steps"].split(STEP_SEPARATOR)
    assert steps[1].startswith("**Follow-up**, read as: And on Windows? (Tidewater run)"), steps[1]
    assert messages[-1]["complete"] and messages[-1]["final_report"] and messages[-1]["citations"]

    # /evaluate follows the second turn: a third turn, in the same thread
    reply = client.post("/evaluate", json={"query": "And how do I check that it is installed?", "iid": "E3",
                                           "follows": second})
    assert reply.status_code == 200 and reply.json()["query_id"] == "E3" and reply.json()["generated_response"]
    third = unquote(reply.headers["x-hifirag-answer-id"])
    assert third.endswith("/E3")

    turns = _rows(root, "SELECT thread_id, turn, answer_id, follows, question, read_as FROM thread_turns ORDER BY turn")
    assert [(t["thread_id"], t["turn"], t["answer_id"], t["follows"]) for t in turns] == [
        (first, 1, first, None), (first, 2, second, first), (first, 3, third, second)]
    assert turns[1]["question"] == SECOND and turns[1]["read_as"] == "And on Windows? (Tidewater run)"
    meta = _rows(root, "SELECT meta_json FROM questions WHERE question_id = ?", second.split("/", 1)[1])[0]
    assert json.loads(meta["meta_json"])["follows"] == first

    # the answer page of turn 3 shows the thread before it and a Follow up box that opens the Ask page on it
    run_id, qid = third.split("/", 1)
    page = client.get(f"/runs/{quote(run_id, safe='')}/answers/{quote(qid, safe='')}")
    assert page.status_code == 200
    html = page.text
    assert html.index(FIRST) < html.index("And on Windows?") < html.index('id="query"')
    assert 'id="turn">turn 3 of its thread' in html
    assert f'name="follows" value="{third}"' in html and 'action="/" method="get"' in html
    ask = client.get("/", params={"follows": third, "question": "Why?"})
    assert ask.status_code == 200 and f'data-follows="{third}"' in ask.text
    assert ask.text.count('class="turn"') == 3 and ">Why?</textarea>" in ask.text
    # turn 1's page lists the turn that followed it up
    run_id, qid = first.split("/", 1)
    assert "followed up by:" in client.get(f"/runs/{quote(run_id, safe='')}/answers/{quote(qid, safe='')}").text
    bad = client.get("/", params={"follows": "nope/nothing"})
    assert bad.status_code == 200 and "no answer nope/nothing to follow up" in bad.text and "data-follows" not in bad.text


@pytest.mark.slow
def test_mcp_ask_takes_follows_and_returns_the_answer_id(served):
    from mcp import Client

    from hifirag_core.serving.mcp_server import create_mcp_server

    _, service, root = served
    server = create_mcp_server(service)

    async def session() -> tuple[dict, dict, object, dict]:
        async with Client(server, read_timeout_seconds=300) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            first = await client.call_tool("ask", {"question": FIRST})
            second = await client.call_tool("ask", {"question": SECOND,
                                                    "follows": first.structured_content["answer_id"]})
            refused = await client.call_tool("ask", {"question": SECOND, "follows": "batch-run/q1"})
            return first.structured_content, second.structured_content, refused, tools["ask"].input_schema

    first, second, refused, schema = anyio.run(session)
    assert "follows" in schema["properties"] and "follows" not in schema.get("required", [])
    assert first["answer_id"] == f"{first['run_id']}/{first['question_id']}" and first["answer"]
    assert second["answer"] and second["citations"]
    assert refused.is_error and "not an answer of this service" in refused.content[0].text
    (turn,) = _rows(root, "SELECT turn, follows FROM thread_turns WHERE answer_id = ?", second["answer_id"])
    assert turn == {"turn": 2, "follows": first["answer_id"]}
