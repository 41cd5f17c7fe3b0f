"""The search providers of the backends table against fakes speaking their wire formats: results, the
steering each applies as its own parameters (the fakes check them), keys, retries, costs, the documents
MMU-RAGent's services carry, and the table itself (config choices, secrets, doctor, docs)."""

from __future__ import annotations

import os
import re
from datetime import date, timedelta
from pathlib import Path

import pytest

from hifirag_core import backend_registry as registry
from hifirag_core.backends.carried import CarriedTextFetcher
from hifirag_core.backends.doctor import _search as doctor_search
from hifirag_core.backends.factory import (
    build_search_backend,
    build_search_provider,
    required_secrets,
    search_notices,
)
from hifirag_core.config import ConfigError, PipelineConfig, build_config
from hifirag_core.errors import PermanentError, TransientError
from hifirag_core.limits import Budget, RunGuards
from hifirag_core.sectioning.plain import parse_text_sections
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.types import FetchResult, SearchSteer
from tests import PROJECT_ROOT
from tests.support.fakes.search_providers import (
    BraveFake,
    DuckDuckGoFake,
    ExaFake,
    MmuSearchFake,
    SearxngFake,
    TavilyFake,
)
from tests.support.fakes.server import Fault, Response
from tests.support.fakes.web import WebHit

TODAY = date.today()
RECENT = SearchSteer(window=DateWindow(after=TODAY - timedelta(days=5)), language="fr")
PAST = SearchSteer(window=DateWindow(after=date(2020, 1, 1), before=date(2020, 6, 30)))
SITES = SearchSteer(sites=SiteRules.of(["docs.python.org"], ["reddit.com"]))


def cfg_for(search: str, **backends: object) -> PipelineConfig:
    return build_config(overrides={"backends": {"search": search, **backends}, "limits": {"retries": 2}})


def guards_with_budget(cfg: PipelineConfig, sleeps) -> RunGuards:
    return RunGuards(cfg.limits, budget=Budget(usd=10.0), sleep=sleeps)


# --- the table ---------------------------------------------------------------------------------------------


def test_the_config_choices_secrets_and_docs_come_from_the_table() -> None:
    field = PipelineConfig.model_fields["backends"].annotation.model_fields["search"]
    assert set(field.annotation.__args__) == set(registry.SEARCH_CHOICES)
    assert {"searxng", "duckduckgo", "brave", "tavily", "exa", "fineweb", "clueweb22-a", "gemini-grounding"} <= set(
        registry.SEARCH_CHOICES)
    with pytest.raises(ConfigError, match="backends.search"):
        build_config(overrides={"backends": {"search": "altavista"}})
    for row in registry.BACKENDS:
        if row.role == "search":
            assert required_secrets(cfg_for(row.name)) == [k.name for k in row.keys]
    docs = (PROJECT_ROOT / "docs" / "user-guide.md").read_text()
    assert registry.provider_table_markdown() in docs, "regenerate the table: registry.provider_table_markdown()"


def test_google_warns_until_its_end_and_is_an_error_naming_the_alternatives_from_then() -> None:
    cfg = cfg_for("google")
    env = {"GOOGLE_CSE_KEY": "k" * 10, "GOOGLE_CSE_ID": "cx"}
    before = registry.GOOGLE_ENDS - timedelta(days=1)
    assert any("closed to new customers" in n and "2027-01-01" in n for n in search_notices(cfg, today=before))
    assert build_search_backend(cfg, env=env, today=before).provider == "google"
    with pytest.raises(ConfigError, match=r"ended on 2027-01-01.*searxng.*duckduckgo") as err:
        build_search_backend(cfg, env=env, today=registry.GOOGLE_ENDS)
    assert "google" not in str(err.value).split("choose one of")[1]
    check = doctor_search("google", cfg, RunGuards(cfg.limits), env, Path("/nonexistent"), registry.GOOGLE_ENDS)
    assert check.status == "failed" and "ended" in check.detail


# --- SearXNG -----------------------------------------------------------------------------------------------


