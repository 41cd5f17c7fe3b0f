"""The documents MMU-RAGent's search sends with its results are kept under the data root
(``store/documents.py``), so a process that takes the search answers from a cache still reads their text instead
of fetching the URLs."""

from __future__ import annotations

import pytest

from hifirag_core.backends.carried import CarriedTextFetcher
from hifirag_core.backends.factory import build_search_provider
from hifirag_core.config import build_config
from hifirag_core.store.documents import DocumentStore
from hifirag_core.store.warehouse import Warehouse
from tests.flows.test_fineweb_run import FIVE, fineweb_text
from tests.support.fakes.search_providers import MmuSearchFake
from tests.support.sitegen import write_questions
from tests.unit.backends.test_search_providers import FetcherThatFails

TEXT = "Creating virtual environments\n\nThe venv module creates them."


def test_a_backend_that_never_searched_reads_the_documents_another_kept(tmp_path, make_guards) -> None:
    store = DocumentStore(tmp_path / "documents.sqlite")
    with MmuSearchFake(text=lambda url: TEXT) as fake:
        cfg = build_config(overrides={"backends": {"search": "fineweb", "base_urls": {"clueweb22": fake.base_url}}})
        searcher = build_search_provider("fineweb", cfg, guards=make_guards(cfg), env={})
        searcher.keep_in(store)
        url = searcher.search("python virtual environment", num=3)[0].url
        later = build_search_provider("fineweb", cfg, guards=make_guards(cfg), env={})
        assert later.carried(url) is None  # its own memory is empty
        later.keep_in(DocumentStore(tmp_path / "documents.sqlite"))  # another process's view of the file
        never = FetcherThatFails()
        page = CarriedTextFetcher(never, later).fetch(url)
        assert (page.status, page.text_source, page.fetcher, page.body) == ("ok", "search_provider", "fineweb",
                                                                             TEXT.encode())
        assert never.urls == [] and fake.count() == 1
        other = build_search_provider("clueweb22-b", cfg, guards=make_guards(cfg), env={"CLUEWEB_API_KEY": "k" * 12})
        other.keep_in(store)
        assert other.carried(url) is None  # kept by provider: FineWeb's text is not ClueWeb's


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_whose_searches_come_from_the_cache_reads_the_kept_documents(tmp_path, data_root, run_flow) -> None:
    from tests.conftest import corpus_web

    search, _ = corpus_web(data_root)
    questions = write_questions(tmp_path / "five.jsonl", FIVE)
    with MmuSearchFake(search=search, text=fineweb_text) as fake:
        base = ["search.providers=fineweb,local", f"backends.base_urls.clueweb22={fake.base_url}",
                "backends.fetch=http"]  # the test site's hosts do not resolve: a URL fetched would fail
        first = run_flow(questions, base)
        asked = fake.count()
        assert first["n_answered"] == 5 and asked > 0
        # the search stage computed again (another fusion constant), each FineWeb answer from the search cache;
        # the page cache too old to use, so the fetch stage must read every page again
        second = run_flow(questions, [*base, "search.rrf_k=30", "fetch.max_age_hours=0"])
        assert fake.count() == asked
    w = Warehouse(data_root)
    (cached,) = w.query("SELECT count(*) FROM search_calls WHERE run_id = ? AND provider = 'fineweb' "
                        "AND cached_answer", [second["run_id"]]).rows[0]
    assert cached > 0
    rows = w.query("SELECT fetcher, text_source, status, reused_from IS NULL, count(*) FROM pages WHERE run_id = ? "
                   "AND status <> 'excluded' GROUP BY ALL ORDER BY ALL", [second["run_id"]]).rows
    assert rows and all(r[:4] == ("fineweb", "search_provider", "ok", True) for r in rows), rows
    assert second["n_answered"] == 5

