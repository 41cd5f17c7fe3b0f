"""Every prompt that carries page text fits the model's window, with the reply's tokens kept.

Through the real clients (openai, google-genai) against the fakes, whose windows refuse a longer prompt with
each provider's own error body: a page whose section list does not fit is ranked in several calls and the
rankings merged; a refusal is retried once with a smaller split, and what a second refusal leaves is recorded,
never dropped; the writer's and the checks' prompts are trimmed with a note; a page that fits is one call,
exactly as before.
"""

from __future__ import annotations

import json
import re

import pytest

from hifirag_core.backends.factory import (
    build_chat_model,
    build_filter_model,
    build_writer_model,
    prompt_window,
)
from hifirag_core.config import build_config
from hifirag_core.llm.filter_model import LLMFilterModel
from hifirag_core.llm.window import PromptWindow, estimate_tokens
from hifirag_core.types import ChatTurn, PageOverview, SectionPreview, SourceDoc, SourceSection, UrlCandidate
from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.openai_server import OVERFLOW_FLAVORS, OpenAIFake

QUESTION = "How do I configure the connection pool timeout?"
PAGE = PageOverview("https://docs.example.org/pool", "Connection pools", "Configure pools and their timeouts.")


def sections(n: int) -> list[SectionPreview]:
    """``n`` sections of a long reference page; every seventh is about the pool timeout."""
    out = []
    for i in range(n):
        topic = "connection pool timeout settings" if i % 7 == 3 else f"option group {i} of the client"
        text = (f"Section {i} > {topic}: this part describes {topic} in detail, with the defaults, the units "
                f"and an example of each value in a configuration file for the service.")
        out.append(SectionPreview(f"s{i}", f"Section {i}", text))
    return out


def config(fake: OpenAIFake, window: int, **models: object):
    return build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "openai"},
        "models": {"filter": "local", "writer": "local", "openai_base_url": fake.base_url + "/v1",
                   "openai_api_key_optional": True, "context_tokens": {"local": window},
                   "filter_max_tokens": 256, "writer_max_tokens": 256, **models},
        "limits": {"retries": 0},
    })


def filter_model(fake: OpenAIFake, make_guards, window: int) -> LLMFilterModel:
    cfg = config(fake, window)
    return build_filter_model(cfg, guards=make_guards(cfg), env={})


def prompts_sent(fake: OpenAIFake) -> list[str]:
    return [b["messages"][-1]["content"] for b in fake.bodies]


# --- counting -----------------------------------------------------------------------------------


def test_the_estimate_counts_digits_marks_and_letters() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("the") == 1 and estimate_tokens("documentation") == 4  # ceil(13 / 4)
    assert estimate_tokens("[123] a.b") == 8  # [ 1 2 3 ] a . b
    assert estimate_tokens("a 1 b") == 4  # a, the space before 1, 1, b
    assert estimate_tokens("日本語") == 3 and estimate_tokens("a\nb") == 3
    window = PromptWindow(1000, 256)
    assert window.prompt_tokens == 744 and window.fits("x " * 700) and not window.fits("x " * 729)


# --- each provider's refusal, through its real client --------------------------------------------


@pytest.mark.parametrize("flavor", OVERFLOW_FLAVORS, ids=lambda f: f.replace("_", "-"))
def test_each_openai_compatible_refusal_is_recognised(flavor: str, make_guards) -> None:
    with OpenAIFake(api_key=None) as fake:
        fake.inject(OpenAIFake.context_length_exceeded(flavor, prompt_tokens=8220, max_tokens=256, window=8192))
        cfg = config(fake, 8192)
        model = build_chat_model("filter", cfg, guards=make_guards(cfg), env={})
        reply = model.chat([ChatTurn("user", "hello")], stage="section_rank", prompt_name="section_rank",
                           prompt_hash="h")
    assert reply.text is None and reply.call.status == "context_length_exceeded", reply.call.error
    assert reply.call.attempts == 1  # a refusal for length is not retried as it was
    tokens, limit = reply.overflow or (None, None)
    assert limit == 8192 and tokens in (8220, 8476), (flavor, reply.overflow)


