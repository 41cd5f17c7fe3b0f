"""Blocked pages and PDFs through the fetch and sections stages; per-domain health and the run's warnings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hifirag_core.backends.factory import build_fetcher
from hifirag_core.config import build_config
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import EarlyWork
from hifirag_core.pipeline.stages import fetch
from hifirag_core.pipeline.stages.sections import split_sections
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord, SectionRecord, UrlDecisionRecord
from hifirag_core.store.blobs import BlobStore
from hifirag_core.store.page_cache import PageCache
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.types import RETRYABLE_FETCH_STATUSES
from hifirag_core.web.fetch_health import domain_of, fetch_warnings
from tests import SUPPORT
from tests.conftest import corpus_web
from tests.support.fakes.search_servers import ScrapingdogFake
from tests.support.fakes.services import fake_services
from tests.support.fakes.web import WebHit, WebPage
from tests.support.pdfgen import SCAN, pdf_document

FIXTURES = SUPPORT / "fixtures" / "blocked"
CHALLENGE = (FIXTURES / "stand_in" / "cloudflare_challenge.html").read_bytes()
ARTICLE = (FIXTURES / "real" / "guide_http_403.html").read_bytes()
GUIDE_PDF = pdf_document([[("Syncing over slow links", 20), ("Limiting bandwidth", 14),
                           ("Pass --max-rate to tidewater sync, for example --max-rate 2M for two megabytes", 10),
                           ("per second; the limit applies to each transfer separately.", 10)]],
                         title="Tidewater sync guide")
QUESTION = Question("Q1", "How do I limit bandwidth?", None, 1)


def decisions(*urls: str) -> StageOutput:
    rows = [UrlDecisionRecord(url=u, title=f"page {i}", kept=True, order=i) for i, u in enumerate(urls, 1)]
    return StageOutput("url_filter", list(rows))


def runtime(tmp_path: Path, fake: ScrapingdogFake, make_guards, page_cache: PageCache | None = None):
    cfg = build_config(overrides={"backends": {"fetch": "scrapingdog", "scrapingdog_base_url": fake.base_url}})
    fetcher = build_fetcher(cfg, guards=make_guards(cfg), env={"SCRAPINGDOG_API_KEY": fake.api_key})
    return SimpleNamespace(cfg=cfg, fetcher=fetcher, blobs=BlobStore(tmp_path / "blobs"), page_cache=page_cache,
                           evidence_pages=None, evidence_run=None, reddit=None, reuse=None, early=EarlyWork())


PAGES = {
    "https://wall.example/a": WebPage(CHALLENGE),
    "https://docs.example/guide": WebPage(ARTICLE),
    "https://reports.example/guide.pdf": WebPage(GUIDE_PDF, content_type="application/pdf"),
    "https://reports.example/scan.pdf": WebPage(pdf_document([SCAN]), content_type="application/pdf"),
}


def test_a_challenge_page_is_recorded_blocked_and_never_sectioned(tmp_path, make_guards) -> None:
    with ScrapingdogFake(page=PAGES) as fake:
        rt = runtime(tmp_path, fake, make_guards)
        pages = fetch.fetch_pages(QUESTION, decisions(*PAGES), rt)
    by_url = {p.url: p for p in pages.records}
    wall = by_url["https://wall.example/a"]
    assert (wall.status, wall.block_reason, wall.content_sha256) == ("blocked", "challenge:cloudflare", None)
    assert wall.error.startswith("challenge page (cloudflare): title 'just a moment...'") and wall.n_bytes
    assert [by_url[u].status for u in list(PAGES)[1:]] == ["ok", "ok", "ok"]
    assert by_url["https://reports.example/guide.pdf"].kind == "pdf"

    sections = split_sections(QUESTION, pages, rt)
    urls = {s.url for s in sections.records}
    assert "https://wall.example/a" not in urls  # no row at all: nothing of it reaches a prompt
    pdf = [s for s in sections.records if s.url == "https://reports.example/guide.pdf"]
    assert [(s.heading_path, s.anchor, s.status) for s in pdf] == [
        (["Syncing over slow links", "Limiting bandwidth"], "page=1", "ok")]
    assert "--max-rate 2M for two megabytes per second" in pdf[0].text
    scan = [s for s in sections.records if s.url == "https://reports.example/scan.pdf"]
    assert [(s.status, s.text) for s in scan] == [("no_text_layer", None)]


def test_a_cached_page_is_judged_again_when_reused(tmp_path, make_guards) -> None:
    cache = PageCache(tmp_path / "pages.sqlite")
    blobs = BlobStore(tmp_path / "blobs")
    # stored as content by a version that did not know the shape
    cache.put(PageRecord(url="https://wall.example/a", fetcher="scrapingdog", kind="html", http_status=200,
                         content_type="text/html", content_sha256=blobs.put(CHALLENGE), n_bytes=len(CHALLENGE)))
    with ScrapingdogFake(page=PAGES) as fake:
        rt = runtime(tmp_path, fake, make_guards, page_cache=cache)
        pages = fetch.fetch_pages(QUESTION, decisions("https://wall.example/a"), rt)
        assert fake.count() == 0
    (page,) = pages.records
    assert (page.status, page.block_reason, page.reused_from) == ("blocked", "challenge:cloudflare", "page-cache")


def test_blocked_fetches_are_not_retried() -> None:
    assert "blocked" not in RETRYABLE_FETCH_STATUSES and "refused" not in RETRYABLE_FETCH_STATUSES


def page(url: str, status: str = "ok", reason: str | None = None) -> PageRecord:
    return PageRecord(url=url, status=status, block_reason=reason)


def test_warnings_name_questions_that_lost_most_fetches_and_domains_that_blocked_all() -> None:
    fetched = {
        "Q1": [page("https://www.wall.example/1", "blocked", "challenge:cloudflare"), page("https://ok.example/1"),
               page("https://slow.example/1", "timeout")],
        "Q2": [page("https://wall.example/2", "blocked", "captcha:generic"), page("https://ok.example/2")],
        "Q3": [page("https://ok.example/3"), page("https://half.example/3", "blocked", "paywall:generic"),
               page("https://half.example/4")],
        "Q4": [],
    }
    lost, walls = fetch_warnings(fetched)
    assert lost == ("1 of 4 questions lost more than half of their fetches: Q1 (2 of 3: blocked 1, timeout 1); "
                    "see the domain_health view")
    assert walls == ("1 domain(s) blocked every fetch: wall.example (2 of 2: captcha:generic, challenge:cloudflare); "
                     "their pages never reached a prompt")
    assert fetch_warnings({"Q1": [page("https://ok.example/")], "Q2": []}) == []


def test_long_lists_in_a_warning_are_cut() -> None:
    fetched = {f"Q{i}": [page(f"https://w{i}.example/", "blocked")] for i in range(8)}
    lost, walls = fetch_warnings(fetched)
    assert lost.startswith("8 of 8 questions") and "; and 3 more;" in lost
    assert walls.startswith("8 domain(s)") and "; and 3 more;" in walls


def test_domain_of() -> None:
    assert domain_of("https://WWW.Example.org:8443/a?b#c") == "example.org"
    assert domain_of("http://user@sub.example.org/") == "sub.example.org"
    assert domain_of("not a url") == ""


def test_domain_health_view(tmp_path) -> None:
    w = Warehouse(tmp_path)
    w.write("pages", [
        PageRecord(url="https://www.a.example/x", status="ok", content_sha256="aa", order=1),
        PageRecord(url="https://b.example/1", status="blocked", block_reason="challenge:cloudflare", order=2),
        PageRecord(url="https://b.example/2", final_url="https://B.example/2?x", status="blocked",
                   block_reason="captcha:generic", order=3),
        PageRecord(url="https://c.example/scan.pdf", status="ok", kind="pdf", content_sha256="bb", order=4),
        PageRecord(url="https://c.example/t", status="timeout", order=5),
    ], run_id="r1", stage="fetch", question_id="q1")
    w.write("pages", [PageRecord(url="https://a.example/y", status="ok", content_sha256="cc", order=1,
                                 reused_from="page-cache")], run_id="r1", stage="fetch", question_id="q2")
    w.write("sections", [SectionRecord(url="https://www.a.example/x", section_id="s1", text="t"),
                         SectionRecord(url="https://c.example/scan.pdf", section_id="", status="no_text_layer")],
            run_id="r1", stage="sections", question_id="q1")
    w.write("sections", [SectionRecord(url="https://a.example/y", section_id="s2", text="t")],
            run_id="r1", stage="sections", question_id="q2")
    rows = w.query("SELECT domain, fetches, questions, statuses, ok, blocked, failed, block_reasons, empty, reused, "
                   "all_blocked FROM domain_health WHERE run_id = 'r1' ORDER BY domain").rows
    assert rows == [
        ("a.example", 2, 2, {"ok": 2}, 2, 0, 0, [], 0, 1, False),
        ("b.example", 2, 1, {"blocked": 2}, 0, 2, 0, ["captcha:generic", "challenge:cloudflare"], 0, 0, True),
        ("c.example", 2, 1, {"ok": 1, "timeout": 1}, 1, 0, 1, [], 1, 0, False),
    ]


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_with_one_blocked_domain_warns_and_shows_it_in_domain_health(data_root, questions_file, run_flow):
    search, corpus_page = corpus_web(data_root)

    def mirrored_search(query: str, n: int) -> list[WebHit]:
        hits = []  # every result also on a mirror that answers with a challenge page, and a PDF guide
        for hit in search(query, n):
            hits.append(WebHit(hit.title, hit.url, hit.snippet))
            hits.append(WebHit(hit.title, hit.url.replace("docs.tidewater.example", "mirror.wall.example"),
                               hit.snippet))
        hits.insert(1, WebHit("Tidewater sync guide (PDF)", "https://files.tidewater.example/sync-guide.pdf",
                              "Limiting bandwidth: pass --max-rate to tidewater sync, for example --max-rate 2M."))
        return hits[:n]

    def page(url: str):
        if "mirror.wall.example" in url:
            return CHALLENGE
        if url.endswith(".pdf"):
            return WebPage(GUIDE_PDF, content_type="application/pdf")
        return corpus_page(url)

    with fake_services(search=mirrored_search, page=page) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(search="scrapingdog", fetch="scrapingdog"),
                     "backends.filter_llm=offline", "backends.writer_llm=offline", "backends.reddit=recorded"]
        summary = run_flow(questions_file, overrides)
    assert summary["n_answered"] == 3
    assert any("domain(s) blocked every fetch: mirror.wall.example" in note for note in summary["notes"])
    w = Warehouse(data_root)
    run_id = summary["run_id"]
    health = {row[0]: row[1:] for row in w.query(
        "SELECT domain, fetches, blocked, block_reasons, all_blocked, ok, empty FROM domain_health "
        "WHERE run_id = ?", [run_id]).rows}
    fetches, blocked, reasons, all_blocked, _, _ = health["mirror.wall.example"]
    assert fetches == blocked > 0 and reasons == ["challenge:cloudflare"] and all_blocked
    assert health["docs.tidewater.example"][3] is False and health["docs.tidewater.example"][4] > 0
    assert health["files.tidewater.example"][4:] == (health["files.tidewater.example"][0], 0)  # parsed, not empty
    (walled_sections,) = w.query("SELECT count(*) FROM sections WHERE run_id = ? AND url LIKE '%mirror.wall%'",
                                 [run_id]).rows[0]
    assert walled_sections == 0
    cited = [u for (urls,) in w.query("SELECT cited_urls FROM answers WHERE run_id = ?", [run_id]).rows for u in urls]
    assert cited and not any("mirror.wall.example" in u for u in cited)