def test_searxng_json_api_pages_and_steers_with_language_and_time_range(make_guards) -> None:
    with SearxngFake() as fake:
        cfg = cfg_for("searxng", searxng_url=fake.base_url)
        backend = build_search_backend(cfg, guards=make_guards(cfg), env={})
        hits = backend.search("python virtual environment", num=3)
        assert backend.provider == "searxng" and hits and hits[0].url == "https://docs.python.org/3/library/venv.html"
        first = fake.requests[-1]
        assert (first.param("format"), first.param("pageno"), first.param("q")) == ("json", "1",
                                                                                    "python virtual environment")
        backend.search("python venv", num=3, steer=RECENT)
        assert fake.steered[-1] == {"language": "fr", "time_range": "week"}
        backend.search("python venv", num=3, steer=PAST)  # a window ending in the past has no time_range
        assert fake.steered[-1] == {}
        found = backend.search("python venv", num=5, steer=SITES)
        assert fake.queries[-1] == "python venv site:docs.python.org -site:reddit.com"
        assert found and all("docs.python.org" in h.url for h in found)


def test_searxng_without_a_url_or_json_format_says_what_to_set(make_guards) -> None:
    with pytest.raises(PermanentError, match="backends.searxng_url"):
        build_search_backend(cfg_for("searxng"), env={})
    with SearxngFake() as fake:
        fake.inject(Fault("status", Response(403, "Forbidden")))
        cfg = cfg_for("searxng", searxng_url=fake.base_url)
        with pytest.raises(PermanentError, match="403"):
            build_search_backend(cfg, guards=make_guards(cfg), env={}).search("q", num=3)


# --- Brave -------------------------------------------------------------------------------------------------


def test_brave_sends_its_token_freshness_and_language_and_charges_each_query(sleeps) -> None:
    with BraveFake() as fake:
        cfg = cfg_for("brave", base_urls={"brave": fake.base_url})
        guards = guards_with_budget(cfg, sleeps)
        backend = build_search_backend(cfg, guards=guards, env={"BRAVE_API_KEY": fake.api_key})
        assert backend.search("python virtual environment", num=5)[0].url.startswith("https://docs.python.org")
        assert fake.requests[-1].headers["x-subscription-token"] == fake.api_key
        assert fake.requests[-1].param("count") == "5"
        backend.search("python venv", num=5, steer=RECENT)
        assert fake.steered[-1] == {"freshness": "pw", "search_lang": "fr"}
        backend.search("python venv", num=5, steer=PAST)
        assert fake.steered[-1] == {"freshness": "2020-01-01to2020-06-30"}
        assert guards.budget.spent_usd == pytest.approx(3 * 0.005)
        fake.inject(Fault("status", BraveFake.error(429, "RATE_LIMITED", "Request rate limit exceeded for plan")))
        assert backend.search("python venv", num=2)  # retried after the 429
        assert sleeps.calls


def test_brave_with_a_wrong_token_fails_at_once(make_guards) -> None:
    with BraveFake() as fake:
        cfg = cfg_for("brave", base_urls={"brave": fake.base_url})
        with pytest.raises(PermanentError, match="401"):
            build_search_backend(cfg, guards=make_guards(cfg), env={"BRAVE_API_KEY": "wrong-token-0123"}).search(
                "q", num=3)
        assert fake.count() == 1


# --- Tavily and Exa ----------------------------------------------------------------------------------------


def test_tavily_takes_sites_and_dates_as_its_own_fields(sleeps) -> None:
    with TavilyFake() as fake:
        cfg = cfg_for("tavily", base_urls={"tavily": fake.base_url})
        guards = guards_with_budget(cfg, sleeps)
        backend = build_search_backend(cfg, guards=guards, env={"TAVILY_API_KEY": fake.api_key})
        found = backend.search("python venv", num=5, steer=SITES)
        assert fake.steered[-1] == {"include_domains": ["docs.python.org"], "exclude_domains": ["reddit.com"]}
        assert found and all("docs.python.org" in h.url for h in found)
        assert fake.requests[-1].json()["query"] == "python venv"  # no site: terms in the query
        backend.search("python venv", num=5, steer=PAST)
        assert fake.steered[-1] == {"start_date": "2020-01-01", "end_date": "2020-06-30"}
        assert guards.budget.spent_usd == pytest.approx(2 * 0.008)


def test_exa_takes_domains_and_published_dates_and_charges_what_the_reply_says(sleeps) -> None:
    with ExaFake(cost_per_search=0.007) as fake:
        cfg = cfg_for("exa", base_urls={"exa": fake.base_url})
        guards = guards_with_budget(cfg, sleeps)
        backend = build_search_backend(cfg, guards=guards, env={"EXA_API_KEY": fake.api_key})
        hits = backend.search("python virtual environment", num=4, steer=PAST)
        assert fake.steered[-1] == {"startPublishedDate": "2020-01-01T00:00:00.000Z",
                                    "endPublishedDate": "2020-06-30T23:59:59.999Z"}
        assert hits and hits[0].snippet  # the highlights asked for
        backend.search("python venv", num=4, steer=SITES)
        assert fake.steered[-1] == {"includeDomains": ["docs.python.org"], "excludeDomains": ["reddit.com"]}
        assert guards.budget.spent_usd == pytest.approx(2 * 0.007)


