"""Every stage through the real clients against all fakes at once, as a run would use them."""

from __future__ import annotations

import os
import threading
import time

import pytest

from hifirag_core.backends.factory import (
    build_fetcher,
    build_filter_model,
    build_guards,
    build_reddit_source,
    build_search_backend,
    build_writer_model,
    check_secrets,
)
from hifirag_core.config import build_config, parse_overrides
from hifirag_core.limits import question_deadline
from hifirag_core.types import (
    FewShotExample,
    PageOverview,
    SectionPreview,
    SourceDoc,
    SourceSection,
    UrlCandidate,
)
from tests.support.fakes import GeminiFake, fake_services
from tests.support.fakes.services import FakeServices

Q = "How do I create a Python virtual environment?"
EXAMPLES = [FewShotExample("What is pip?", "pip is the package installer for Python; run python -m pip install name."),
            FewShotExample("What is PyPI?", "PyPI is the Python Package Index, the public package repository.")]


def answer_one(fakes: FakeServices, llm: str = "gemini", search: str = "google") -> dict:
    cfg = build_config(overrides=fakes.config_overrides(llm=llm, search=search))
    guards = build_guards(cfg, sleep=lambda s: None)
    filt = build_filter_model(cfg, guards=guards, env=fakes.env)
    writer = build_writer_model(cfg, guards=guards, env=fakes.env)
    search_backend = build_search_backend(cfg, guards=guards, env=fakes.env)
    fetcher = build_fetcher(cfg, guards=guards, env=fakes.env)
    reddit = build_reddit_source(cfg, guards=guards, env=fakes.env)

    plan = filt.plan_queries(Q, max_queries=cfg.query_plan.max_queries)
    hits = {h.url: h for q in plan.value for h in search_backend.search(q, num=cfg.search.results_per_query)}
    candidates = [UrlCandidate(h.url, h.title, h.snippet) for h in hits.values()]
    chosen = filt.select_urls(Q, candidates, max_urls=cfg.url_filter.max_urls)
    sources, threads, statuses = [], [], {}
    for order, i in enumerate(chosen.value, start=1):
        cand = candidates[i]
        if "reddit.com" in cand.url:
            threads.append(reddit.thread(cand.url))
            continue
        page = fetcher.fetch(cand.url)
        statuses[cand.url] = page.status
        if page.status != "ok":
            continue
        sections = [SectionPreview("s0", "Creating virtual environments",
                                   "Creating virtual environments: Virtual environments are created by executing the venv module"),
                    SectionPreview("s1", "API", "API: The high-level method create() creates an EnvBuilder")]
        ranked = filt.rank_sections(Q, PageOverview(cand.url, cand.title, cand.snippet), sections, max_sections=4)
        kept = tuple(SourceSection(sections[k].section_id, (cand.title, sections[k].heading), sections[k].preview)
                     for k in ranked.value)
        sources.append(SourceDoc(order, cand.url, cand.title, cand.snippet, kept))
    draft = writer.draft(Q, sources, max_words=cfg.generation.draft_words)
    refined = writer.refine(Q, draft.value, EXAMPLES)
    cited = filt.verify_citations(Q, refined.value, sources)
    return {"plan": plan, "chosen": chosen, "draft": draft, "refined": refined, "cited": cited, "threads": threads,
            "statuses": statuses, "budget": guards.budget.summary(), "sources": sources}


def test_one_question_through_every_real_adapter_on_gemini(fakes: FakeServices) -> None:
    out = answer_one(fakes)
    assert all(out[k].status == "ok" for k in ("plan", "chosen", "draft", "refined", "cited"))
    assert out["refined"].value and out["cited"].value
    cited = {n for sentence in out["cited"].value for n in sentence.sources}
    assert cited and cited <= {s.index for s in out["sources"]}
    assert out["threads"] and out["threads"][0].comments
    assert fakes.gemini.kinds == {"query_plan": 1, "url_filter": 1, "section_rank": len(out["sources"]),
                                  "draft": 1, "refine": 1, "citations": 1}
    assert fakes.gemini.models["gemini-2.5-flash"] == 3 + len(out["sources"])
    assert fakes.gemini.models["gemini-2.5-pro"] == 2
    assert fakes.google.count() == 2 and fakes.reddit.count() == 2
    assert out["budget"]["spent_usd"] > 0
    calls = [c for k in ("plan", "chosen", "draft", "refined", "cited") for c in out[k].calls]
    assert all(c.prompt_hash and c.tokens_in and c.cost_usd for c in calls)


