"""`hifirag serve` in its own process on 127.0.0.1, driven by a real HTTP client (httpx) as the arena drives it.

Two services share one Prefect server: the offline default (the stream, bad bodies, the cache, /evaluate,
evaluate-remote), and one whose writer is a slow OpenAI-compatible fake, so that questions stay in flight
long enough for the concurrency limit, a client that leaves mid-stream, the deadline and the heartbeat.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from hifirag_core.evaluation.export import check_submission
from hifirag_core.pipeline.specs import BASE_STAGES
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT
from hifirag_core.serving.answer_report import UNCHECKED_DRAFT
from hifirag_core.serving.contract import NO_ANSWER_RESPONSE, STEP_SEPARATOR, check_messages, parse_sse
from hifirag_core.store.warehouse import Warehouse
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.server import Fault, Response
from tests.support.prefect_server import prefect_server
from tests.support.service_process import hifirag_service
from tests.support.sitegen import BASE_URL, write_examples, write_questions

pytestmark = pytest.mark.slow

BANDWIDTH = "How do I limit the bandwidth Tidewater uses during a sync?"
SECRET = "fake-openai-key"  # the slow service's key: no response may ever contain it


def _root(tmp_path_factory, site_dir: Path, name: str) -> Path:
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    root = tmp_path_factory.mktemp(name) / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    return root


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory):
    with prefect_server(tmp_path_factory.mktemp("prefect-home")) as url:
        yield url


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> Path:
    return write_examples(tmp_path_factory.mktemp("examples") / "examples.jsonl")


@pytest.fixture(scope="module")
def offline(tmp_path_factory, site_dir, prefect_api, examples):
    """The offline service: (base URL, data root)."""
    root = _root(tmp_path_factory, site_dir, "offline")
    with hifirag_service(root, "--set", f"generation.examples={examples}", "--heartbeat", "5",
                         env={"PREFECT_API_URL": prefect_api}) as url:
        yield url, root


@pytest.fixture(scope="module")
def slow_writer():
    with OpenAIFake(api_key=SECRET) as fake:
        yield fake


@pytest.fixture(scope="module")
def slow(tmp_path_factory, site_dir, prefect_api, examples, slow_writer):
    """Two questions at a time, a 20 s deadline, a heartbeat every 0.5 s; the writer is the OpenAI fake."""
    root = _root(tmp_path_factory, site_dir, "slow")
    args = ["--concurrency", "2", "--deadline", "20", "--heartbeat", "0.5", "--set", f"generation.examples={examples}",
            "--set", "backends.writer_llm=openai", "--set", f"models.openai_base_url={slow_writer.base_url}/v1",
            "--set", "models.writer=fake-writer"]
    with hifirag_service(root, *args, env={"PREFECT_API_URL": prefect_api, "OPENAI_API_KEY": SECRET}) as url:
        yield url, root


class Stream:
    """A /run response read line by line, each line with the time it arrived."""

    def __init__(self, base: str, question: str, *, stop: Callable[[dict], bool] | None = None, timeout: float = 300):
        self.lines: list[tuple[float, str]] = []
        began = time.monotonic()
        with httpx.Client(timeout=timeout) as client, \
                client.stream("POST", f"{base}/run", json={"question": question}) as response:
            self.status, self.headers = response.status_code, response.headers
            for line in response.iter_lines():
                self.lines.append((time.monotonic() - began, line))
                if stop is not None and line.startswith("data: ") and stop(json.loads(line[6:])):
                    break  # leaving the with-block closes the connection mid-stream
        parsed = parse_sse([line for _, line in self.lines])
        self.messages, self.problems = parsed.messages, parsed.problems + check_messages(parsed.messages)
        self.question_id = unquote(self.headers.get("x-hifirag-question-id", ""))
        self.run_id = self.headers.get("x-hifirag-run-id")

    @property
    def raw(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _wait_for(fetch: Callable[[], object], timeout: float = 120) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def _served(root: Path, question_id: str) -> dict | None:
    """The request's served_requests row, once written."""
    result = Warehouse(root).query("SELECT * FROM served_requests WHERE question_id = ?", [question_id])
    return dict(zip(result.columns, result.rows[0], strict=True)) if result.rows else None