def test_gemini_refusal_is_recognised(gemini_fake: GeminiFake, make_guards) -> None:
    gemini_fake.inject(GeminiFake.input_too_long(1_200_293, 1_048_576))
    cfg = build_config(overrides={"backends": {"filter_llm": "gemini"},
                                  "models": {"gemini_base_url": gemini_fake.base_url}, "limits": {"retries": 0}})
    model = build_chat_model("filter", cfg, guards=make_guards(cfg), env={"GEMINI_API_KEY": gemini_fake.api_key})
    reply = model.chat([ChatTurn("user", "hello")], stage="draft", prompt_name="draft", prompt_hash="h")
    assert reply.call.status == "context_length_exceeded" and reply.overflow == (1_200_293, 1_048_576)
    assert "exceeds the maximum number of tokens allowed" in (reply.call.error or "")


# --- section ranking ----------------------------------------------------------------------------


def test_a_page_that_fits_is_one_call_exactly_as_before(make_guards) -> None:
    """Cache identity: the window changes neither the job's identity nor the one request of a normal page."""
    secs = sections(12)
    with OpenAIFake(api_key=None) as fake:
        windowed = filter_model(fake, make_guards, 8192)
        unbounded = LLMFilterModel(windowed.chat, windowed.prompts, section_fallback="top_k", url_fallback_k=6,
                                   section_fallback_k=4)
        assert windowed.window == PromptWindow(8192, 256)
        assert windowed.job_identity("section_rank") == unbounded.job_identity("section_rank")
        assert windowed.identity == unbounded.identity
        a = windowed.rank_sections(QUESTION, PAGE, secs, max_sections=12)
        b = unbounded.rank_sections(QUESTION, PAGE, secs, max_sections=12)
        assert fake.bodies[0] == fake.bodies[1] and len(fake.bodies) == 2
    assert a.value == b.value and a.value and a.method == b.method == "llm" and a.status == "ok"
    assert a.error is None and a.scores is None and len(a.calls) == 1


def test_a_long_page_is_ranked_in_batches_that_fit(make_guards) -> None:
    secs = sections(300)
    with OpenAIFake(api_key=None, context_tokens=4096, overflow_flavor="llama_cpp_python") as fake:
        model = filter_model(fake, make_guards, 4096)
        whole = model.prompts["section_rank"].render(question=QUESTION, page_overview="x", section_previews="")
        assert not model.window.fits(whole + "\n".join(s.preview for s in secs))
        decision = model.rank_sections(QUESTION, PAGE, secs, max_sections=300)
        sent = prompts_sent(fake)
    assert fake.refused == [] and len(sent) >= 3 and decision.status == "ok"
    assert decision.method == f"llm:split={len(sent)}" and len(decision.calls) == len(sent)
    assert all(model.window.fits(p) for p in sent)
    # every section was shown once, in page order, numbered from [0] in each call
    shown = [previews(p) for p in sent]
    assert [text for batch in shown for _, text in batch] == [s.preview for s in secs]
    assert all([i for i, _ in batch] == list(range(len(batch))) for batch in shown)
    # merged rank by rank: each batch's first choice, then each batch's second ...
    firsts = [json.loads(c["choices"][0]["message"]["content"])["sections"][0] for c in fake_replies(fake)]
    offsets = [0]
    for batch in shown[:-1]:
        offsets.append(offsets[-1] + len(batch))
    assert decision.value[: len(sent)] == [o + f for o, f in zip(offsets, firsts, strict=True)]
    kept = set(decision.value)
    assert all(i % 7 == 3 for i in kept) and len(kept) >= 30  # the timeout sections, from every part of the page


def previews(prompt: str) -> list[tuple[int, str]]:
    """The numbered section previews of a section-ranking prompt."""
    return [(int(i), text) for i, text in re.findall(r"\[(\d+)\] (.*)$", prompt, re.MULTILINE)]


def fake_replies(fake: OpenAIFake) -> list[dict]:
    """The fake's replies, in order: it answers each prompt deterministically, so ask it again without a window."""
    out = []
    with OpenAIFake(api_key=None) as again:
        import httpx

        for body in fake.bodies:
            out.append(httpx.post(again.base_url + "/v1/chat/completions", json=body, timeout=10).json())
    return out


def test_a_refusal_is_retried_once_with_a_smaller_split(make_guards) -> None:
    """The user declared a larger window than the server has: the first call is refused, the retry halves it."""
    secs = sections(60)
    with OpenAIFake(api_key=None, context_tokens=2000, overflow_flavor="llama_server") as fake:
        model = filter_model(fake, make_guards, 8192)
        decision = model.rank_sections(QUESTION, PAGE, secs, max_sections=60)
    assert len(fake.refused) == 1 and decision.status == "ok", decision.error
    assert decision.method.startswith("llm:split=") and int(decision.method.split("=")[1]) >= 2
    statuses = [c.status for c in decision.calls]
    assert statuses[0] == "context_length_exceeded" and set(statuses[1:]) == {"ok"}
    assert {i for i in decision.value} and all(i % 7 == 3 for i in decision.value)


