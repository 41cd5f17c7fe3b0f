"""The whole pipeline on a model server not written here: llama.cpp (llama-cpp-python) with Gemma 3 270M.

Both model roles run on the server, through the real openai client, on the test site's three
questions. A recording proxy between the client and the server keeps the wire, so the test asserts
what was sent and what came back; the model is a 270M base model, so nothing here judges the
answers' quality. Marked ``llama_server`` (minutes on two cores): ``pytest -m "not llama_server"``
leaves it out of a quick run; CI runs it. Where llama-cpp-python cannot be imported it fails; it skips
only when ``HIFIRAG_SKIP_LOCAL_MODEL=1`` says so (tests/support/llama_server.py).
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from hifirag_core.llm.parsing import extract_json_list
from hifirag_core.pipeline.specs import BASE_STAGES, STAGE_NAMES
from hifirag_core.records import STAGE_STATUSES
from hifirag_core.store.warehouse import Warehouse
from tests.support.fakes.recording_proxy import RecordingProxy
from tests.support.llama_server import MODEL_ALIAS, pipeline_overrides

pytestmark = [pytest.mark.llama_server, pytest.mark.usefixtures("prefect_harness")]
FILTER_STAGES = ("query_plan", "url_filter", "section_rank", "citations")


def test_the_pipeline_on_a_local_llama_cpp_server(model_server, questions_file, data_root, run_flow):
    assert MODEL_ALIAS in httpx.get(f"{model_server}/models", timeout=10).text
    with RecordingProxy(model_server.removesuffix("/v1")) as proxy:
        overrides = pipeline_overrides(proxy.base_url + "/v1")
        first = run_flow(questions_file, overrides)
        exchanges = proxy.completions()
        again = run_flow(questions_file, overrides)
        # a second run of the finished run makes no model call at all
        assert len(proxy.completions()) == len(exchanges) and again["llm_calls_paid"] == 0
        assert again["stage_computations"] == 0
    w = Warehouse(data_root)
    run_id = first["run_id"]
    _print_run(w, run_id, first)

    # every stage of every question ends in a documented status
    statuses = w.query("SELECT question_id, stage, status FROM stage_runs WHERE run_id = ?", [run_id]).rows
    assert len(statuses) == 3 * len(BASE_STAGES)
    assert {s for _, _, s in statuses} <= set(STAGE_STATUSES), statuses

    # structured calls send an object-rooted schema in the server's form, and the format constrains the reply
    structured = [e for e in exchanges if e.request and "response_format" in e.request]
    assert structured and all(e.status == 200 for e in exchanges)
    finished = 0
    for e in structured:
        fmt = e.request["response_format"]
        assert fmt["type"] == "json_object" and fmt["schema"]["type"] == "object"
        (key,) = fmt["schema"]["required"]
        choice = e.reply["choices"][0]
        content = choice["message"]["content"]
        # the grammar forces the schema's shape from the first token, even on a reply cut at filter_max_tokens
        assert re.match(r'\s*\{\s*"' + key + r'"\s*:\s*\[', content), content
        if choice["finish_reason"] == "stop":  # "length": cut short, recorded as truncated
            reply = json.loads(content)
            assert isinstance(reply, dict) and isinstance(reply[key], list), reply
            assert extract_json_list(content, keys=(key,)) == reply[key]
            finished += 1
    assert finished >= 1, [e.reply["choices"][0]["finish_reason"] for e in structured]
    assert all("response_format" not in (e.request or {}) for e in exchanges if e not in structured)

    # token usage recorded in llm_calls, call for call, as the server reported it
    rows = w.query("SELECT stage, status, tokens_in, tokens_out, cache_hit FROM llm_calls WHERE run_id = ?",
                   [run_id]).rows
    assert len(rows) == len(exchanges) and first["llm_calls_paid"] == len(exchanges)
    assert sum(r[2] for r in rows) == sum(e.reply["usage"]["prompt_tokens"] for e in exchanges)
    assert sum(r[3] for r in rows) == sum(e.reply["usage"]["completion_tokens"] for e in exchanges)
    assert {r[0] for r in rows} >= {"query_plan", "url_filter", "draft"} and all(r[2] > 0 for r in rows)
    assert {r[1] for r in rows} <= {"ok", "truncated"}

    # answers are stored with the citation stage's per-sentence citations
    answered = [q for (q,) in w.query("SELECT question_id FROM answers WHERE run_id = ? AND status = 'ok'",
                                      [run_id]).rows]
    assert answered, "the server answered no question"
    sentences = w.query("SELECT question_id, count(*), bool_and(starts_with(method, 'llm')) FROM answer_sentences "
                        "WHERE run_id = ? GROUP BY question_id", [run_id]).rows
    assert {q for q, n, _ in sentences if n > 0} >= set(answered) and all(llm for _, _, llm in sentences)
    assert all(t for (t,) in w.query("SELECT cited_text FROM answers WHERE run_id = ? AND status = 'ok'",
                                     [run_id]).rows)


def _print_run(w: Warehouse, run_id: str, summary: dict) -> None:
    """What the run did per stage (visible with ``pytest -s``): calls, tokens sent and seconds per question."""
    rows = w.query(
        """SELECT r.stage, count(DISTINCT r.question_id), round(avg(r.compute_seconds), 1),
                  coalesce(sum(c.calls), 0), coalesce(sum(c.tokens_in), 0), coalesce(sum(c.tokens_out), 0)
           FROM stage_runs r LEFT JOIN (
               SELECT question_id, stage, count(*) AS calls, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out
               FROM llm_calls WHERE run_id = ? GROUP BY question_id, stage) c USING (question_id, stage)
           WHERE r.run_id = ? GROUP BY r.stage""", [run_id, run_id]).rows
    order = {s: i for i, s in enumerate(STAGE_NAMES)}
    print(f"\nrun {run_id}: {summary['n_answered']}/{summary['n_questions']} answered in {summary['wall_seconds']}s; "
          f"{summary['llm_calls_paid']} paid model calls")
    print(f"{'stage':<13}{'s/question':>11}{'calls':>7}{'tokens in':>11}{'tokens out':>11}")
    for stage, _, seconds, calls, tin, tout in sorted(rows, key=lambda r: order[r[0]]):
        print(f"{stage:<13}{seconds or 0:>11}{calls:>7}{tin:>11}{tout:>11}")
    for qid, text in w.query("SELECT question_id, cited_text FROM answers WHERE run_id = ? ORDER BY question_id",
                             [run_id]).rows:
        print(f"{qid}: {text}")


def test_looking_again_on_the_local_server(model_server, tmp_path, data_root, run_flow):
    """final_deep end to end on the same server: the cheap model checks the evidence (prompts/sufficiency.txt)
    and, when it says parts are missing, plans the follow-up searches (prompts/followup.txt). A 270M base
    model's verdicts are not judged; the wire is: every research stage ends in a documented status, its calls
    are recorded with their tokens, and a second run asks the model nothing."""
    from tests.flows.test_research import ONE_PAGE, TWO_PART

    questions = tmp_path / "two-part.jsonl"
    questions.write_text(json.dumps({"iid": "R1", "query": TWO_PART}) + "\n")
    overrides = [*pipeline_overrides(model_server), "limits.caps=on", *ONE_PAGE]
    first = run_flow(questions, overrides, variant="final_deep")
    again = run_flow(questions, overrides, variant="final_deep")
    assert again["llm_calls_paid"] == 0 and again["stage_computations"] == 0
    w = Warehouse(data_root)
    run_id = first["run_id"]
    statuses = w.query("SELECT stage, round, status FROM stage_runs WHERE run_id = ?", [run_id]).rows
    assert {s for _, _, s in statuses} <= set(STAGE_STATUSES), statuses
    checks = w.query("SELECT round, verdict, method FROM sufficiency_checks WHERE run_id = ? ORDER BY round",
                     [run_id]).rows
    assert checks and all(m.startswith("llm") for _, _, m in checks)
    calls = w.query("SELECT stage, tokens_in FROM llm_calls WHERE run_id = ? AND stage = 'sufficiency'",
                    [run_id]).rows
    assert calls and all(tokens and tokens > 0 for _, tokens in calls)
    print(f"\nfinal_deep on the local server: checks {checks}; rounds {first['follow_up_rounds']}")


def test_a_streamed_draft_from_the_local_server_is_its_whole_reply_with_usage_unknown(model_server):
    """llama-cpp-python streams ``chat.completion.chunk`` events but sends no usage in them: the streamed draft is
    the reply the server gives without streaming, grown piece by piece, and its tokens stay unknown."""
    from hifirag_core.backends.factory import build_guards, build_writer_model
    from hifirag_core.config import build_config
    from hifirag_core.llm.streaming import listening
    from hifirag_core.types import SourceDoc, SourceSection

    sources = [SourceDoc(1, "https://docs.python.org/3/library/venv.html", "venv", "", (SourceSection(
        "s1", ("venv",), "Virtual environments are created by executing the venv module: python -m venv DIR."),))]
    drafts = {}
    seen: list[str] = []
    for stream in (False, True):
        cfg = build_config(overrides={
            "backends": {"filter_llm": "openai", "writer_llm": "openai"},
            "models": {"writer": MODEL_ALIAS, "openai_base_url": model_server, "openai_api_key_optional": True,
                       "writer_max_tokens": 16, "temperature": 0},
            "limits": {"stream_writer": stream, "llm_timeout_s": 900, "retries": 0}})
        writer = build_writer_model(cfg, guards=build_guards(cfg), env={})
        with listening(lambda _stage, text: seen.append(text)):
            drafts[stream] = writer.draft("How do I create a Python virtual environment?", sources, max_words=100)
    plain, streamed = drafts[False], drafts[True]
    assert streamed.status == plain.status and streamed.value.last_reply == plain.value.last_reply
    assert plain.calls[0].tokens_in and streamed.calls[0].tokens_in is None and streamed.calls[0].tokens_out is None
    assert len(seen) > 1 and seen[-1] == streamed.value.last_reply
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False))