def _idle(base: str) -> bool:
    return httpx.get(f"{base}/health", timeout=10).json()["in_flight"] == 0


# --- the offline service -----------------------------------------------------------------------------


def test_health_answers_json(offline):
    url, _ = offline
    response = httpx.get(f"{url}/health", timeout=30)
    assert response.status_code == 200 and response.json()["status"] == "ok"
    # the service's default variant is hifirag run's (issue 41: it looks again as final_deep does and answers,
    # showing its judgment, until a judgment meets the transfer targets on every kind of corpus)
    assert response.json()["variant"] == DEFAULT_RUN_VARIANT == "final_deep_judged"
    assert response.json()["run_id"].startswith(f"service-offline-{DEFAULT_RUN_VARIANT}-")


def test_run_streams_the_plan_the_urls_and_sections_kept_then_the_answer_and_its_citations(offline):
    url, root = offline
    stream = Stream(url, BANDWIDTH)
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert stream.problems == [], stream.raw
    # every non-empty line is a data line, each followed by a blank one
    lines = [line for _, line in stream.lines]
    assert all(line.startswith("data: {") for line in lines[::2]) and all(line == "" for line in lines[1::2])
    thinking = [m for m in stream.messages if m["is_intermediate"]]
    steps = thinking[-1]["intermediate_steps"].split(STEP_SEPARATOR)
    # the default (final_deep_judged) checks its sources after ranking; they cover this question, so it writes at once
    assert [s.split("**")[1] for s in steps] == ["Question received", "Query plan", "Search", "URLs kept", "Pages read",
                                                 "Sections", "Sections kept", "Sources checked", "Draft", "Refined",
                                                 "Citations checked"]
    assert "every part of the question" in steps[7] and "Looking again" not in thinking[-1]["intermediate_steps"]
    assert "of" in steps[3] and "found" in steps[3] and f"<{BASE_URL}sync.html>" in steps[3]
    assert "#limiting-bandwidth>" in steps[6]
    last = stream.messages[-1]
    assert last["complete"] is True and last["is_intermediate"] is False and "--max-rate" in last["final_report"]
    assert last["citations"] == [f"{BASE_URL}sync.html"]
    assert last["intermediate_steps"] == thinking[-1]["intermediate_steps"]
    # the messages came as the stages finished: the first long before the last
    assert stream.lines[0][0] < stream.lines[-1][0]
    # the question and its stage rows are in the day's service run
    w = Warehouse(root)
    (cited_text, cited_urls), = w.query("SELECT cited_text, cited_urls FROM answers WHERE run_id = ? AND question_id = ?",
                                       [stream.run_id, stream.question_id]).rows
    # the report is the answer with its per-sentence [k] markers, [k] being citations[k - 1]
    assert last["final_report"].startswith(cited_text.strip()) and "[1]" in cited_text
    assert last["citations"] == cited_urls and f"1. <{cited_urls[0]}>" in last["final_report"]
    (sentence_urls,), = w.query("SELECT list_distinct(flatten(list(urls))) FROM answer_sentences "
                                "WHERE run_id = ? AND question_id = ?", [stream.run_id, stream.question_id]).rows
    assert sorted(sentence_urls) == sorted(cited_urls)
    served = _wait_for(lambda: _served(root, stream.question_id))
    assert served["endpoint"] == "/run" and served["outcome"] == "complete" and served["report"] == "answered"
    assert served["events"] == len(stream.messages) and served["first_event_s"] < served["seconds"]
    (status, dataset), = w.query("SELECT status, dataset FROM runs WHERE run_id = ?", [stream.run_id]).rows
    assert (status, dataset) == ("serving", "service")