def test_tavily_and_exa_clients_errors_become_the_runs_retried_or_final_errors(sleeps) -> None:
    """Through tavily-python and exa-py: a 429 and a 5xx are retried with backoff, a spent plan or a bad request
    fails at once, and nothing failed is charged."""
    with TavilyFake() as fake:
        cfg = cfg_for("tavily", base_urls={"tavily": fake.base_url})
        guards = guards_with_budget(cfg, sleeps)
        backend = build_search_backend(cfg, guards=guards, env={"TAVILY_API_KEY": fake.api_key})
        fake.inject(Fault("status", Response(429, {"detail": {"error": "Rate limit exceeded"}})))
        assert backend.search("python venv", num=3) and fake.count() == 2 and len(sleeps.calls) == 1
        fake.inject(Fault("status", Response(432, {"detail": {"error": "Plan usage limit exceeded"}})))
        with pytest.raises(PermanentError, match="432.*credits are spent"):
            backend.search("python venv", num=3)
        fake.inject(Fault("status", Response(502, "Bad Gateway"), times=3))
        with pytest.raises(TransientError, match="HTTP 502"):
            backend.search("python venv", num=3)
        assert fake.count() == 6 and guards.budget.spent_usd == pytest.approx(0.008)
    with ExaFake() as fake:
        cfg = cfg_for("exa", base_urls={"exa": fake.base_url})
        guards = guards_with_budget(cfg, sleeps)
        backend = build_search_backend(cfg, guards=guards, env={"EXA_API_KEY": fake.api_key})
        fake.inject(Fault("status", Response(429, {"error": "Too many requests", "tag": "RATE_LIMITED"})))
        fake.inject(Fault("status", Response(500, {"error": "Internal error"})))
        assert backend.search("python venv", num=3) and fake.count() == 3
        fake.inject(Fault("status", Response(400, {"error": "Invalid request", "tag": "INVALID_REQUEST_BODY"})))
        with pytest.raises(PermanentError, match="HTTP 400"):
            backend.search("python venv", num=3)
        assert fake.count() == 4 and guards.budget.spent_usd == pytest.approx(0.005)
        with pytest.raises(PermanentError, match="401"):
            build_search_backend(cfg, guards=guards, env={"EXA_API_KEY": "wrong-key-0123"}).search("q", num=3)


# --- DuckDuckGo (ddgs) ---------------------------------------------------------------------------------------


def ddgs_cfg(fake: DuckDuckGoFake) -> PipelineConfig:
    """The real ddgs client sent to the fake through its proxy setting, verifying the fake's certificate."""
    return cfg_for("duckduckgo", ddgs_proxy=fake.proxy_url, ddgs_ca_file=fake.ca_file)


def test_ddgs_posts_region_timelimit_and_site_terms_to_duckduckgos_html_search(make_guards) -> None:
    with DuckDuckGoFake() as fake:
        backend = build_search_backend(ddgs_cfg(fake), guards=make_guards(), env={})
        hits = backend.search("python virtual environment", num=3)
        assert [h.url for h in hits][:1] == ["https://docs.python.org/3/library/venv.html"] and len(hits) == 3
        assert hits[0].title and hits[0].snippet
        assert fake.tunnels == ["html.duckduckgo.com:443"]  # ddgs's own address, through the proxy
        assert fake.requests[-1].form() == {"q": "python virtual environment", "l": "wt-wt"}  # b="" is dropped
        backend.search("python venv", num=3, steer=RECENT)
        assert fake.steered[-1] == {"l": "fr-fr", "df": "w"}
        backend.search("python venv", num=3, steer=PAST)  # a window ending in the past has no time limit
        assert fake.steered[-1] == {}
        found = backend.search("python venv", num=5, steer=SITES)
        assert fake.queries[-1] == "python venv site:docs.python.org -site:reddit.com"
        assert found and all("docs.python.org" in h.url for h in found)
        assert backend.search("zzzz nothing matches qqqq", num=3) == []  # a page without results
    many_pages = [WebHit(f"Page {i}", f"https://many.example/{i}", f"page {i}") for i in range(40)]
    with DuckDuckGoFake(search=lambda q, n: many_pages[:n]) as fake:
        hits = build_search_backend(ddgs_cfg(fake), guards=make_guards(), env={}).search("many", num=18)
        assert [r.form().get("s") for r in fake.requests] == [None, "10"]  # the second page from offset 10
        assert [h.url for h in hits] == [h.link for h in many_pages[:18]]
    with pytest.raises(PermanentError, match="ddgs_ca_file"):
        build_search_backend(cfg_for("duckduckgo", ddgs_ca_file="/nonexistent.pem"), env={})
    with pytest.raises(ConfigError, match="DDGS_PROXY"):
        cfg_for("duckduckgo", ddgs_proxy="http://me:secret@proxy.example:3128")


