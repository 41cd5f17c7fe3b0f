"""A page of 300 sections ranked on a real llama.cpp server (llama-cpp-python, Gemma 3 270M, an 8,192-token window).

With the user guide's recipe (``models.context_tokens`` the server's ``--n_ctx``, 256 reply tokens kept) the
section list does not fit one prompt: it is ranked in several calls, each of which the server accepts, and the
rankings are merged. Declared larger than the server's window, the first call is refused with the server's own
HTTP 400 (``context_length_exceeded``), and the one retry, split by the server's own count, is accepted. A
recording proxy keeps the wire: what was sent, the server's token counts, its status codes. The model is a 270M
base model, so which sections it keeps is not judged. Marked ``llama_server`` (minutes on two cores).
"""

from __future__ import annotations

import pytest

from hifirag_core.backends.factory import build_filter_model
from hifirag_core.config import build_config
from hifirag_core.sectioning import parse_sections
from hifirag_core.types import PageOverview, SectionPreview
from tests.support.fakes.recording_proxy import RecordingProxy
from tests.support.llama_server import MODEL_ALIAS, N_CTX

pytestmark = [pytest.mark.llama_server]
REPLY_TOKENS = 256
QUESTION = "How do I set the connection pool timeout?"
URL = "https://docs.example.org/reference/client-options"


def long_page(n: int = 300) -> bytes:
    """A reference page of ``n`` sections; every tenth is about the pool timeout."""
    parts = ["<html><head><title>Client options</title></head><body><h1>Client options</h1>"]
    for i in range(n):
        topic = "pool timeout" if i % 10 == 4 else f"option {i}"
        parts.append(f"<h2>{topic.capitalize()} ({i})</h2><p>The {topic} setting controls how the client behaves "
                     f"when it meets case {i}. Its default suits most deployments; raise it for slow networks, "
                     f"lower it to fail fast. Values are read from the configuration file at start-up.</p>")
    parts.append("</body></html>")
    return "".join(parts).encode()


def previews() -> list[SectionPreview]:
    sections = parse_sections(long_page(), URL).sections
    assert len(sections) >= 300
    return [SectionPreview(s.section_id, s.heading, f"{' > '.join(s.heading_path)}: {s.text[:200]}") for s in sections]


def ranked(base_url: str, declared: int):
    cfg = build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "openai"},
        "models": {"filter": MODEL_ALIAS, "writer": MODEL_ALIAS, "openai_base_url": base_url,
                   "openai_api_key_optional": True, "openai_response_format": "json_object_schema",
                   "context_tokens": {MODEL_ALIAS: declared}, "filter_max_tokens": REPLY_TOKENS,
                   "temperature": 0},
        "limits": {"concurrency": 1, "llm_timeout_s": 900, "retries": 0}})
    model = build_filter_model(cfg, env={})
    secs = previews()
    decision = model.rank_sections(QUESTION, PageOverview(URL, "Client options", "Every client option."), secs,
                                   max_sections=len(secs))
    return secs, decision


def report(title: str, exchanges, decision, n: int) -> None:
    print(f"\n{title}: {len(exchanges)} calls, method {decision.method}, status {decision.status}")
    for k, e in enumerate(exchanges, 1):
        usage = (e.reply or {}).get("usage") or {}
        error = ((e.reply or {}).get("error") or {}).get("message", "")
        shown = sum(1 for line in e.request["messages"][-1]["content"].splitlines() if "] Client options > " in line)
        print(f"  call {k}: HTTP {e.status}, sections shown {shown}, tokens in {usage.get('prompt_tokens', '-')}, "
              f"out {usage.get('completion_tokens', '-')} {error[:120]}")
    print(f"  sections kept: {len(decision.value)} of {n}: {sorted(decision.value)[:20]}...")


def test_a_300_section_page_is_ranked_in_calls_the_server_accepts(model_server):
    with RecordingProxy(model_server.removesuffix("/v1")) as proxy:
        secs, decision = ranked(proxy.base_url + "/v1", N_CTX)
        exchanges = proxy.completions()
    report("declared window = the server's", exchanges, decision, len(secs))
    assert len(exchanges) >= 2 and all(e.status == 200 for e in exchanges)
    # a 270M base model's list may be cut at the reply ceiling or unusable: that call's batch then takes the
    # fallback, and the method says so; the wire is what is judged
    assert decision.method.startswith(f"llm:split={len(exchanges)}") and len(decision.calls) == len(exchanges)
    assert {c.status for c in decision.calls} <= {"ok", "truncated"}
    # the server's own count: every prompt left the reply its tokens
    assert all(e.reply["usage"]["prompt_tokens"] + REPLY_TOKENS <= N_CTX for e in exchanges)
    # every section shown once, each call numbering from [0]
    shown = [line for e in exchanges for line in e.request["messages"][-1]["content"].splitlines()
             if "] Client options > " in line]
    assert len(shown) == len(secs)
    assert decision.value and len(set(decision.value)) == len(decision.value)
    assert all(0 <= i < len(secs) for i in decision.value)


def test_a_window_declared_too_large_is_refused_once_then_split(model_server):
    with RecordingProxy(model_server.removesuffix("/v1")) as proxy:
        secs, decision = ranked(proxy.base_url + "/v1", 4 * N_CTX)
        exchanges = proxy.completions()
    report("declared window 4x the server's", exchanges, decision, len(secs))
    first, *rest = exchanges
    assert first.status == 400 and first.reply["error"]["code"] == "context_length_exceeded"
    assert decision.calls[0].status == "context_length_exceeded"
    assert rest and all(e.status == 200 for e in rest), [e.status for e in rest]
    assert all(e.reply["usage"]["prompt_tokens"] < N_CTX for e in rest)
    assert decision.method.startswith(f"llm:split={len(rest)}") and decision.value
    assert {c.status for c in decision.calls[1:]} <= {"ok", "truncated"}