def test_the_same_question_twice_is_answered_from_the_stage_cache(offline):
    url, root = offline
    question = "What happens in Tidewater when the same file changed on both sides?"
    first, second = Stream(url, question), Stream(url, question)
    assert first.problems == [] and second.problems == []
    assert first.messages[-1]["final_report"] == second.messages[-1]["final_report"]
    w = Warehouse(root)

    def ledger(qid: str) -> list[tuple]:
        return w.query("SELECT stage, cached FROM stage_runs WHERE question_id = ? ORDER BY stage", [qid]).rows

    assert not all(cached for _, cached in ledger(first.question_id))
    # every stage the first asking ran (the default's: the paper's stages and the sufficiency check), from the cache
    stages = ledger(second.question_id)
    assert [s for s, _ in stages] == [s for s, _ in ledger(first.question_id)] and all(cached for _, cached in stages)
    assert {s for s, _ in stages} == {*BASE_STAGES, "sufficiency"}
    served = _wait_for(lambda: _served(root, second.question_id))
    assert (served["stages"], served["stages_from_cache"]) == (len(stages), len(stages))


def test_evaluate_answers_in_the_static_format(offline):
    url, root = offline
    response = httpx.post(f"{url}/evaluate", json={"query": "Where does Tidewater read its settings from?",
                                                   "iid": "V_0042-é"}, timeout=300)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"query_id", "generated_response"} and body["query_id"] == "V_0042-é"
    assert ".tidewater.toml" in body["generated_response"]
    assert response.headers["x-hifirag-question-id"] == "V_0042-%C3%A9"  # a header holds ASCII only
    (meta,), = Warehouse(root).query("SELECT meta_json FROM questions WHERE question_id = 'V_0042-é'").rows
    assert json.loads(meta) == {"endpoint": "/evaluate", "iid": "V_0042-é"}


@pytest.mark.parametrize(("body", "headers", "status", "says"), [
    # a form is not JSON, and no cross-site form may start a question: 415 (tests/unit/serving/test_service_access.py)
    (b"question=hello", {"content-type": "application/x-www-form-urlencoded"}, 415, "Content-Type: application/json"),
    (b'{"question": ', {"content-type": "application/json"}, 422, "the body is not JSON"),
    (b'{"query": "hello"}', {"content-type": "application/json"}, 422, "question: required"),
    (b'{"question": ["a"]}', {"content-type": "application/json"}, 422, "question: must be a string, not list"),
    (b'{"question": "  "}', {"content-type": "application/json"}, 422, "question: must not be empty"),
    (json.dumps({"question": "x" * 5000}).encode(), {"content-type": "application/json"}, 422, "at most 4,000"),
])
def test_a_malformed_body_gets_422_with_a_clear_message(offline, body, headers, status, says):
    url, _ = offline
    response = httpx.post(f"{url}/run", content=body, headers=headers, timeout=60)
    assert response.status_code == status
    assert says in response.json()["error"] and "Traceback" not in response.text


def test_the_optional_steering_fields_round_trip_into_the_question_and_its_answer(offline):
    url, root = offline
    body = {"query": "Where does Tidewater read its settings from?", "iid": "S_1",
            "sites": ["tidewater.example"], "after": "2001-01-01", "language": "FR", "length": "short"}
    response = httpx.post(f"{url}/evaluate", json=body, timeout=300)
    assert response.status_code == 200 and response.json()["query_id"] == "S_1"
    assert ".tidewater.toml" in response.json()["generated_response"]
    (meta,), = Warehouse(root).query("SELECT meta_json FROM questions WHERE question_id = 'S_1'").rows
    assert json.loads(meta) == {"endpoint": "/evaluate", "iid": "S_1", "sites": ["tidewater.example"],
                                "after": "2001-01-01", "language": "fr", "length": "short"}
    (language, note, stage), = Warehouse(root).query(
        "SELECT language, note, from_stage FROM answers WHERE question_id = 'S_1'").rows
    assert language == "fr" and "English only" in note  # the offline writer says so