def test_ddgs_refuses_a_certificate_it_cannot_verify(make_guards) -> None:
    with DuckDuckGoFake() as fake:
        cfg = cfg_for("duckduckgo", ddgs_proxy=fake.proxy_url)  # the system's CAs: the fake's CA is not one
        with pytest.raises(TransientError, match="duckduckgo"):
            build_search_backend(cfg, guards=make_guards(cfg), env={}).search("python venv", num=3)
        assert fake.requests == []


def test_ddgs_rate_limits_back_off_then_the_error_says_rate_limited(make_guards, sleeps) -> None:
    """DuckDuckGo's challenge page (202) and a 429 are retried with backoff; ddgs's own ``DDGS().text()`` would
    have called them "No results found."."""
    with DuckDuckGoFake() as fake:
        cfg = ddgs_cfg(fake)
        backend = build_search_backend(cfg, guards=make_guards(cfg), env={})
        fake.inject(Fault("status", DuckDuckGoFake.challenge()))
        fake.inject(Fault("status", Response(429, "Too Many Requests")))
        assert backend.search("python venv", num=3)  # the third attempt answers
        assert fake.count() == 3 and len(sleeps.calls) == 2
        fake.inject(Fault("status", DuckDuckGoFake.challenge(), times=3))
        with pytest.raises(TransientError, match="rate-limited.*after 3 attempts") as err:
            backend.search("python venv", num=3)
        assert err.value.rate_limited
        fake.inject(Fault("status", Response(500, "Internal Server Error"), times=3))
        with pytest.raises(TransientError, match="HTTP 500") as err:
            backend.search("python venv", num=3)
        assert not err.value.rate_limited and fake.count() == 9
        fake.inject(Fault("status", Response(400, "Bad Request")))
        with pytest.raises(PermanentError, match="HTTP 400"):
            backend.search("python venv", num=3)
        assert fake.count() == 10  # not retried


def test_each_search_call_leaves_a_row_with_its_back_offs_and_its_cost(make_guards, sleeps) -> None:
    """The search stage's row of one call (``search_calls``): a back-off that ended in an answer still shows,
    and a paid provider's charge is the row's cost."""
    from hifirag_core.pipeline.providers import ask

    with DuckDuckGoFake() as fake:
        cfg = ddgs_cfg(fake)
        fake.inject(Fault("status", DuckDuckGoFake.challenge(), times=2))
        hits, row = ask(build_search_backend(cfg, guards=make_guards(cfg), env={}), "python venv", 1, 3, SearchSteer())
        assert hits and (row.status, row.hits, row.query_index, row.provider) == ("ok", len(hits), 1, "duckduckgo")
        assert (row.attempts, row.rate_limited) == (3, 2)
        assert row.backoff_s == pytest.approx(sum(sleeps.calls), abs=1e-3) and row.backoff_s > 0
        assert row.cost_usd is None
        fake.inject(Fault("status", DuckDuckGoFake.challenge(), times=3))
        error, row = ask(build_search_backend(cfg, guards=make_guards(cfg), env={}), "python venv", 0, 3, SearchSteer())
        assert isinstance(error, TransientError) and (row.status, row.hits, row.attempts) == ("rate_limited", None, 3)
        assert "after 3 attempts" in row.error
    with BraveFake() as brave:
        cfg = cfg_for("brave", base_urls={"brave": brave.base_url})
        backend = build_search_backend(cfg, guards=guards_with_budget(cfg, sleeps), env={"BRAVE_API_KEY": brave.api_key})
        _, row = ask(backend, "python venv", 0, 5, SearchSteer())
        assert (row.attempts, row.rate_limited, row.cost_usd) == (1, 0, pytest.approx(0.005))