def test_a_second_refusal_takes_the_fallback_and_says_so(make_guards) -> None:
    secs = sections(60)
    with OpenAIFake(api_key=None, context_tokens=300, overflow_flavor="openai") as fake:
        model = filter_model(fake, make_guards, 8192)
        decision = model.rank_sections(QUESTION, PAGE, secs, max_sections=60)
    assert decision.status == "context_length_exceeded" and "fell back" in (decision.error or "")
    assert "fallback:top_k" in decision.method and decision.value  # sections kept, by the fallback
    # one refused call, then one retry per part (each refused again): nothing more, nothing silent
    assert all(c.status == "context_length_exceeded" for c in decision.calls)
    assert len(decision.calls) == len(fake.refused) >= 3


def test_the_url_filter_splits_too(make_guards) -> None:
    candidates = [UrlCandidate(f"https://site{i}.example/pool", f"Pool timeout guide {i}",
                               "How to set the connection pool timeout. " * 6) for i in range(60)]
    with OpenAIFake(api_key=None, context_tokens=1500, overflow_flavor="vllm") as fake:
        model = filter_model(fake, make_guards, 1500)
        decision = model.select_urls(QUESTION, candidates, max_urls=6)
    assert fake.refused == [] and decision.status == "ok" and decision.method.startswith("llm:split=")
    assert len(decision.value) == 6 and all(model.window.fits(p) for p in prompts_sent(fake))


# --- the prompts that are trimmed ----------------------------------------------------------------


def long_sources(n_pages: int, n_sections: int) -> list[SourceDoc]:
    text = "The pool timeout is set in seconds with pool_timeout; the default is 30. " * 20
    return [SourceDoc(p + 1, f"https://docs{p}.example/pool", f"Pool {p}", "pools",
                      tuple(SourceSection(f"p{p}s{s}", (f"Pool {p}", f"Part {s}"), text) for s in range(n_sections)))
            for p in range(n_pages)]


def test_the_draft_and_the_citation_check_are_trimmed_with_a_note(make_guards) -> None:
    sources = long_sources(4, 5)
    with OpenAIFake(api_key=None, context_tokens=5000, overflow_flavor="llama_cpp_python") as fake:
        cfg = config(fake, 5000)
        writer = build_writer_model(cfg, guards=make_guards(cfg), env={})
        draft = writer.draft(QUESTION, sources, max_words=120)
        checker = filter_model(fake, make_guards, 5000)
        answer = "The pool timeout is set with pool_timeout [1]. Its default is 30 seconds [2]."
        cited = checker.verify_citations(QUESTION, answer, sources)
        sent = prompts_sent(fake)
    assert fake.refused == [] and draft.status == "ok" and draft.method == "llm+trimmed"
    assert "sections left out to fit the window" in (draft.error or "") and "5,000" in (draft.error or "")
    assert cited.status == "ok" and cited.method == "llm+trimmed" and "left out" in (cited.error or "")
    assert all(writer.window.fits(p) for p in sent)
    # the best-placed sections stay: each page's first sections, in the order the writer's context is filled
    kept = {(int(s), int(p)) for p, s in re.findall(r"## Pool (\d+) > Part (\d+)", sent[0])}
    assert 0 < len(kept) < 20 and kept == set(sorted((s, p) for s in range(5) for p in range(4))[: len(kept)])


def test_the_draft_leaves_room_for_the_refine_turn_and_a_refine_that_does_not_fit_is_not_sent(make_guards) -> None:
    from hifirag_core.types import Conversation, FewShotExample

    sources = long_sources(4, 5)
    with OpenAIFake(api_key=None) as fake:
        cfg = config(fake, 4000)
        writer = build_writer_model(cfg, guards=make_guards(cfg), env={})
        draft = writer.draft(QUESTION, sources, max_words=120)
        # the draft prompt fits with its reply, the refine instruction and the refine reply kept free
        assert writer.window.need(draft.value.turns[0].text) <= 4000 - 2 * 256 - 1024
        examples = [FewShotExample(str(i), "What is the default pool timeout?", "Thirty seconds. " * 40)
                    for i in range(6)]
        refined = writer.refine(QUESTION, draft.value, examples)
        assert "the draft's reply and the refine turn" in draft.error
        long_draft = Conversation((ChatTurn("user", "pool " * 3700), ChatTurn("model", "Thirty seconds.")))
        skipped = writer.refine(QUESTION, long_draft, examples)
        sent = len(fake.bodies)
    assert refined.status == "ok" and sent == 2  # the draft and its refinement; the long one was not sent
    assert skipped.status == "context_length_exceeded" and skipped.value == "Thirty seconds."
    assert skipped.method == "llm+fallback:draft" and "not sent" in skipped.error and skipped.calls == []