@pytest.mark.parametrize(("extra", "says"), [
    ({"sites": ["https://docs.example.com/a"]}, "sites: 'https://docs.example.com/a' is not a domain"),
    ({"after": "2024-05-01", "before": "2024-01-01"}, "after 2024-05-01 is later than before 2024-01-01"),
    ({"after": "01/05/2024"}, "after must be a day written YYYY-MM-DD"),
    ({"language": "xx"}, "unknown language code 'xx'"),
    ({"length": "tiny"}, "length must be one of short, standard, long"),
])
def test_a_bad_steering_value_gets_422_with_a_clear_message(offline, extra, says):
    url, _ = offline
    for endpoint, body in (("run", {"question": "hello"}), ("evaluate", {"query": "hello", "iid": "B_1"})):
        response = httpx.post(f"{url}/{endpoint}", json={**body, **extra}, timeout=60)
        assert response.status_code == 422, endpoint
        assert says in response.json()["error"] and "Traceback" not in response.text


def test_a_body_over_the_limit_gets_413_announced_or_chunked(offline):
    url, _ = offline
    big = json.dumps({"question": "x" * 70_000}).encode()
    announced = httpx.post(f"{url}/run", content=big, headers={"content-type": "application/json"}, timeout=60)
    chunked = httpx.post(f"{url}/evaluate", content=iter([big[:40_000], big[40_000:]]),
                         headers={"content-type": "application/json"}, timeout=60)
    for response in (announced, chunked):
        assert response.status_code == 413 and "larger than 65,536 bytes" in response.json()["error"]
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200  # the service is none the worse


def test_evaluate_remote_scores_this_service_from_its_result_jsonl(offline, tmp_path):
    from hifirag_core.evaluation.eval_config import build_evaluation_config
    from hifirag_core.evaluation.remote import evaluate_remote

    url, _ = offline
    questions = write_questions(tmp_path / "questions.jsonl")
    root = tmp_path / "evaluator"
    result = evaluate_remote(url, str(questions), cfg=build_evaluation_config(["bertscore=false"]), root=root,
                             endpoint="run", parallel=2)
    lines = [json.loads(line) for line in Path(result["result_path"]).read_text().splitlines()]
    assert [line["query_id"] for line in lines] == ["T1", "T2", "T3"]
    assert check_submission(Path(result["result_path"]), ["T1", "T2", "T3"]) == []
    assert all(line["generated_response"] != NO_ANSWER_RESPONSE for line in lines)
    assert result["contract_problems"] == {} and result["not_answered"] == {}
    w = Warehouse(root)
    (mean,), = w.query("SELECT mean FROM evaluation_summary WHERE evaluation_id = ? AND metric = 'rouge_l_f1'",
                       [result["evaluation_id"]]).rows
    assert mean > 0.2  # the offline pipeline's extracts share most words with these references
    cited = w.query("SELECT cited_urls FROM answers WHERE run_id = ? AND question_id = 'T1'", [result["run_id"]]).rows
    assert cited == [([f"{BASE_URL}sync.html"],)]


# --- the slow service: limits, disconnects, the deadline -------------------------------------------------


