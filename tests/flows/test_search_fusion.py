"""Several search providers at once (reciprocal rank fusion) and the user's own folder as a provider.

The fused runs go through the real adapters (httpx) against the Programmable Search and Scrapingdog fakes on
127.0.0.1, both serving the test site, beside a folder of Markdown, text, HTML and PDF files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hifirag_core.config import ConfigError, build_config
from hifirag_core.corpus.folder import file_relpath, folder_corpus, folder_host
from hifirag_core.retrieval.fusion import reciprocal_rank_fusion, url_identity
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.types import SearchHit
from tests.support.fakes.gemini import google_error
from tests.support.fakes.server import Response
from tests.support.pdfgen import pdf_document


def hit(url: str, title: str = "") -> SearchHit:
    return SearchHit(title or url, url, f"about {url}")


# --- fusion --------------------------------------------------------------------------------------


def test_rrf_ranks_a_page_two_providers_found_above_one_only_one_ranked_first():
    fused = reciprocal_rank_fusion(
        {
            "google": [hit("https://a.example/"), hit("https://b.example/x"), hit("https://c.example/")],
            "scrapingdog": [hit("https://d.example/"), hit("https://b.example/x")],
        },
        k=60,
    )
    assert [f.hit.url for f in fused][:1] == ["https://b.example/x"]
    b = fused[0]
    assert b.found_by == (("google", 2), ("scrapingdog", 2))
    assert b.score == pytest.approx(2 / 62)
    # the rest: rank 1 of google, rank 1 of scrapingdog (the tie goes to the earlier provider), then rank 3
    assert [f.hit.url for f in fused[1:]] == [
        "https://a.example/",
        "https://d.example/",
        "https://c.example/",
    ]
    assert [f.found_by for f in fused[1:]] == [(("google", 1),), (("scrapingdog", 1),), (("google", 3),)]


def test_rrf_merges_urls_that_differ_only_in_form_and_keeps_the_best_ranked_title():
    fused = reciprocal_rank_fusion(
        {
            "google": [
                hit("https://x.example/a"),
                hit("http://www.Docs.example/guide/?b=2&a=1#part", "G title"),
            ],
            "folder": [hit("https://docs.example/guide?utm_source=feed&a=1&b=2", "F title")],
        }
    )
    assert len(fused) == 2
    guide = next(f for f in fused if "guide" in f.hit.url)
    assert guide.found_by == (("google", 2), ("folder", 1))
    assert guide.hit.title == "F title" and guide.provider == "folder"
    assert url_identity("HTTP://WWW.Example.com:443/a/?utm_medium=x#f") == "https://example.com/a"
    assert url_identity("https://example.com:8443/a") != url_identity("https://example.com/a")


def test_rrf_counts_a_provider_listing_a_page_twice_once():
    fused = reciprocal_rank_fusion({"google": [hit("https://a.example/"), hit("https://a.example/#x")]})
    assert len(fused) == 1 and fused[0].found_by == (("google", 1),)


def test_search_providers_config_takes_a_list_or_one_string():
    assert build_config(overrides={"search": {"providers": "google, scrapingdog"}}).search.providers == (
        "google",
        "scrapingdog",
    )
    assert build_config(overrides={"search": {"providers": ["local"]}}).search.providers == ("local",)
    with pytest.raises(ConfigError, match="search.folder"):
        build_config(overrides={"search": {"providers": ["folder"]}})
    with pytest.raises(ConfigError, match="twice"):
        build_config(overrides={"search": {"providers": ["google", "google"]}})
    with pytest.raises(ConfigError, match="providers"):
        build_config(overrides={"search": {"providers": ["altavista"]}})


# --- the search stage with several providers (no Prefect: the stage function itself) ---------------------


class ListProvider:
    """A provider answering from a fixed list, or raising ``error``; counts its calls."""

    def __init__(self, name: str, urls: list[str], error: Exception | None = None):
        self.provider = self.identity = name
        self.urls, self.error, self.calls = urls, error, 0

    def search(self, query: str, *, num: int, steer=None) -> list[SearchHit]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return [hit(u) for u in self.urls[:num]]


def search_stage(members, tmp_path: Path | None = None, **search):
    from types import SimpleNamespace

    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.pipeline.runtime import SearchProviders
    from hifirag_core.pipeline.stages import search as search_stage
    from hifirag_core.questions import Question
    from hifirag_core.store.search_cache import SearchCache

    cfg = build_config(overrides={"search": search, "limits": {"overlap": False}})
    cache = SearchCache(tmp_path / "searches.sqlite") if tmp_path else None
    rt = SimpleNamespace(cfg=cfg, search=SearchProviders(tuple(members)), search_cache=cache)
    plan = StageOutput(records=[], value=["q one", "q two"])
    return search_stage.search(Question(id="Q1", query="q one", reference=None, line_no=1), plan, rt)


def test_a_failing_provider_leaves_a_row_with_its_status_and_the_others_answer():
    from hifirag_core.errors import TransientError

    out = search_stage(
        [
            ListProvider("google", [], TransientError("HTTP 429", rate_limited=True)),
            ListProvider("scrapingdog", ["https://a.example/", "https://b.example/"]),
            ListProvider("folder", ["https://b.example/"]),
        ]
    )
    assert out.status == "ok"
    failed = [r for r in out.records if not r.ok]
    assert [(r.query_index, r.provider, r.status) for r in failed] == [
        (0, "google", "rate_limited"),
        (1, "google", "rate_limited"),
    ]
    first = [
        (r.rank, r.url, r.providers, r.provider_ranks) for r in out.records if r.ok and r.query_index == 0
    ]
    assert first == [
        (1, "https://b.example/", ["scrapingdog", "folder"], [2, 1]),
        (2, "https://a.example/", ["scrapingdog"], [1]),
    ]


def test_when_every_provider_fails_the_stage_fails_and_is_retried():
    from hifirag_core.errors import PermanentError, TransientError

    with pytest.raises(TransientError):
        search_stage(
            [
                ListProvider("google", [], TransientError("HTTP 500")),
                ListProvider("scrapingdog", [], TransientError("HTTP 503")),
            ]
        )
    out = search_stage(
        [
            ListProvider("google", [], PermanentError("HTTP 400")),
            ListProvider("scrapingdog", [], TransientError("HTTP 503")),
        ]
    )
    assert out.status == "failed" and len(out.records) == 4 and not any(r.ok for r in out.records)


def test_each_live_provider_is_cached_by_its_own_inputs(tmp_path):
    google = ListProvider("google", ["https://a.example/"])
    search_stage([google], tmp_path)
    scrapingdog = ListProvider("scrapingdog", ["https://b.example/"])
    out = search_stage([google, scrapingdog], tmp_path)
    assert (google.calls, scrapingdog.calls) == (2, 2)  # two queries each: google's from the first run
    assert {r.url for r in out.records} == {"https://a.example/", "https://b.example/"}
    search_stage(
        [google, scrapingdog], tmp_path, results_per_query=3
    )  # another number of results: asked again
    assert google.calls == 4
    local = ListProvider("local", ["https://c.example/"])
    search_stage([local], tmp_path)
    search_stage([local, google], tmp_path)
    assert local.calls == 4  # the local corpus is never cached: it is cheaper than the cache


# --- the folder provider --------------------------------------------------------------------------


def write_folder(folder: Path) -> Path:
    """Team notes about Tidewater in four formats."""
    (folder / "runbooks").mkdir(parents=True, exist_ok=True)
    (folder / "runbooks" / "bandwidth limits.md").write_text(
        "# Limiting the bandwidth of a Tidewater sync\n\n"
        "## Office rule\n\nTo limit the bandwidth Tidewater uses during a sync at the office, pass "
        "`--max-rate 1M`: a sync then uses at most one megabyte per second.\n",
        encoding="utf-8",
    )
    (folder / "conflicts.txt").write_text(
        "When the same file changed on both sides, our team keeps both versions.\n\n"
        "Always pass --keep-both to Tidewater so the older version is renamed, never lost.\n",
        encoding="utf-8",
    )
    (folder / "state.html").write_text(
        "<html><head><title>Where Tidewater keeps its state</title></head><body><main>"
        "<h1>Where Tidewater keeps its state</h1><h2>On the build machines</h2>"
        "<p>The environment variable TIDEWATER_HOME sets the directory where Tidewater keeps its state; on the "
        "build machines it is /srv/tidewater.</p></main></body></html>",
        encoding="utf-8",
    )
    (folder / "policy.pdf").write_bytes(
        pdf_document(
            [
                [
                    ("Tidewater retention policy", 20),
                    None,
                    (
                        "Logs of Tidewater are kept for ninety days in the directory that TIDEWATER_HOME sets.",
                        11,
                    ),
                ]
            ],
            title="Tidewater retention policy",
        )
    )
    (folder / "image.png").write_bytes(b"\x89PNG not read")
    return folder


def test_a_folder_is_searched_and_its_files_get_urls_that_do_not_depend_on_where_it_lies(tmp_path):
    from hifirag_core.backends.offline import FolderFetcher, FolderSearch

    one = folder_corpus(tmp_path / "d1", write_folder(tmp_path / "a" / "teamnotes"))
    two = folder_corpus(tmp_path / "d2", write_folder(tmp_path / "b" / "teamnotes"))
    urls = sorted(one.pages())
    assert (
        urls
        == sorted(two.pages())
        == [
            "folder://teamnotes.local/conflicts.txt",
            "folder://teamnotes.local/policy.pdf",
            "folder://teamnotes.local/runbooks/bandwidth%20limits.md",
            "folder://teamnotes.local/state.html",
        ]
    )
    assert file_relpath(urls[2]) == "runbooks/bandwidth limits.md"
    search = FolderSearch(one.index())
    top = search.search("limit the bandwidth of a sync", num=3)
    assert top[0].url.endswith("bandwidth%20limits.md") and "max-rate" in top[0].snippet
    assert one.page(urls[1]).title == "Tidewater retention policy" and "ninety days" in one.page(urls[1]).text
    assert one.page(urls[0]).title == "conflicts.txt"  # no heading: one section under the file's name
    fetched = FolderFetcher(one.index(), one.blobs).fetch(urls[3])
    assert fetched.status == "ok" and fetched.fetcher == "folder" and b"/srv/tidewater" in fetched.body
    # the folder is one host for the site rules
    assert search.search("Tidewater", num=9, steer=_steer(exclude=["teamnotes.local"])) == []
    assert len(search.search("Tidewater", num=9, steer=_steer(sites=["teamnotes.local"]))) == 4
    assert folder_host(tmp_path / "My Notes!") == "my-notes.local"


def test_a_changed_folder_is_indexed_again(tmp_path):
    folder = write_folder(tmp_path / "teamnotes")
    first = folder_corpus(tmp_path / "data", folder).fingerprint
    assert folder_corpus(tmp_path / "data", folder).fingerprint == first
    (folder / "new.md").write_text("# Mirrors\n\nTidewater mirrors run at night.\n", encoding="utf-8")
    again = folder_corpus(tmp_path / "data", folder)
    assert "folder://teamnotes.local/new.md" in again.pages() and again.fingerprint != first


def _steer(sites: list[str] | None = None, exclude: list[str] | None = None):
    from hifirag_core.types import SearchSteer

    return SearchSteer(SiteRules.of(sites or [], exclude or []), DateWindow())


# --- whole runs through the fakes -----------------------------------------------------------------


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / "teamnotes")


def providers_run(web, folder: Path, providers: str, *more: str) -> list[str]:
    return [
        *web.config_overrides_pairs(llm="offline", search="google", fetch="scrapingdog", reddit="recorded"),
        f"search.providers={providers}",
        f"search.folder={folder}",
        "limits.retry_base_delay_s=0.01",
        "limits.retries=1",
        *more,
    ]


@pytest.mark.usefixtures("prefect_harness")
def test_google_scrapingdog_and_a_folder_fused_in_one_run(web, folder, questions_file, data_root, run_flow):
    summary = run_flow(questions_file, providers_run(web, folder, "google,scrapingdog,folder"))
    assert summary["n_answered"] == 3, summary
    w, run_id = Warehouse(data_root), summary["run_id"]
    # the two web providers found the same pages: one row each, with both providers' ranks
    both = w.query(
        "SELECT count(*) FROM search_results WHERE run_id = ? AND len(providers) = 2 "
        "AND list_sort(providers) = ['google', 'scrapingdog']",
        [run_id],
    ).rows[0][0]
    assert both > 0
    ranks = w.query(
        "SELECT p, r FROM (SELECT unnest(providers) AS p, unnest(provider_ranks) AS r "
        "FROM search_results WHERE run_id = ? AND status = 'ok')",
        [run_id],
    ).rows
    assert {p for p, _ in ranks} == {"google", "scrapingdog", "folder"} and all(r >= 1 for _, r in ranks)
    (dupes,) = w.query(
        "SELECT count(*) - count(DISTINCT (question_id, query_index, url)) FROM search_results "
        "WHERE run_id = ? AND status = 'ok'",
        [run_id],
    ).rows[0]
    assert dupes == 0
    cited = {
        u
        for (u,) in w.query(
            "SELECT DISTINCT url FROM citations WHERE run_id = ? AND url IS NOT NULL", [run_id]
        ).rows
    }
    assert any(u.startswith("folder://teamnotes.local/") for u in cited), cited
    assert any(u.startswith("https://docs.tidewater.example/") for u in cited), cited
    fetchers = {
        f
        for (f,) in w.query(
            "SELECT DISTINCT fetcher FROM pages WHERE run_id = ? AND status = 'ok'", [run_id]
        ).rows
    }
    assert fetchers == {"folder", "scrapingdog"}
    # every provider asked every query once, and the paid one's calls are the run's search cost
    asked = dict(w.query(
        "SELECT provider, count(*) FROM search_calls WHERE run_id = ? AND status = 'ok' GROUP BY provider", [run_id]
    ).rows)
    (queries,) = w.query("SELECT count(DISTINCT (question_id, query)) FROM search_results WHERE run_id = ?",
                         [run_id]).rows[0]
    assert asked == {"google": queries, "scrapingdog": queries, "folder": queries}, (asked, queries)
    (cost, searched) = w.query(
        "SELECT sum(search_cost_usd), sum(search_calls_asked) FROM stage_costs WHERE run_id = ?", [run_id]
    ).rows[0]
    assert cost == pytest.approx(0.005 * queries) and searched == 3 * queries
    assert summary["cost_usd"] == pytest.approx(cost) and summary["search_calls"] == 3 * queries


@pytest.mark.usefixtures("prefect_harness")
def test_a_provider_failing_mid_run_leaves_answers_from_the_others_and_its_failure_rows(
    web, folder, questions_file, data_root, run_flow
):
    web.google.fail_after_first(
        "/customsearch",
        too_many=Response(429, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded")),
        error=Response(500, google_error(500, "INTERNAL", "Backend Error")),
    )
    summary = run_flow(
        questions_file,
        providers_run(
            web, folder, "google,scrapingdog,folder", "limits.concurrency=1", "limits.overlap=false"
        ),
    )
    assert summary["n_answered"] == 3, summary
    w, run_id = Warehouse(data_root), summary["run_id"]
    rows = w.query(
        "SELECT status, error FROM search_results WHERE run_id = ? AND provider = 'google' "
        "AND status <> 'ok'",
        [run_id],
    ).rows
    assert rows and all(s == "failed" and "500" in e for s, e in rows), rows
    assert web.google.count(lambda r: r.path.startswith("/customsearch")) == 1 + 2 * len(rows)
    calls = w.query(
        "SELECT status, attempts, rate_limited, backoff_s, cost_usd FROM search_calls WHERE run_id = ? "
        "AND provider = 'google' ORDER BY started_at",
        [run_id],
    ).rows
    assert calls[0] == ("ok", 1, 0, 0.0, pytest.approx(0.005)), calls  # the first search was paid for
    # each later call met a 429, backed off, and met a 500 on its retry: no charge
    assert [c[:3] for c in calls[1:]] == [("failed", 2, 1)] * len(rows), calls
    assert all(c[3] > 0 and c[4] is None for c in calls[1:]), calls
    (google_ok,) = w.query(
        "SELECT count(*) FROM search_results WHERE run_id = ? AND status = 'ok' "
        "AND list_contains(providers, 'google')",
        [run_id],
    ).rows[0]
    assert google_ok > 0  # the first search, before the failures began
    (answered,) = w.query(
        "SELECT count(*) FROM answers a WHERE a.run_id = ? AND a.status = 'ok' AND EXISTS (SELECT 1 FROM "
        "search_results s WHERE s.run_id = a.run_id AND s.question_id = a.question_id AND s.provider = 'google' "
        "AND s.status <> 'ok')",
        [run_id],
    ).rows[0]
    assert answered >= 2
    (stage_failed,) = w.query(
        "SELECT count(*) FROM stage_runs WHERE run_id = ? AND stage = 'search' AND status <> 'ok'", [run_id]
    ).rows[0]
    assert stage_failed == 0


@pytest.mark.usefixtures("prefect_harness")
def test_adding_a_provider_asks_only_the_new_one(web, folder, questions_file, data_root, run_flow):
    first = run_flow(questions_file, providers_run(web, folder, "scrapingdog,folder"))
    assert first["n_answered"] == 3
    searches = web.scrapingdog.count(lambda r: r.path.startswith("/google"))
    assert searches > 0 and web.google.count() == 0
    second = run_flow(questions_file, providers_run(web, folder, "google,scrapingdog,folder"))
    assert second["n_answered"] == 3
    assert web.scrapingdog.count(lambda r: r.path.startswith("/google")) == searches
    assert web.google.count() > 0


@pytest.mark.usefixtures("prefect_harness")
def test_site_rules_treat_the_folder_as_one_host(web, folder, questions_file, data_root, run_flow):
    w = Warehouse(data_root)
    only = run_flow(
        questions_file, providers_run(web, folder, "google,folder", 'steer.sites=["teamnotes.local"]')
    )
    urls = {
        u
        for (u,) in w.query("SELECT url FROM pages WHERE run_id = ? AND status = 'ok'", [only["run_id"]]).rows
    }
    assert urls and all(u.startswith("folder://teamnotes.local/") for u in urls), urls
    without = run_flow(
        questions_file, providers_run(web, folder, "google,folder", 'steer.exclude_sites=["teamnotes.local"]')
    )
    rows = w.query(
        "SELECT url FROM search_results WHERE run_id = ? AND status = 'ok'", [without["run_id"]]
    ).rows
    assert rows and not any(u.startswith("folder://") for (u,) in rows)
    assert without["n_answered"] == 3
