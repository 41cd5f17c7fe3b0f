"""Programmable Search and Scrapingdog adapters against their fakes: paging, shapes, faults."""

from __future__ import annotations

import pytest

from hifirag_core.backends.factory import build_fetcher, build_search_backend
from hifirag_core.config import build_config
from hifirag_core.errors import BudgetExceededError, PermanentError, TransientError
from hifirag_core.limits import Budget, RunGuards
from hifirag_core.types import SearchHit
from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.support.fakes.server import Fault, Response
from tests.support.fakes.web import WebHit, WebPage


def many_hits(query: str, n: int) -> list[WebHit]:
    return [WebHit(f"Result {i}", f"https://r{i}.example/{query.replace(' ', '-')}", f"snippet {i}") for i in range(1, min(n, 37) + 1)]


def google_cfg(fake: GoogleSearchFake, **limits: object):
    return build_config(overrides={"backends": {"search": "google", "google_search_base_url": fake.base_url},
                                   "limits": {"retries": 2, **limits}})


def google_env(fake: GoogleSearchFake) -> dict[str, str]:
    return {"GOOGLE_CSE_KEY": fake.api_key, "GOOGLE_CSE_ID": fake.engine_id}


def test_google_returns_search_hits_in_order(google_fake: GoogleSearchFake, make_guards) -> None:
    cfg = google_cfg(google_fake)
    backend = build_search_backend(cfg, guards=make_guards(cfg), env=google_env(google_fake))
    hits = backend.search("python virtual environment", num=10)
    assert backend.provider == "google"
    assert hits[0] == SearchHit("venv — Creation of virtual environments", "https://docs.python.org/3/library/venv.html",
                                hits[0].snippet)
    assert hits[0].snippet and all(isinstance(h, SearchHit) for h in hits)
    request = google_fake.requests[-1]
    assert request.path == "/customsearch/v1"
    assert (request.param("key"), request.param("cx"), request.param("q"), request.param("num"), request.param("start")) == (
        google_fake.api_key, google_fake.engine_id, "python virtual environment", "10", "1")


def test_google_pages_past_ten_results(make_guards) -> None:
    with GoogleSearchFake(search=many_hits) as fake:
        cfg = google_cfg(fake)
        hits = build_search_backend(cfg, guards=make_guards(cfg), env=google_env(fake)).search("q", num=25)
        assert [h.title for h in hits] == [f"Result {i}" for i in range(1, 26)]
        assert [(r.param("start"), r.param("num")) for r in fake.requests] == [("1", "10"), ("11", "10"), ("21", "5")]


def test_google_stops_when_results_run_out_and_handles_no_items(make_guards) -> None:
    with GoogleSearchFake(search=lambda q, n: many_hits(q, min(n, 12))) as fake:
        cfg = google_cfg(fake)
        backend = build_search_backend(cfg, guards=make_guards(cfg), env=google_env(fake))
        assert len(backend.search("q", num=30)) == 12 and fake.count() == 2
    with GoogleSearchFake(search=lambda q, n: []) as fake:
        cfg = google_cfg(fake)
        assert build_search_backend(cfg, guards=make_guards(cfg), env=google_env(fake)).search("q", num=10) == []
        assert fake.count() == 1


def test_google_charges_each_request_to_the_budget(make_guards) -> None:
    with GoogleSearchFake(search=many_hits) as fake:
        cfg = google_cfg(fake, budget_usd=0.012)
        guards = RunGuards(cfg.limits, sleep=lambda s: None)
        backend = build_search_backend(cfg, guards=guards, env=google_env(fake))
        backend.search("q", num=20)  # two requests at $0.005
        assert guards.budget.spent_usd == pytest.approx(0.010)
        backend.search("q", num=10)
        with pytest.raises(BudgetExceededError):
            backend.search("q", num=10)
        assert fake.count() == 3


@pytest.mark.parametrize(("fault", "error", "attempts"), [
    (GoogleSearchFake.daily_limit(), PermanentError, 1),
    (Fault("status", Response(400, {"error": {"code": 400, "message": "Invalid Value", "status": "INVALID_ARGUMENT"}})),
     PermanentError, 1),
])
def test_google_permanent_errors_are_not_retried(google_fake: GoogleSearchFake, make_guards, fault, error, attempts) -> None:
    google_fake.inject(fault)
    cfg = google_cfg(google_fake)
    with pytest.raises(error) as info:
        build_search_backend(cfg, guards=make_guards(cfg), env=google_env(google_fake)).search("q", num=5)
    assert info.value.attempts == attempts and google_fake.count() == attempts
    assert google_fake.api_key not in str(info.value)