def test_the_sufficiency_check_keeps_the_sections_that_fit(make_guards) -> None:
    kept = [s for d in long_sources(6, 6) for s in d.sections]
    with OpenAIFake(api_key=None, context_tokens=2000) as fake:
        model = filter_model(fake, make_guards, 2000)
        model.prompts = type(model.prompts).load(names=("sufficiency", "query_plan", "url_filter", "section_rank",
                                                        "citations", "followup"))
        decision = model.check_sufficiency(QUESTION, kept)
    assert fake.refused == [] and decision.method == "llm+trimmed" and "kept sections left out" in decision.error
    assert model.window.fits(prompts_sent(fake)[0])


def test_the_default_window_comes_from_the_config() -> None:
    cfg = build_config(overrides={"models": {"filter": "m", "context_tokens": {"m": 8192}, "filter_max_tokens": 256}})
    assert prompt_window(cfg, "filter") == PromptWindow(8192, 256)
    assert prompt_window(cfg, "writer").context_tokens == 1_048_576  # gemini-2.5-pro's


def stage_inputs(n_sections: int) -> dict:
    """Section ranking's parameters for one page of ``n_sections`` sections."""
    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.records import PageRecord, SectionRecord, UrlDecisionRecord

    url = PAGE.url
    secs = [SectionRecord(url=url, section_id=p.section_id, ord=i, heading_path=["Pools", p.heading],
                          heading=p.heading, level=2, text=p.preview, n_chars=len(p.preview))
            for i, p in enumerate(sections(n_sections))]
    return {"decisions": StageOutput(records=[UrlDecisionRecord(url=url, title=PAGE.title, snippet=PAGE.snippet,
                                                                kept=True, order=1)]),
            "pages": StageOutput(records=[PageRecord(url=url, order=1, title=PAGE.title)]),
            "sections": StageOutput(records=secs)}


def test_the_window_keys_section_ranking_only_for_a_page_that_must_be_split(data_root) -> None:
    """Rankings already stored stay valid for pages that fit (their key is the one they always had); a question
    with a page to split gets a key of its own, which changes with the window."""
    from hifirag_core.llm.examples import ExampleSet
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.specs import SPECS
    from hifirag_core.pipeline.stages import section_rank
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.questions import Question

    question = Question("q1", QUESTION, None, 1)
    keys: dict[tuple[int, str], str] = {}
    for window in (4096, 8192):
        cfg = build_config(overrides={
            "backends": {"filter_llm": "openai", "writer_llm": "openai"},
            "models": {"filter": "local", "writer": "local", "openai_base_url": "http://127.0.0.1:9/v1",
                       "openai_api_key_optional": True, "context_tokens": {"local": window},
                       "filter_max_tokens": 256}})
        rt = build_runtime(RunContext("k", str(data_root), cfg, ExampleSet("", ())))
        assert rt.filter_model.window.context_tokens == window
        for size in (12, 150):
            params = stage_inputs(size)
            keys[window, f"{size}"] = SPECS["section_rank"].cache_key(question, params, rt)
            fits = section_rank.section_rank_window(question, params["decisions"], params["pages"], params["sections"],
                                              rt) is None
            rt.filter_model.window = None  # as the model was before windows: the key of a page that fits
            keys[window, f"{size}-unbounded"] = SPECS["section_rank"].cache_key(question, params, rt)
            rt.filter_model.window = PromptWindow(window, 256)
            assert fits == (size == 12 or window == 8192 and size < 150), (window, size)
    assert keys[4096, "12"] == keys[8192, "12"] == keys[4096, "12-unbounded"]
    assert keys[4096, "150"] != keys[4096, "150-unbounded"] and keys[4096, "150"] != keys[8192, "150"]
