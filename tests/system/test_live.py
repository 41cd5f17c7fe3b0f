"""Live checks: one question end to end through each real service, when its keys are set.

Each test skips, naming the variables to set, unless its keys are in the environment, so a user
with keys checks their set-up in one command::

    GEMINI_API_KEY=... pytest -m live -k gemini
    pytest -m live          # every service whose keys are set

They spend a little: Gemini is held to a $0.05 budget; one Programmable Search query or two
Scrapingdog searches and a few scrapes; Reddit's API is free.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hifirag_core.secrets import SECRETS, optional_secret
from hifirag_core.store.warehouse import Warehouse
from tests.support.fakes.search_servers import GoogleSearchFake
from tests.support.fakes.web import WebHit

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("prefect_harness")]
REDDIT_THREAD = os.environ.get(
    "HIFIRAG_LIVE_REDDIT_THREAD",
    "https://www.reddit.com/r/IAmA/comments/z1c9z/i_am_barack_obama_president_of_the_united_states/")


def needs(*names: str) -> pytest.MarkDecorator:
    """Skip unless every named secret is set, saying which variables to set (decided before any fixture runs)."""
    missing = [" or ".join(SECRETS[n].env) for n in names if optional_secret(n) is None]
    return pytest.mark.skipif(bool(missing), reason=f"live check: set {', '.join(missing)} to run it")


def _ask(tmp_path: Path, question: str) -> Path:
    path = tmp_path / "live.jsonl"
    path.write_text(f'{{"iid": "L1", "query": "{question}"}}\n')
    return path


def _answered_with_citations(data_root: Path, summary: dict) -> Warehouse:
    assert summary["n_answered"] == 1, summary
    w = Warehouse(data_root)
    (sentences,) = w.query("SELECT count(*) FROM answer_sentences WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert sentences > 0
    return w


@needs("gemini_api_key")
def test_gemini_answers_a_question_with_both_model_roles(questions_file, data_root, run_flow):
    summary = run_flow(questions_file, ["backends.filter_llm=gemini", "backends.writer_llm=gemini",
                                        "limits.budget_usd=0.05"], ids=["T1"])
    w = _answered_with_citations(data_root, summary)
    rows = w.query("SELECT stage, status, tokens_in, cost_usd FROM llm_calls WHERE run_id = ?",
                   [summary["run_id"]]).rows
    assert {"query_plan", "url_filter", "section_rank", "draft", "refine", "citations"} <= {r[0] for r in rows}
    assert all(r[2] and r[3] is not None for r in rows if r[1] == "ok")
    assert summary["llm_calls_paid"] == sum(1 for r in rows if r[2] is not None)


@needs("google_cse_key", "google_cse_id")
def test_google_programmable_search_finds_pages_that_are_read_and_answered_from(tmp_path, data_root, run_flow):
    summary = run_flow(_ask(tmp_path, "What does the Python venv module do?"),
                       ["backends.search=google", "backends.fetch=http", "query_plan.max_queries=1"])
    w = _answered_with_citations(data_root, summary)
    (hits,) = w.query("SELECT count(*) FROM search_results WHERE run_id = ? AND provider = 'google' AND url IS NOT NULL",
                      [summary["run_id"]]).rows[0]
    (pages,) = w.query("SELECT count(*) FROM pages WHERE run_id = ? AND status = 'ok'", [summary["run_id"]]).rows[0]
    assert hits > 0 and pages > 0


@needs("scrapingdog_api_key")
def test_scrapingdog_searches_and_scrapes(tmp_path, data_root, run_flow):
    summary = run_flow(_ask(tmp_path, "What does the Python venv module do?"),
                       ["backends.search=scrapingdog", "backends.fetch=scrapingdog", "query_plan.max_queries=1",
                        "url_filter.max_urls=2", "fetch.max_pages=2"])
    w = _answered_with_citations(data_root, summary)
    fetchers = {f for (f,) in w.query("SELECT DISTINCT fetcher FROM pages WHERE run_id = ? AND status = 'ok'",
                                      [summary["run_id"]]).rows}
    assert fetchers == {"scrapingdog"}


@needs("reddit_client_id", "reddit_client_secret")
def test_reddit_thread_through_praw(tmp_path, data_root, run_flow, monkeypatch):
    # a search that returns the thread (the only fake here); the thread itself comes from Reddit's API
    hits = [WebHit("I am Barack Obama, President of the United States -- AMA", REDDIT_THREAD, "Ask me anything")]
    with GoogleSearchFake(search=lambda q, n: hits[:n]) as google:
        monkeypatch.setenv("GOOGLE_CSE_KEY", google.api_key)
        monkeypatch.setenv("GOOGLE_CSE_ID", google.engine_id)
        summary = run_flow(_ask(tmp_path, "What did Barack Obama answer in his Reddit AMA?"),
                           ["backends.search=google", f"backends.google_search_base_url={google.base_url}",
                            "backends.reddit=praw", "backends.fetch=local"])
    w = _answered_with_citations(data_root, summary)
    kind, fetcher = w.query("SELECT kind, fetcher FROM pages WHERE run_id = ? AND status = 'ok'",
                            [summary["run_id"]]).rows[0]
    assert (kind, fetcher) == ("reddit", "praw")
