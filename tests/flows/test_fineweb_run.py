"""A run through MMU-RAGent's FineWeb search (its fake on 127.0.0.1): the documents arrive with their text, are
read without fetching (``pages.text_source``), are sectioned as plain text, and the funnel counts them."""

from __future__ import annotations

import pytest

from hifirag_core.store.queries import funnel_summary
from hifirag_core.store.warehouse import Warehouse
from tests.support.fakes.search_providers import MmuSearchFake
from tests.support.sitegen import BASE_URL, PAGES, QUESTIONS, write_questions

pytestmark = pytest.mark.usefixtures("prefect_harness")

FIVE = [*QUESTIONS,
        {"iid": "T4", "query": "What does Tidewater error E101 mean?",
         "reference": "Tidewater could not write to the target folder; check its permissions.",
         "gold_url": BASE_URL + "troubleshooting.html", "gold_anchor": "error-e101-permission-denied"},
        {"iid": "T5", "query": "Does Tidewater sync hidden files?",
         "reference": "No, hidden files are skipped unless you pass --include-hidden.",
         "gold_url": BASE_URL + "sync.html", "gold_anchor": "hidden-files"}]


def fineweb_text(url: str) -> str | None:
    """A page of the test site as FineWeb stores it: extracted text, no markup, headings as plain lines."""
    page = PAGES.get(url.removeprefix(BASE_URL))
    if page is None:
        return None
    title, sections = page
    return "\n\n".join([title, *(f"{heading}\n{text}" for _, heading, text in sections)])


def test_a_five_question_fineweb_run_reads_the_documents_it_was_sent(tmp_path, data_root, run_flow) -> None:
    from tests.conftest import corpus_web

    search, _ = corpus_web(data_root)
    with MmuSearchFake(search=search, text=fineweb_text) as fake:
        overrides = ["backends.search=fineweb", f"backends.base_urls.clueweb22={fake.base_url}",
                     "backends.fetch=http"]  # a URL that came without text would be fetched (none here)
        summary = run_flow(write_questions(tmp_path / "five.jsonl", FIVE), overrides)
        assert summary["n_answered"] == 5, summary
        assert fake.count() >= 5 and set(fake.indexes) == {"fineweb"}
    w = Warehouse(data_root)
    run = summary["run_id"]
    pages = w.query("SELECT fetcher, kind, text_source, status, count(*) FROM pages WHERE run_id = ? "
                    "GROUP BY ALL ORDER BY ALL", [run]).rows
    assert pages and all(row[:4] == ("fineweb", "text", "search_provider", "ok") for row in pages), pages
    (sections,) = w.query("SELECT count(*) FROM sections WHERE run_id = ? AND status = 'ok' AND anchor IS NULL",
                          [run]).rows[0]
    assert sections > 0
    cited = w.query("SELECT count(*) FROM answers WHERE run_id = ? AND len(cited_urls) > 0", [run]).rows[0][0]
    assert cited == 5
    funnel = dict(zip(funnel_summary(w, [run]).columns, funnel_summary(w, [run]).rows[0], strict=True))
    print("pages by source:", pages, "\nsections without anchors:", sections, "\nfunnel:", funnel)
    assert funnel["questions"] == 5 and funnel["in_search_results"] == 1.0 and funnel["fetched"] == 1.0
