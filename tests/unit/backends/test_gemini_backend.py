"""The Gemini adapter through google-genai against the fake Gemini API: wire format and faults."""

from __future__ import annotations

import pytest

from hifirag_core.backends.factory import build_chat_model, build_filter_model, build_writer_model
from hifirag_core.backends.gemini import GeminiChatModel
from hifirag_core.config import build_config
from hifirag_core.limits import Budget, RunGuards
from hifirag_core.llm.job import object_schema
from hifirag_core.types import ChatTurn
from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.server import Fault

Q = "How do I create a Python virtual environment?"


def config(fake: GeminiFake, **limits: object):
    return build_config(overrides={"backends": {"filter_llm": "gemini", "writer_llm": "gemini"},
                                   "models": {"gemini_base_url": fake.base_url},
                                   "limits": {"retries": 2, **limits}})


def env(fake: GeminiFake) -> dict[str, str]:
    return {"GEMINI_API_KEY": fake.api_key}


def chat_model(fake: GeminiFake, make_guards, role: str = "filter", **limits: object) -> GeminiChatModel:
    cfg = config(fake, **limits)
    model = build_chat_model(role, cfg, guards=make_guards(cfg), env=env(fake))  # type: ignore[arg-type]
    assert isinstance(model, GeminiChatModel)
    return model


def ask(model: GeminiChatModel, text: str = "Create efficient and concise Google search queries for this question:\n"
        f"{Q}\nReturn a JSON list of strings containing the 1-2 best search queries.", schema: dict | None = None):
    return model.chat([ChatTurn("user", text)], stage="query_plan", prompt_name="query_plan", prompt_hash="h123",
                      response_schema=schema)


def test_ok_call_is_recorded_with_tokens_thinking_cost_and_latency(gemini_fake: GeminiFake, make_guards) -> None:
    model = chat_model(gemini_fake, make_guards, role="writer")
    reply = ask(model, schema=object_schema("queries", "string"))
    call = reply.call
    assert reply.text is not None and reply.text.startswith('{"queries": [')
    assert (call.status, call.backend, call.model, call.role) == ("ok", "gemini", "gemini-2.5-pro", "writer")
    assert (call.prompt_name, call.prompt_hash, call.stage, call.attempts) == ("query_plan", "h123", "query_plan", 1)
    assert call.tokens_in and call.tokens_out and call.tokens_thinking == 40
    # 2.5 Pro: $1.25 in, $10 out per million; thinking billed as output
    expected = (call.tokens_in * 1.25 + (call.tokens_out + 40) * 10.0) / 1e6
    assert call.cost_usd == pytest.approx(expected)
    assert call.latency_s is not None and call.latency_s >= 0 and call.call_id and call.question_id == ""


def test_request_wire_format(gemini_fake: GeminiFake, make_guards) -> None:
    model = chat_model(gemini_fake, make_guards)
    turns = [ChatTurn("user", "first"), ChatTurn("model", "reply"), ChatTurn("user", "second")]
    model.chat(turns, stage="refine", prompt_name="refine", prompt_hash="h",
               response_schema=object_schema("sections", "integer"))
    request = gemini_fake.requests[-1]
    assert request.path == "/v1/models/gemini-2.5-flash:generateContent" or request.path.startswith("/v1beta/")
    assert request.headers["x-goog-api-key"] == gemini_fake.api_key
    assert "key=" not in request.path
    body = request.json()
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"] == [{"text": "reply"}]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    # an object at the root, without additionalProperties (the Developer API's Schema has no such field)
    assert body["generationConfig"]["responseSchema"] == {
        "type": "OBJECT", "properties": {"sections": {"type": "ARRAY", "items": {"type": "INTEGER"}}},
        "required": ["sections"]}


def test_the_fake_rejects_what_the_api_rejects_in_a_response_schema(gemini_fake: GeminiFake, make_guards) -> None:
    import httpx

    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"responseMimeType": "application/json",
                                 "responseSchema": {"type": "OBJECT", "additionalProperties": False,
                                                    "properties": {"q": {"type": "ARRAY", "items": {"type": "STRING"}}}}}}
    url = f"{gemini_fake.base_url}/v1beta/models/gemini-2.5-flash:generateContent"
    refused = httpx.post(url, json=body, headers={"x-goog-api-key": gemini_fake.api_key})
    assert refused.status_code == 400 and refused.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert 'Unknown name "additionalProperties"' in refused.json()["error"]["message"]
    body["generationConfig"]["responseSchema"]["properties"]["q"]["items"] = {"type": "TEXT"}
    del body["generationConfig"]["responseSchema"]["additionalProperties"]
    assert httpx.post(url, json=body, headers={"x-goog-api-key": gemini_fake.api_key}).status_code == 400
    # the adapter drops additionalProperties, so the pipeline's strict-mode schemas pass
    reply = ask(chat_model(gemini_fake, make_guards), schema={"type": "object", "additionalProperties": False,
                                                              "properties": {"q": {"type": "string"}}})
    assert reply.call.status == "ok"


