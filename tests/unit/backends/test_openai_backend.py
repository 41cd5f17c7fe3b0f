"""The OpenAI-compatible adapter through the openai client against the fake server."""

from __future__ import annotations

import re

import pytest

from hifirag_core.backends.factory import build_chat_model, build_filter_model
from hifirag_core.backends.openai_compat import OpenAIChatModel
from hifirag_core.config import ModelPrice, build_config
from hifirag_core.errors import MissingSecretError
from hifirag_core.llm.job import object_schema
from hifirag_core.types import ChatTurn
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.server import Fault

A1 = ("Create efficient and concise Google search queries for this question:\nHow do I use pip?\n"
      "Return a JSON list of strings containing the 1-2 best search queries.")


def config(fake: OpenAIFake, **models: object):
    return build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "openai"},
        "models": {"filter": "qwen3-8b", "writer": "qwen3-32b", "openai_base_url": fake.base_url + "/v1", **models},
        "limits": {"retries": 2},
    })


def model_for(fake: OpenAIFake, make_guards, role: str = "filter", **models: object) -> OpenAIChatModel:
    cfg = config(fake, **models)
    model = build_chat_model(role, cfg, guards=make_guards(cfg), env={"OPENAI_API_KEY": fake.api_key or ""})  # type: ignore[arg-type]
    assert isinstance(model, OpenAIChatModel)
    return model


def ask(model: OpenAIChatModel, schema: dict | None = None):
    return model.chat([ChatTurn("user", A1)], stage="query_plan", prompt_name="query_plan", prompt_hash="h",
                      response_schema=schema)


QUERIES = object_schema("queries", "string")


def test_ok_call_and_wire_format(openai_fake: OpenAIFake, make_guards) -> None:
    reply = ask(model_for(openai_fake, make_guards), schema=QUERIES)
    assert reply.call.status == "ok" and reply.text == '{"queries": ["pip"]}'
    body = openai_fake.bodies[-1]
    assert body["model"] == "qwen3-8b" and body["messages"] == [{"role": "user", "content": A1}]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "reply", "schema": QUERIES,
                                                                              "strict": True}}
    assert openai_fake.requests[-1].headers["authorization"] == f"Bearer {openai_fake.api_key}"
    assert reply.call.tokens_in and reply.call.tokens_out and reply.call.cost_usd is None  # no price for qwen


def test_conversation_roles_map_to_user_and_assistant(openai_fake: OpenAIFake, make_guards) -> None:
    model = model_for(openai_fake, make_guards, role="writer")
    model.chat([ChatTurn("user", "a"), ChatTurn("model", "b"), ChatTurn("user", "c")], stage="refine",
               prompt_name="refine", prompt_hash="h")
    body = openai_fake.bodies[-1]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"] and body["model"] == "qwen3-32b"
    assert "response_format" not in body


def test_think_tags_are_stripped_before_parsing() -> None:
    with OpenAIFake(think=True) as fake:
        cfg = config(fake)
        from hifirag_core.limits import RunGuards
        from tests.support.fakes.fixtures import RecordingSleep

        filt = build_filter_model(cfg, guards=RunGuards(cfg.limits, sleep=RecordingSleep()),
                                  env={"OPENAI_API_KEY": fake.api_key or ""})
        d = filt.plan_queries("How do I use pip?", max_queries=2)
    assert d.status == "ok" and all("think" not in q and "[9" not in q for q in d.value)


def test_think_block_never_reaches_the_reply_text() -> None:
    with OpenAIFake(think=True) as fake:
        model = build_chat_model("writer", config(fake), env={"OPENAI_API_KEY": fake.api_key or ""})
        reply = model.chat([ChatTurn("user", "You are a helpful and knowledgeable assistant. Answer...\n"
                                             "User question: What is pip?\n----------- Below ... may help you: (none)\n"
                                             "What is pip?")], stage="draft", prompt_name="draft", prompt_hash="h")
    assert reply.call.status == "ok" and reply.text
    assert "<think>" not in reply.text and "Let me check the sources" not in reply.text


def test_429_honours_retry_after(openai_fake: OpenAIFake, make_guards, sleeps) -> None:
    openai_fake.inject(OpenAIFake.rate_limit(retry_after_s=3))
    reply = ask(model_for(openai_fake, make_guards))
    assert reply.call.status == "ok" and reply.call.attempts == 2 and sleeps.calls == [3.0]


def test_500_then_persistent_failure(openai_fake: OpenAIFake, make_guards) -> None:
    fault = OpenAIFake.server_error()
    fault.times = 5
    openai_fake.inject(fault)
    reply = ask(model_for(openai_fake, make_guards))
    assert reply.text is None and reply.call.status == "failed" and reply.call.attempts == 3