# --- MMU-RAGent FineWeb and ClueWeb22 -----------------------------------------------------------------------

DOC = ("Creating virtual environments\n\nThe venv module creates lightweight virtual environments.\n"
       "Each has its own Python binary.\n\nRun python -m venv /path/to/env to create one.")


def test_fineweb_documents_arrive_with_their_text_and_are_not_fetched(make_guards) -> None:
    with MmuSearchFake(text=lambda url: DOC if "python" in url else None, corrupt=1) as fake:
        cfg = cfg_for("fineweb", base_urls={"clueweb22": fake.base_url})
        backend = build_search_backend(cfg, guards=make_guards(cfg), env={})
        hits = backend.search("python virtual environment", num=5)
        assert fake.requests[-1].path == "/fineweb/search" and fake.requests[-1].param("k") == "5"
        assert "x-api-key" not in fake.requests[-1].headers
        assert hits and hits[0].title == "Creating virtual environments" and backend.skipped >= 1
        never = FetcherThatFails()
        fetcher = CarriedTextFetcher(never, backend)
        page = fetcher.fetch(hits[0].url)
        assert (page.status, page.kind, page.fetcher, page.text_source) == ("ok", "text", "fineweb", "search_provider")
        assert page.body == DOC.encode() and never.urls == []
        other = fetcher.fetch("https://elsewhere.example/")
        assert other.text_source == "fetched" and never.urls == ["https://elsewhere.example/"]


def test_clueweb_sends_its_key_and_cw22_a(make_guards) -> None:
    with MmuSearchFake(text=lambda url: DOC) as fake:
        env = {"CLUEWEB_API_KEY": fake.api_key}
        for name, index in (("clueweb22-b", "cw22_b"), ("clueweb22-a", "cw22_a")):
            cfg = cfg_for(name, base_urls={"clueweb22": fake.base_url})
            backend = build_search_provider(name, cfg, guards=make_guards(cfg), env=env)
            hits = backend.search("python venv", num=3)
            assert fake.indexes[-1] == index and fake.requests[-1].headers["x-api-key"] == fake.api_key
            assert hits and backend.carried(hits[0].url).text == DOC and backend.carried(hits[0].url).doc_id
        with pytest.raises(PermanentError, match="401"):
            build_search_provider("clueweb22-b", cfg, guards=make_guards(cfg),
                                  env={"CLUEWEB_API_KEY": "wrong-key-01234"}).search("q", num=2)


def test_a_document_without_headings_is_sectioned_by_paragraphs() -> None:
    page = parse_text_sections(DOC, "https://x.example/a", config=build_config().sectioning)
    assert page.ok and page.title == "Creating virtual environments"
    assert [s.heading for s in page.sections] == ["Creating virtual environments"]
    # lines of one paragraph are joined; paragraphs are kept apart
    assert page.sections[0].text == ("The venv module creates lightweight virtual environments. Each has its own "
                                     "Python binary.\n\nRun python -m venv /path/to/env to create one.")
    long = "\n\n".join(f"Paragraph {i} " + "word " * 200 for i in range(10))
    small = parse_text_sections(long, "https://x.example/b", title="T",
                                config=build_config(overrides={"sectioning": {"max_section_chars": 2500}}).sectioning)
    assert len(small.sections) > 1 and all(s.n_chars <= 2500 for s in small.sections)
    assert all(s.text.startswith("Paragraph") for s in small.sections)  # cut between paragraphs
    lines = parse_text_sections("one line\nanother line\nthird", "https://x.example/c")
    assert lines.sections[0].text == "another line\n\nthird"  # no blank line: each line a paragraph


class FetcherThatFails:
    name = "http"

    def __init__(self) -> None:
        self.urls: list[str] = []

    def fetch(self, url: str) -> FetchResult:
        self.urls.append(url)
        return FetchResult(url=url, status="failed", fetcher=self.name, error="not reachable in this test")


# --- Gemini grounding ---------------------------------------------------------------------------------------