def test_429_with_retry_after_is_retried_after_that_delay(gemini_fake: GeminiFake, make_guards, sleeps) -> None:
    gemini_fake.inject(GeminiFake.quota_exceeded(retry_after_s=7))
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.call.status == "ok" and reply.call.attempts == 2 and sleeps.calls == [7.0]
    assert gemini_fake.count() == 2


def test_429_retry_info_without_header_sets_the_delay(gemini_fake: GeminiFake, make_guards, sleeps) -> None:
    gemini_fake.inject(GeminiFake.quota_exceeded(retry_after_s=12, header=False))
    assert ask(chat_model(gemini_fake, make_guards)).call.status == "ok"
    assert sleeps.calls == [12.0]


def test_500_is_retried_with_backoff(gemini_fake: GeminiFake, make_guards, sleeps) -> None:
    fault = GeminiFake.server_error(503)
    fault.times = 2
    gemini_fake.inject(fault)
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.text and reply.call.attempts == 3 and len(sleeps.calls) == 2
    assert 0.5 <= sleeps.calls[0] <= 1.0 and 1.0 <= sleeps.calls[1] <= 2.0


def test_persistent_500_ends_as_failed_after_every_retry(gemini_fake: GeminiFake, make_guards) -> None:
    fault = GeminiFake.server_error(500)
    fault.times = 10
    gemini_fake.inject(fault)
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.text is None and reply.call.status == "failed" and reply.call.attempts == 3
    assert "HTTP 500" in reply.call.error and "INTERNAL" in reply.call.error
    assert gemini_fake.count() == 3


def test_persistent_429_ends_as_rate_limited(gemini_fake: GeminiFake, make_guards) -> None:
    fault = GeminiFake.quota_exceeded()
    fault.times = 10
    gemini_fake.inject(fault)
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.call.status == "rate_limited" and reply.call.attempts == 3


def test_400_is_not_retried(gemini_fake: GeminiFake, make_guards, sleeps) -> None:
    gemini_fake.inject(GeminiFake.bad_request())
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.call.status == "failed" and reply.call.attempts == 1 and sleeps.calls == []
    assert "HTTP 400" in reply.call.error and gemini_fake.count() == 1


def test_wrong_key_is_a_permanent_error_that_never_shows_the_key(gemini_fake: GeminiFake, make_guards) -> None:
    cfg = config(gemini_fake)
    model = build_chat_model("filter", cfg, guards=make_guards(cfg), env={"GEMINI_API_KEY": "wrong-key-0123456789"})
    reply = ask(model)  # type: ignore[arg-type]
    assert reply.call.status == "failed" and reply.call.attempts == 1
    assert "API key not valid" in reply.call.error and "wrong-key-0123456789" not in reply.call.error


def test_timeout_is_retried_then_recorded(gemini_fake: GeminiFake, make_guards) -> None:
    gemini_fake.inject(Fault("delay", seconds=5.0))
    model = chat_model(gemini_fake, make_guards, llm_timeout_s=0.3)
    reply = ask(model)
    assert reply.call.status == "ok" and reply.call.attempts == 2

    gemini_fake.inject(Fault("delay", seconds=5.0, times=3))
    reply = ask(model)
    assert reply.text is None and reply.call.status == "timeout" and reply.call.attempts == 3


def test_truncated_json_body_is_retried(gemini_fake: GeminiFake, make_guards, sleeps) -> None:
    gemini_fake.inject(Fault("truncate", keep=0.5))
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.call.status == "ok" and reply.call.attempts == 2 and len(sleeps.calls) == 1


def test_dropped_connection_is_retried(gemini_fake: GeminiFake, make_guards) -> None:
    gemini_fake.inject(Fault("drop"))
    assert ask(chat_model(gemini_fake, make_guards)).call.attempts == 2