def test_requests_up_to_the_limit_are_answered_and_past_it_get_503_with_retry_after(slow, slow_writer):
    url, _ = slow
    assert _wait_for(lambda: _idle(url))
    slow_writer.kind_latency = {"draft": 4.0}
    streams: list[Stream] = []
    threads = [threading.Thread(target=lambda q=q: streams.append(Stream(url, q))) for q in (
        "Which platforms does Tidewater run on?", "What does tidewater doctor check?")]
    try:
        for t in threads:
            t.start()
        assert _wait_for(lambda: httpx.get(f"{url}/health", timeout=10).json()["in_flight"] == 2, timeout=60)
        refused = [httpx.post(f"{url}/run", json={"question": "Is a third question welcome?"}, timeout=30),
                   httpx.post(f"{url}/evaluate", json={"query": "And a fourth?", "iid": "X4"}, timeout=30)]
        for response in refused:
            assert response.status_code == 503
            assert 1 <= int(response.headers["retry-after"]) <= 60
            assert "its limit" in response.json()["error"]
    finally:
        for t in threads:
            t.join(timeout=300)
        slow_writer.kind_latency = 0.0
    assert len(streams) == 2 and all(s.status == 200 and s.problems == [] for s in streams)
    assert all(s.messages[-1]["final_report"] for s in streams)
    assert _wait_for(lambda: _idle(url))
    assert httpx.post(f"{url}/evaluate", json={"query": "What does tidewater doctor check?", "iid": "X5"},
                      timeout=300).status_code == 200


def test_a_client_that_leaves_mid_stream_still_leaves_a_recorded_question(slow, slow_writer):
    url, root = slow
    assert _wait_for(lambda: _idle(url))
    slow_writer.kind_latency = {"draft": 3.0}
    try:
        stream = Stream(url, "How does Tidewater resolve a conflict?",
                        stop=lambda m: "Sections kept" in (m["intermediate_steps"] or ""))
    finally:
        slow_writer.kind_latency = 0.0
    assert not stream.messages[-1]["complete"]  # it left before the answer
    served = _wait_for(lambda: _served(root, stream.question_id))
    assert served["outcome"] == "disconnected" and served["pipeline_seconds"] >= served["seconds"]
    w = Warehouse(root)
    answer = w.query("SELECT status, text FROM answers WHERE question_id = ?", [stream.question_id]).rows
    assert answer and answer[0][0] == "ok" and answer[0][1]
    # every stage ran to the end (the writer's too), each round's once
    stages = w.query("SELECT stage, round FROM stage_runs WHERE question_id = ?", [stream.question_id]).rows
    assert {s for s, r in stages if r == 0} == {*BASE_STAGES, "sufficiency"} and len(set(stages)) == len(stages)


def test_past_the_deadline_the_stream_ends_with_the_draft_and_idle_streams_get_heartbeats(slow, slow_writer):
    url, root = slow
    assert _wait_for(lambda: _idle(url))
    slow_writer.kind_latency = {"refine": 60.0}  # far past the service's 20 s deadline
    try:
        stream = Stream(url, "Which environment variable sets the directory where Tidewater keeps its state?")
    finally:
        slow_writer.kind_latency = 0.0
    assert stream.problems == [], stream.raw
    assert stream.lines[-1][0] < 20 + 5  # it did not wait for the writer
    last = stream.messages[-1]
    assert last["complete"] is True and "error" not in last and "TIDEWATER_HOME" in last["final_report"]
    assert "**Deadline**" in last["intermediate_steps"] and "not checked" in last["intermediate_steps"]
    # a draft whose sources were never checked cites nothing and carries no [k] markers
    assert last["citations"] == [] and not re.search(r"\[\d+\]", last["final_report"])
    assert UNCHECKED_DRAFT in last["final_report"] and f"{BASE_URL}config.html" not in last["final_report"]
    data = [line for _, line in stream.lines if line]
    assert any(a == b for a, b in zip(data, data[1:], strict=False))  # the heartbeat: the last message again
    served = _wait_for(lambda: _served(root, stream.question_id), timeout=180)
    assert served["outcome"] == "deadline" and served["report"] == "draft" and served["heartbeats"] >= 5
    refine = Warehouse(root).query("SELECT status FROM stage_runs WHERE question_id = ? AND stage = 'refine'",
                                   [stream.question_id]).rows
    assert refine and refine[0][0] != "ok"  # the pipeline stopped the refine call at the deadline


