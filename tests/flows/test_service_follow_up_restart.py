"""A thread survives a restart of `hifirag serve`, and a request without ``follows`` meets the MMU-RAGent contract as
before: the real service in its own process on 127.0.0.1 (the Prefect answerer, every stage a cached task), driven by
httpx as the organisers' tester drives it.

Turn 1 is asked of one service process, which is then stopped; a new process on the same data root answers turn 2,
which names turn 1's answer: the thread is read back from the warehouse, not from the memory of the process that
answered it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from hifirag_core.serving.contract import CORE_FIELDS, STEP_SEPARATOR, check_messages, parse_sse
from hifirag_core.store.warehouse import Warehouse
from tests.support.prefect_server import prefect_server
from tests.support.service_process import hifirag_service
from tests.support.sitegen import BASE_URL, write_examples

pytestmark = pytest.mark.slow

FIRST = "How do I install Tidewater?"
SECOND = "And how do I check that it worked?"


def _run(base: str, body: dict) -> tuple[httpx.Headers, list[dict]]:
    with httpx.Client(timeout=300) as client, client.stream("POST", f"{base}/run", json=body) as response:
        assert response.status_code == 200, response.read()
        lines = list(response.iter_lines())
        headers = response.headers
    parsed = parse_sse(lines)
    assert parsed.problems + check_messages(parsed.messages) == []
    return headers, parsed.messages


def test_a_thread_survives_a_restart_and_a_plain_request_is_answered_as_the_contract_says(tmp_path, site_dir):
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    root = tmp_path / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    args = ("--set", f"generation.examples={write_examples(tmp_path / 'examples.jsonl')}")
    with prefect_server(tmp_path / "prefect-home") as api:
        env = {"PREFECT_API_URL": api}
        with hifirag_service(root, *args, env=env, log_path=tmp_path / "first.log") as url:
            headers, messages = _run(url, {"question": FIRST})
            # the contract's own fields and nothing of a thread: the four core fields in every message, the
            # citations on the last, the same phases as ever
            assert all(set(m) <= {*CORE_FIELDS, "citations"} and set(CORE_FIELDS) <= set(m) for m in messages)
            assert set(messages[-1]) == {*CORE_FIELDS, "citations"} and messages[-1]["complete"]
            assert "Follow-up" not in messages[-1]["intermediate_steps"]
            reply = httpx.post(f"{url}/evaluate", json={"query": FIRST, "iid": "V1"}, timeout=300)
            assert reply.status_code == 200 and set(reply.json()) == {"query_id", "generated_response"}
            first = unquote(headers["x-hifirag-answer-id"])
        assert not _turns(root)  # no follows, no thread

        with hifirag_service(root, *args, env=env, log_path=tmp_path / "second.log") as url:
            headers, messages = _run(url, {"question": SECOND, "follows": first})
            second = unquote(headers["x-hifirag-answer-id"])
            steps = messages[-1]["intermediate_steps"].split(STEP_SEPARATOR)
            assert steps[1].startswith("**Follow-up**, read as: And how do I check that it worked? (install "
                                       "Tidewater)"), steps[1]
            assert messages[-1]["final_report"] and messages[-1]["citations"]
            assert set(messages[-1]) == {*CORE_FIELDS, "citations"}  # a follow-up's stream is the contract's too
            unknown = httpx.post(f"{url}/run", json={"question": SECOND, "follows": first + "-gone"}, timeout=60)
            assert unknown.status_code == 422 and "no answer" in unknown.json()["error"]
    turns = _turns(root)
    assert [(t["turn"], t["answer_id"], t["follows"]) for t in turns] == [(1, first, None), (2, second, first)]
    assert turns[1]["earlier_sections"] >= 1


def _turns(root: Path) -> list[dict]:
    result = Warehouse(root).query("SELECT turn, answer_id, follows, earlier_sections FROM thread_turns ORDER BY turn")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]