@pytest.mark.parametrize(("fault", "status", "error"), [
    (GeminiFake.blocked_prompt(), "blocked", "prompt blocked: SAFETY"),
    (GeminiFake.safety_stop(), "blocked", "finishReason SAFETY"),
    (GeminiFake.empty_candidates(), "empty", "no candidates"),
])
def test_blocked_and_empty_replies(gemini_fake: GeminiFake, make_guards, fault: Fault, status: str, error: str) -> None:
    gemini_fake.inject(fault)
    reply = ask(chat_model(gemini_fake, make_guards))
    assert reply.text is None and reply.call.status == status and error in reply.call.error
    assert reply.call.attempts == 1  # a verdict, not an outage: never retried


def test_blocked_reply_becomes_a_decision_with_its_status_and_the_fallback(gemini_fake: GeminiFake, make_guards) -> None:
    cfg = config(gemini_fake)
    filt = build_filter_model(cfg, guards=make_guards(cfg), env=env(gemini_fake))
    gemini_fake.inject(GeminiFake.blocked_prompt())
    d = filt.plan_queries(Q, max_queries=2)
    assert d.status == "blocked" and d.value == [Q] and d.calls[0].status == "blocked"


def test_unparseable_reply_is_a_parse_error_with_the_configured_fallback(gemini_fake: GeminiFake, make_guards) -> None:
    cfg = config(gemini_fake)
    filt = build_filter_model(cfg, guards=make_guards(cfg), env=env(gemini_fake))
    gemini_fake.inject(GeminiFake.text_reply("Sections two and three."))
    from hifirag_core.types import PageOverview, SectionPreview

    d = filt.rank_sections(Q, PageOverview("https://a.example/", "A", "s"),
                           [SectionPreview(f"s{i}", f"H{i}", f"H{i}: text") for i in range(6)], max_sections=3)
    assert d.status == "parse_error" and d.value == [0, 1, 2] and d.method == "llm+fallback:top_k(input order)"
    assert d.calls[0].status == "ok"  # the call itself succeeded; the decision says the reply was unusable


def test_spent_budget_means_no_request(gemini_fake: GeminiFake) -> None:
    cfg = config(gemini_fake)
    budget = Budget(usd=0.0)
    model = build_chat_model("filter", cfg, guards=RunGuards(cfg.limits, budget=budget), env=env(gemini_fake))
    reply = ask(model)  # type: ignore[arg-type]
    assert reply.call.status == "budget_exceeded" and gemini_fake.count() == 0


def test_budget_is_charged_per_call(gemini_fake: GeminiFake, make_guards) -> None:
    cfg = config(gemini_fake, budget_usd=1.0)
    guards = make_guards(cfg)
    model = build_chat_model("filter", cfg, guards=guards, env=env(gemini_fake))
    first = ask(model).call  # type: ignore[arg-type]
    second = ask(model).call  # type: ignore[arg-type]
    assert guards.budget.spent_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert guards.budget.spent_tokens == sum(c.tokens_in + c.tokens_out + c.tokens_thinking for c in (first, second))


def test_two_pass_generation_is_one_conversation_on_the_wire(gemini_fake: GeminiFake, make_guards) -> None:
    cfg = config(gemini_fake)
    writer = build_writer_model(cfg, guards=make_guards(cfg), env=env(gemini_fake))
    from hifirag_core.types import FewShotExample, SourceDoc, SourceSection

    sources = [SourceDoc(1, "https://docs.python.org/3/library/venv.html", "venv", "",
                         (SourceSection("s", ("venv",), "Virtual environments are created by executing the venv "
                                                         "module: python -m venv /path/to/env."),))]
    draft = writer.draft(Q, sources, max_words=120)
    refined = writer.refine(Q, draft.value, [FewShotExample("What is pip?", "pip installs Python packages.")])
    assert draft.status == refined.status == "ok"
    first, second = gemini_fake.bodies[-2:]
    assert len(first["contents"]) == 1 and len(second["contents"]) == 3
    assert second["contents"][:2] == [first["contents"][0],
                                      {"role": "model", "parts": [{"text": draft.value.last_reply}]}]
    assert "generationConfig" not in first or "responseSchema" not in first.get("generationConfig", {})
    assert gemini_fake.models["gemini-2.5-pro"] == 2 and gemini_fake.kinds["draft"] == gemini_fake.kinds["refine"] == 1