def test_same_flow_on_an_openai_compatible_server_with_scrapingdog_search() -> None:
    with fake_services(openai_think=True) as fakes:
        out = answer_one(fakes, llm="openai", search="scrapingdog")
        assert out["refined"].status == "ok" and out["cited"].status == "ok"
        assert fakes.openai.kinds["query_plan"] == 1 and fakes.gemini.count() == 0
        assert all("<think>" not in q for q in out["plan"].value)
        assert fakes.scrapingdog.count(lambda r: r.path == "/google") == 2


def test_overrides_and_environment_helpers(fakes: FakeServices) -> None:
    cfg = build_config(overrides=parse_overrides(fakes.config_overrides_pairs()))
    assert cfg.models.gemini_base_url == fakes.gemini.base_url and cfg.backends.fetch == "scrapingdog"
    assert "GEMINI_API_KEY" not in os.environ
    with fakes.environment():
        check_secrets(cfg)
        assert os.environ["GEMINI_API_KEY"] == fakes.gemini.api_key
    assert "GEMINI_API_KEY" not in os.environ


def test_fake_rpm_limit_and_client_limits_cooperate() -> None:
    """With a server limit of 3 rpm, a fourth call gets a 429 whose RetryInfo the client honours."""
    with fake_services(gemini_rpm=3) as fakes:
        cfg = build_config(overrides=fakes.config_overrides())
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            fakes.gemini.rpm = None  # the "minute" passes while the client waits

        filt = build_filter_model(cfg, guards=build_guards(cfg, sleep=sleep), env=fakes.env)
        for _ in range(3):
            assert filt.plan_queries(Q, max_queries=2).status == "ok"
        d = filt.plan_queries(Q, max_queries=2)
        assert d.status == "ok" and d.calls[0].attempts == 2 and 55 <= waits[0] <= 60


def test_concurrent_questions_share_limits_and_budget() -> None:
    with fake_services(llm_latency={"filter": 0.05, "writer": 0.1}) as fakes:
        cfg = build_config(overrides={**fakes.config_overrides(),
                                      "limits": {"provider_concurrency": {"gemini": 2}, "budget_usd": 100.0}})
        guards = build_guards(cfg)
        filt = build_filter_model(cfg, guards=guards, env=fakes.env)
        errors: list[BaseException] = []

        def question(i: int) -> None:
            try:
                with question_deadline(30):
                    assert filt.plan_queries(f"{Q} #{i}", max_queries=2).status == "ok"
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        started = time.monotonic()
        threads = [threading.Thread(target=question, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        assert not errors
        assert fakes.gemini.kinds["query_plan"] == 6
        # 6 calls of 50 ms, two at a time: at least three rounds
        assert elapsed >= 0.15
        assert guards.budget.spent_tokens > 0


def test_writer_deadline_cuts_a_slow_call() -> None:
    with fake_services(llm_latency={"writer": 3.0}) as fakes:
        cfg = build_config(overrides=fakes.config_overrides())
        writer = build_writer_model(cfg, guards=build_guards(cfg, sleep=lambda s: None), env=fakes.env)
        started = time.monotonic()
        with question_deadline(0.5):
            d = writer.draft(Q, [], max_words=100)
        assert d.status in ("timeout", "deadline_exceeded") and time.monotonic() - started < 2.5


@pytest.mark.parametrize("fault", [GeminiFake.blocked_prompt(), GeminiFake.empty_candidates()])
def test_a_blocked_draft_leaves_a_status_not_an_exception(fakes: FakeServices, fault) -> None:
    cfg = build_config(overrides=fakes.config_overrides())
    writer = build_writer_model(cfg, guards=build_guards(cfg, sleep=lambda s: None), env=fakes.env)
    fakes.gemini.inject(fault)
    d = writer.draft(Q, [], max_words=100)
    assert d.status in ("blocked", "empty") and d.value.last_reply == ""