@pytest.mark.parametrize("fault", [
    GoogleSearchFake.user_rate_limit(),
    Fault("status", Response(429, {"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}},
                             {"Retry-After": "4"})),
    Fault("status", Response(503, {"error": {"code": 503, "message": "Backend Error", "status": "UNAVAILABLE"}})),
    Fault("truncate"),
    Fault("drop"),
])
def test_google_transient_errors_are_retried(google_fake: GoogleSearchFake, make_guards, sleeps, fault) -> None:
    google_fake.inject(fault)
    cfg = google_cfg(google_fake)
    hits = build_search_backend(cfg, guards=make_guards(cfg), env=google_env(google_fake)).search("python venv", num=3)
    assert hits and google_fake.count() == 2 and len(sleeps.calls) == 1
    if fault.response is not None and "Retry-After" in fault.response.headers:
        assert sleeps.calls == [4.0]


def test_google_gives_up_after_the_retries(google_fake: GoogleSearchFake, make_guards) -> None:
    google_fake.inject(Fault("status", Response(500, {"error": {"code": 500, "message": "x"}}), times=9))
    cfg = google_cfg(google_fake)
    with pytest.raises(TransientError) as info:
        build_search_backend(cfg, guards=make_guards(cfg), env=google_env(google_fake)).search("q", num=3)
    assert info.value.attempts == 3


# --- Scrapingdog -------------------------------------------------------------------------------


def sd_cfg(fake: ScrapingdogFake, **fetch: object):
    return build_config(overrides={"backends": {"search": "scrapingdog", "fetch": "scrapingdog",
                                                "scrapingdog_base_url": fake.base_url},
                                   "fetch": fetch, "limits": {"retries": 2}})


def sd_env(fake: ScrapingdogFake) -> dict[str, str]:
    return {"SCRAPINGDOG_API_KEY": fake.api_key}


def test_scrapingdog_search(scrapingdog_fake: ScrapingdogFake, make_guards) -> None:
    cfg = sd_cfg(scrapingdog_fake)
    backend = build_search_backend(cfg, guards=make_guards(cfg), env=sd_env(scrapingdog_fake))
    hits = backend.search("python virtual environment", num=3)
    assert backend.provider == "scrapingdog" and len(hits) == 3
    assert hits[0].url == "https://docs.python.org/3/library/venv.html" and hits[0].title and hits[0].snippet
    r = scrapingdog_fake.requests[-1]
    assert r.path == "/google" and (r.param("api_key"), r.param("query"), r.param("results"), r.param("page")) == (
        scrapingdog_fake.api_key, "python virtual environment", "3", "0")


@pytest.mark.parametrize("fault", [ScrapingdogFake.target_timeout(), ScrapingdogFake.concurrency_limit(2)])
def test_scrapingdog_search_retries_410_and_429(scrapingdog_fake: ScrapingdogFake, make_guards, sleeps, fault) -> None:
    scrapingdog_fake.inject(fault)
    cfg = sd_cfg(scrapingdog_fake)
    assert build_search_backend(cfg, guards=make_guards(cfg), env=sd_env(scrapingdog_fake)).search("python", num=2)
    assert scrapingdog_fake.count() == 2


def test_scrape_html_page(scrapingdog_fake: ScrapingdogFake, make_guards) -> None:
    cfg = sd_cfg(scrapingdog_fake)
    fetcher = build_fetcher(cfg, guards=make_guards(cfg), env=sd_env(scrapingdog_fake))
    result = fetcher.fetch("https://docs.python.org/3/library/venv.html")
    assert (result.status, result.kind, result.fetcher, result.http_status, result.encoding) == (
        "ok", "html", "scrapingdog", 200, "utf-8")
    assert result.body and b"<h2>Creating virtual environments</h2>" in result.body
    r = scrapingdog_fake.requests[-1]
    assert r.path == "/scrape" and r.param("url") == "https://docs.python.org/3/library/venv.html"
    assert r.param("dynamic") == "false"


def test_scrape_pdf_and_missing_and_too_large(make_guards) -> None:
    pages = {"https://x.example/doc.pdf": WebPage(b"%PDF-1.4 ...", content_type="application/pdf"),
             "https://x.example/big": WebPage(b"<html>" + b"a" * 5000 + b"</html>")}
    with ScrapingdogFake(page=pages.get) as fake:
        cfg = sd_cfg(fake, max_bytes=1000)
        fetcher = build_fetcher(cfg, guards=make_guards(cfg), env=sd_env(fake))
        pdf = fetcher.fetch("https://x.example/doc.pdf")
        assert (pdf.status, pdf.kind, pdf.body) == ("ok", "pdf", b"%PDF-1.4 ...")
        missing = fetcher.fetch("https://x.example/nothing")
        assert (missing.status, missing.http_status) == ("not_found", 404)
        big = fetcher.fetch("https://x.example/big")
        assert big.status == "too_large" and big.body is None


def test_scrape_faults_end_in_statuses(scrapingdog_fake: ScrapingdogFake, make_guards) -> None:
    cfg = sd_cfg(scrapingdog_fake)
    fetcher = build_fetcher(cfg, guards=make_guards(cfg), env=sd_env(scrapingdog_fake))
    scrapingdog_fake.inject(ScrapingdogFake.out_of_credits())
    credits = fetcher.fetch("https://docs.python.org/3/library/venv.html")
    assert credits.status == "http_error" and credits.http_status == 403 and "Request limit reached" in credits.error
    assert scrapingdog_fake.api_key not in credits.error
    scrapingdog_fake.inject(Fault("status", Response(500, {"success": False}), times=3))
    failed = fetcher.fetch("https://docs.python.org/3/library/venv.html")
    assert failed.status == "http_error" and failed.body is None
    scrapingdog_fake.inject(ScrapingdogFake.target_timeout())
    assert fetcher.fetch("https://docs.python.org/3/library/venv.html").status == "ok"


def test_scrape_timeout_and_budget(scrapingdog_fake: ScrapingdogFake) -> None:
    cfg = sd_cfg(scrapingdog_fake)
    cfg = cfg.model_copy(update={"limits": cfg.limits.model_copy(update={"scrape_timeout_s": 0.3, "retries": 1})})
    scrapingdog_fake.inject(Fault("delay", seconds=5, times=2))
    fetcher = build_fetcher(cfg, guards=RunGuards(cfg.limits, sleep=lambda s: None), env=sd_env(scrapingdog_fake))
    timed_out = fetcher.fetch("https://docs.python.org/3/library/venv.html")
    assert timed_out.status == "timeout" and timed_out.error.startswith("timeout:")

    spent = RunGuards(cfg.limits, budget=Budget(usd=0.0), sleep=lambda s: None)
    before = scrapingdog_fake.count()
    refused = build_fetcher(cfg, guards=spent, env=sd_env(scrapingdog_fake)).fetch("https://docs.python.org/3/library/venv.html")
    assert refused.status == "budget_exceeded" and refused.error.startswith("budget_exceeded:")
    assert scrapingdog_fake.count() == before


def test_fakes_serve_pluggable_content(make_guards) -> None:
    """The shapes a local corpus would hand over: SearchHit objects, dicts, URL -> bytes."""
    hits = [SearchHit("Local A", "https://docs.python.org/3.11/a.html", "about a"),
            {"title": "Local B", "link": "https://docs.python.org/3.11/b.html", "snippet": "about b"}]
    pages = {"https://docs.python.org/3.11/a.html": b"<html><body><h1>A</h1></body></html>"}
    with ScrapingdogFake(search=lambda q, n: hits[:n], page=pages) as fake:
        cfg = sd_cfg(fake)
        guards = make_guards(cfg)
        found = build_search_backend(cfg, guards=guards, env=sd_env(fake)).search("anything", num=5)
        assert [(h.title, h.url) for h in found] == [("Local A", "https://docs.python.org/3.11/a.html"),
                                                     ("Local B", "https://docs.python.org/3.11/b.html")]
        fetcher = build_fetcher(cfg, guards=guards, env=sd_env(fake))
        assert fetcher.fetch("https://docs.python.org/3.11/a.html").body == pages["https://docs.python.org/3.11/a.html"]
        assert fetcher.fetch("https://docs.python.org/3.11/b.html").status == "not_found"
    with GoogleSearchFake(search=lambda q, n: hits[:n]) as fake:
        cfg = google_cfg(fake)
        assert len(build_search_backend(cfg, guards=make_guards(cfg), env=google_env(fake)).search("x", num=5)) == 2
