"""The whole flow through the real client libraries (google-genai, httpx), against fakes on 127.0.0.1.

The fake search and scrape servers serve the test site's corpus, so the run behaves like a web run
with Gemini, Programmable Search and Scrapingdog, and every call that would cost money is counted.
"""

from __future__ import annotations

import pytest

from hifirag_core.store.warehouse import Warehouse
from tests.conftest import corpus_web
from tests.support.fakes.services import fake_services

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_gemini_google_scrapingdog_end_to_end_and_nothing_paid_twice(web, questions_file, data_root, run_flow):
    overrides = web.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog")
    summary = run_flow(questions_file, overrides)
    assert summary["n_answered"] == 3, summary
    kinds = dict(web.gemini.kinds)
    assert kinds["query_plan"] == kinds["url_filter"] == kinds["draft"] == kinds["refine"] == 3
    assert kinds["citations"] == 3 and kinds["section_rank"] >= 3
    assert web.gemini.models["gemini-2.5-flash"] == sum(kinds[k] for k in ("query_plan", "url_filter",
                                                                           "section_rank", "citations"))
    assert web.gemini.models["gemini-2.5-pro"] == 6
    w = Warehouse(data_root)
    run_id = summary["run_id"]
    (paid, cost, tokens) = w.query("SELECT count(*), sum(cost_usd), sum(tokens_in) FROM llm_calls "
                                   "WHERE run_id = ? AND NOT cache_hit", [run_id]).rows[0]
    assert paid == sum(kinds.values()) == summary["llm_calls_paid"]
    assert cost > 0 and tokens > 0
    searches, scrapes = web.google.count(), web.scrapingdog.count()
    assert searches >= 3 and scrapes >= 3

    again = run_flow(questions_file, overrides)
    assert again["llm_calls_paid"] == 0 and again["stage_computations"] == 0
    assert dict(web.gemini.kinds) == kinds
    assert (web.google.count(), web.scrapingdog.count()) == (searches, scrapes)
    (reused,) = w.query("SELECT count(*) FROM llm_calls WHERE run_id = ? AND cache_hit", [run_id]).rows[0]
    assert reused == paid


def test_openai_compatible_writer_with_reasoning_tags(data_root, questions_file, run_flow):
    search, _ = corpus_web(data_root)
    with fake_services(search=search, openai_think=True) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(llm="openai"), "backends.search=local", "backends.fetch=local",
                     "models.filter=local-small", "models.writer=local-large"]
        summary = run_flow(questions_file, overrides)
        assert summary["n_answered"] == 3
        texts = Warehouse(data_root).query("SELECT text FROM answers WHERE run_id = ?", [summary["run_id"]]).rows
        assert all("<think>" not in t for (t,) in texts)
        assert fakes.openai.count() > 0


def test_a_missing_key_names_the_variable_before_anything_runs(data_root, questions_file, run_flow, monkeypatch):
    from hifirag_core.errors import MissingSecretError

    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(MissingSecretError, match="GEMINI_API_KEY"):
        run_flow(questions_file, ["backends.writer_llm=gemini"])
    assert not (data_root / "tables").exists()


def test_a_spent_budget_stops_paying_and_the_run_finishes_and_says_so(web, questions_file, data_root, run_flow):
    overrides = [*web.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
                 "limits.budget_usd=0.0001", "limits.concurrency=1"]
    summary = run_flow(questions_file, overrides)
    assert any("budget was spent" in note for note in summary["notes"])
    w = Warehouse(data_root)
    statuses = dict(w.query("SELECT status, count(*) FROM llm_calls WHERE run_id = ? GROUP BY status",
                            [summary["run_id"]]).rows)
    assert statuses.get("budget_exceeded", 0) > 0
    calls_made = sum(web.gemini.kinds.values())
    assert calls_made < 3 * 6  # later paid calls never reached the server
    (n,) = w.query("SELECT count(*) FROM stage_runs WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert n == 30  # every question still has a row for every stage


def test_an_llm_writer_without_markers_gets_per_sentence_citations_and_citation_recall(data_root, questions_file,
                                                                                       run_flow):
    import re

    from hifirag_core.evaluation.answer_scoring import (
        embedding_similarity,
        load_answers,
        load_source_texts,
        score_questions,
    )
    from hifirag_core.evaluation.compare import by_metric
    from hifirag_core.retrieval.embeddings import Embedder

    search, _ = corpus_web(data_root)
    with fake_services(search=search) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(llm="openai"), "backends.search=local", "backends.fetch=local"]
        summary = run_flow(questions_file, overrides)
    w = Warehouse(data_root)
    run_id = summary["run_id"]
    drafts = [t for (t,) in w.query("SELECT text FROM drafts WHERE run_id = ? AND text IS NOT NULL", [run_id]).rows]
    assert drafts and not any(re.search(r"\[\d+\]", t) for t in drafts)  # the paper's prompts ask for no markers
    rows = w.query("SELECT method, urls FROM answer_sentences WHERE run_id = ?", [run_id]).rows
    assert rows and any(urls for _, urls in rows) and all(m.startswith("llm") for m, _ in rows)
    cited = w.query("SELECT cited_text FROM answers WHERE run_id = ? AND cited_text LIKE '%[1]%'", [run_id]).rows
    assert cited  # the answer the user reads carries the citation stage's markers
    questions = load_answers(w, run_id)
    scored = score_questions(questions, variant="final", dataset="test", spec=None,
                             similarity=embedding_similarity(Embedder(data_root / "cache" / "vectors.sqlite").encode),
                             support_threshold=0.42, source_texts=load_source_texts(w, run_id), known_item=None,
                             costs={}, latencies={}, echo={})
    recall = [v for v in by_metric(scored.records)["citation_recall"].values() if v is not None]
    assert recall and sum(recall) / len(recall) > 0.5


def test_a_run_against_a_server_that_is_not_there_says_why_and_pays_nothing(questions_file, data_root, run_flow):
    from tests.support.llama_server import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    summary = run_flow(questions_file, ["backends.filter_llm=openai", "backends.writer_llm=openai",
                                        f"models.openai_base_url={dead}", "models.openai_api_key_optional=true",
                                        "limits.retries=0"])
    assert (summary["n_answered"], summary["n_failed"], summary["llm_calls_paid"]) == (0, 3, 0)
    assert summary["llm_calls_unbilled"] > 0
    (reason, n), = summary["unanswered"].items()
    assert n == 3 and reason.startswith("draft failed: openai: connection error")
    assert summary["backend_errors"] == {"openai gemini-2.5-flash: failed": summary["llm_calls_unbilled"] - 3,
                                         "openai gemini-2.5-pro: failed": 3}
    assert any(note.startswith("3 question(s) without an answer: draft failed") for note in summary["notes"])
    costs = Warehouse(data_root).query("SELECT sum(llm_calls_paid), sum(llm_calls_unbilled) FROM stage_costs "
                                       "WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert costs == (0, summary["llm_calls_unbilled"])