def test_timeout(openai_fake: OpenAIFake, make_guards) -> None:
    openai_fake.inject(Fault("delay", seconds=5, times=3))
    cfg = config(openai_fake)
    cfg = cfg.model_copy(update={"limits": cfg.limits.model_copy(update={"llm_timeout_s": 0.3})})
    model = build_chat_model("filter", cfg, guards=make_guards(cfg), env={"OPENAI_API_KEY": openai_fake.api_key or ""})
    reply = ask(model)  # type: ignore[arg-type]
    assert reply.call.status == "timeout" and reply.call.attempts == 3


def test_content_filter_is_blocked(openai_fake: OpenAIFake, make_guards) -> None:
    openai_fake.inject(OpenAIFake.content_filtered())
    reply = ask(model_for(openai_fake, make_guards))
    assert reply.text is None and reply.call.status == "blocked"


def test_truncated_body_is_retried(openai_fake: OpenAIFake, make_guards) -> None:
    openai_fake.inject(Fault("truncate", keep=0.6))
    assert ask(model_for(openai_fake, make_guards)).call.attempts == 2


def test_per_role_base_url_and_optional_key() -> None:
    with OpenAIFake(api_key=None) as local_filter, OpenAIFake(api_key=None) as local_writer:
        cfg = build_config(overrides={
            "backends": {"filter_llm": "openai", "writer_llm": "openai"},
            "models": {"openai_filter_base_url": local_filter.base_url + "/v1",
                       "openai_writer_base_url": local_writer.base_url + "/v1", "openai_api_key_optional": True,
                       "openai_response_format": "none", "prices": {"gemini-2.5-flash": {"input": 0.3, "output": 2.5}}},
        })
        filt = build_chat_model("filter", cfg, env={})
        writer = build_chat_model("writer", cfg, env={})
        assert ask(filt).call.status == "ok" and ask(writer).call.status == "ok"  # type: ignore[arg-type]
        assert local_filter.count() == 1 and local_writer.count() == 1
        assert "response_format" not in local_filter.bodies[-1]
        # the JSON comes back in a fence when not constrained; the parser copes
        assert local_filter.requests[-1].headers["authorization"] == "Bearer not-needed"
    with pytest.raises(MissingSecretError, match="OPENAI_API_KEY"):
        build_chat_model("filter", build_config(overrides={"backends": {"filter_llm": "openai"}}), env={})


def test_reasoning_tokens_are_counted_as_thinking(openai_fake: OpenAIFake, make_guards) -> None:
    from types import SimpleNamespace

    model = model_for(openai_fake, make_guards)
    model.price = ModelPrice(input=1.0, output=2.0)
    record = SimpleNamespace(tokens_in=None, tokens_out=None, tokens_thinking=None, cost_usd=None)
    usage = SimpleNamespace(prompt_tokens=100, completion_tokens=50,
                            completion_tokens_details=SimpleNamespace(reasoning_tokens=30))
    model._record_usage(record, SimpleNamespace(usage=usage))
    assert (record.tokens_in, record.tokens_out, record.tokens_thinking) == (100, 20, 30)
    assert record.cost_usd == pytest.approx((100 * 1.0 + 50 * 2.0) / 1e6)


@pytest.mark.parametrize(("schema", "strict", "message"), [
    ({"type": "array", "items": {"type": "string"}}, False, "must be a JSON Schema of 'type: \"object\"'"),
    ({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}, True,
     "'additionalProperties' is required to be supplied and to be false"),
    ({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}, True,
     "'required' is required to be supplied"),
    ({"type": "object", "additionalProperties": False, "required": ["q"],
      "properties": {"q": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}},
     True, "In context=('properties', 'q', 'items')"),
])
def test_the_fake_rejects_what_hosted_structured_outputs_reject(openai_fake: OpenAIFake, schema, strict,
                                                                 message) -> None:
    import openai

    client = openai.OpenAI(api_key=openai_fake.api_key, base_url=openai_fake.base_url + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError, match=re.escape(message)):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": A1}], response_format={
            "type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": strict}})
    client.close()


def test_the_pipelines_schemas_pass_strict_mode_and_an_array_root_fails_as_a_permanent_error(
        openai_fake: OpenAIFake, make_guards) -> None:
    model = model_for(openai_fake, make_guards)
    for key, item in (("queries", "string"), ("urls", "string"), ("sections", "integer"), ("sources", "integer")):
        assert ask(model, schema=object_schema(key, item)).call.status == "ok"
    refused = ask(model, schema={"type": "array", "items": {"type": "string"}})
    assert refused.text is None and refused.call.status == "failed" and "HTTP 400" in refused.call.error
    assert refused.call.attempts == 1  # a refused schema is not retried


def test_llama_cpp_form_sends_the_schema_inside_json_object(openai_fake: OpenAIFake, make_guards) -> None:
    reply = ask(model_for(openai_fake, make_guards, openai_response_format="json_object_schema"), schema=QUERIES)
    assert openai_fake.bodies[-1]["response_format"] == {"type": "json_object", "schema": QUERIES}
    assert reply.text == '{"queries": ["pip"]}'