def test_gemini_grounding_returns_the_pages_it_cites(make_guards) -> None:
    from tests.support.fakes.gemini import GeminiFake

    text = "The venv module creates environments. Pip installs packages."
    reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                             "index": 0, "groundingMetadata": {
                                 "webSearchQueries": ["python venv"],
                                 "groundingChunks": [{"web": {"uri": "https://docs.python.org/3/library/venv.html",
                                                              "title": "docs.python.org"}},
                                                     {"web": {"uri": "https://pip.pypa.io/", "title": "pypa.io"}}],
                                 "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 37,
                                                                    "text": "The venv module creates environments."},
                                                        "groundingChunkIndices": [0]}]}}],
             "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 12, "totalTokenCount": 42}}
    with GeminiFake() as fake:
        fake.inject(Fault("status", Response(200, reply)))
        cfg = build_config(overrides={"backends": {"search": "gemini-grounding"},
                                      "models": {"gemini_base_url": fake.base_url}})
        hits = build_search_backend(cfg, guards=make_guards(cfg), env={"GEMINI_API_KEY": fake.api_key}).search(
            "python venv", num=5)
        assert [h.url for h in hits] == ["https://docs.python.org/3/library/venv.html", "https://pip.pypa.io/"]
        assert hits[0].snippet == "The venv module creates environments." and hits[1].snippet == ""
        body = fake.requests[-1].json()
        assert any("googleSearch" in t or "google_search" in t for t in body["tools"])


# --- doctor -------------------------------------------------------------------------------------------------


def test_doctor_says_what_is_missing_and_checks_with_one_call(make_guards) -> None:
    cfg = cfg_for("brave")
    check = doctor_search("brave", cfg, make_guards(cfg), {}, Path("/nonexistent"))
    assert (check.status, check.detail) == ("missing", "set BRAVE_API_KEY") and "$0.005" in check.cost
    check = doctor_search("searxng", cfg_for("searxng"), make_guards(), {}, Path("/nonexistent"))
    assert check.status == "missing" and "backends.searxng_url" in check.detail
    with MmuSearchFake(text=lambda url: DOC) as fake:
        cfg = cfg_for("fineweb", base_urls={"clueweb22": fake.base_url})
        check = doctor_search("fineweb", cfg, make_guards(cfg), {}, Path("/nonexistent"))
        assert check.status == "ok" and "with their text" in check.detail and fake.count() == 1


# --- live (skipped without their keys or URLs) -----------------------------------------------------------------

LIVE = [("searxng", "HIFIRAG_LIVE_SEARXNG_URL", {}), ("brave", "BRAVE_API_KEY", {}),
        ("tavily", "TAVILY_API_KEY", {}), ("exa", "EXA_API_KEY", {}), ("clueweb22-b", "CLUEWEB_API_KEY", {}),
        ("fineweb", "HIFIRAG_LIVE_FINEWEB", {}), ("duckduckgo", "HIFIRAG_LIVE_DDGS", {}),
        ("gemini-grounding", "GEMINI_API_KEY", {})]


@pytest.mark.live
@pytest.mark.parametrize(("name", "var", "extra"), LIVE, ids=[n for n, _, _ in LIVE])
def test_live_provider_answers_one_query(name: str, var: str, extra: dict) -> None:
    if not os.environ.get(var):
        pytest.skip(f"set {var} to query the real {name}")
    backends = {"searxng_url": os.environ[var]} if name == "searxng" else {}
    hits = build_search_provider(name, cfg_for(name, **backends)).search("python virtual environment venv", num=3)
    assert hits and all(re.match(r"https?://", h.url) for h in hits)


def test_a_run_start_warns_about_google_and_refuses_it_once_ended(caplog) -> None:
    from hifirag_core.backends.factory import check_secrets

    cfg, env = cfg_for("google"), {"GOOGLE_CSE_KEY": "k" * 10, "GOOGLE_CSE_ID": "cx"}
    with caplog.at_level("WARNING"):
        check_secrets(cfg, env, today=date(2026, 12, 4))
    assert "closed to new customers" in caplog.text
    with pytest.raises(ConfigError, match="choose one of"):
        check_secrets(cfg, env, today=date(2027, 1, 2))


def test_the_profiles_name_a_free_web_and_an_mmu_ragent_setup() -> None:
    from hifirag_core.profiles import resolve_config

    free = resolve_config(profile="free-web:qwen2.5:7b@http://127.0.0.1:11434/v1", config_file=None)
    assert (free.backends.search, free.backends.fetch, free.backends.writer_llm) == ("duckduckgo", "http", "openai")
    assert required_secrets(free) == []
    mmu = resolve_config(profile="mmu-ragent", config_file=None)
    assert (mmu.backends.search, mmu.backends.writer_llm) == ("fineweb", "gemini")
    assert required_secrets(mmu) == ["gemini_api_key"]