def test_no_response_holds_a_secret_or_a_traceback_even_when_the_writer_fails(slow, slow_writer):
    url, root = slow
    assert _wait_for(lambda: _idle(url))
    leak = {"error": {"message": f"Incorrect API key provided: {SECRET}", "type": "invalid_request_error",
                      "param": None, "code": "invalid_api_key"}}
    slow_writer.inject(Fault("status", Response(401, leak), times=10))
    try:
        stream = Stream(url, "How do I install Tidewater?")
        evaluated = httpx.post(f"{url}/evaluate", json={"query": "How do I install Tidewater with pip?", "iid": "S1"},
                               timeout=300)
    finally:
        slow_writer.clear_faults()
    assert stream.problems == []
    assert "**Draft**: could not run" in stream.messages[-1]["intermediate_steps"]
    assert stream.messages[-1]["final_report"] == NO_ANSWER_RESPONSE
    assert evaluated.json()["generated_response"] == NO_ANSWER_RESPONSE
    for text in (stream.raw, evaluated.text, httpx.get(f"{url}/health", timeout=30).text):
        assert SECRET not in text and "Traceback" not in text
    # the warehouse keeps the failure as a status row
    status = Warehouse(root).query("SELECT status FROM drafts WHERE question_id = ? AND stage = 'draft'",
                                   [stream.question_id]).rows
    assert status and status[0][0] != "ok"


def test_run_shows_the_draft_growing_while_the_writer_streams_it_then_the_refined_answer(slow, slow_writer):
    url, root = slow
    assert _wait_for(lambda: _idle(url))
    slow_writer.stream_gap_s, slow_writer.stream_words = 0.15, 2  # the draft arrives over a few seconds
    try:
        stream = Stream(url, "What happens in Tidewater when the same file changed on both sides?")
    finally:
        slow_writer.stream_gap_s, slow_writer.stream_words = 0.0, 4
    assert stream.problems == [], stream.raw
    assert slow_writer.streamed["draft"] >= 1 and slow_writer.streamed["refine"] >= 1
    kinds = [("final" if m["final_report"] is not None else
              "writing" if "(writing)" in m["intermediate_steps"].split(STEP_SEPARATOR)[-1] else "step")
             for m in stream.messages]
    drafting = [m["intermediate_steps"] for m in stream.messages
                if m["is_intermediate"] and m["intermediate_steps"].split(STEP_SEPARATOR)[-1].startswith("**Draft** (writing)")]
    growing = [steps.split(STEP_SEPARATOR)[-1] for steps in drafting]
    assert len(growing) >= 2, stream.raw
    texts = [step.split("\n\n", 1)[1].strip() for step in growing]
    # an idle stream repeats its last message as a heartbeat (a loaded machine can leave the writer quiet that
    # long): a repeat is not a step back, every new text extends the one before
    texts = [t for i, t in enumerate(texts) if i == 0 or t != texts[i - 1]]
    assert len(texts) >= 2 and all(len(b) > len(a) and b.startswith(a) for a, b in zip(texts, texts[1:], strict=False)), texts
    # every growing draft came before the answer, each in place of the one before (one step, not one per piece)
    assert kinds.index("writing") < kinds.index("final") and "writing" not in kinds[kinds.index("final"):]
    assert len({steps.count(STEP_SEPARATOR) for steps in drafting}) == 1
    # the finished stages replaced the growing steps: the thinking ends as it does without streaming
    last = stream.messages[-1]
    names = [s.split("**")[1] for s in last["intermediate_steps"].split(STEP_SEPARATOR)]
    assert names[-3:] == ["Draft", "Refined", "Citations checked"] and "(writing)" not in last["intermediate_steps"]
    assert last["complete"] is True and last["final_report"].strip()
    # the warehouse holds the whole draft, which the last growing text begins
    (draft,), = Warehouse(root).query("SELECT text FROM drafts WHERE question_id = ? AND stage = 'draft'",
                                      [stream.question_id]).rows
    assert draft.strip().startswith(texts[-1]) and len(texts[0]) < len(draft.strip())
