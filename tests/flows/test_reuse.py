"""Never paying twice: exact cache keys, reprocess, evidence replay and the page cache.

Every case counts the calls that reach the fake Gemini, Programmable Search and Scrapingdog servers.
"""

from __future__ import annotations

import shutil

import pytest

from hifirag_core.store.warehouse import Warehouse
from tests import PROJECT_ROOT
from tests.support.sitegen import EXAMPLES

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def live(web):
    """Config overrides that send every role to the fakes."""
    return web.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog")


def _calls(web) -> dict[str, int]:
    return {**dict(web.gemini.kinds), "search": web.google.count(), "scrape": web.scrapingdog.count()}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def _computed(w: Warehouse, run_id: str) -> dict[str, int]:
    return dict(w.query("SELECT stage, count(*) FILTER (WHERE NOT cached) FROM stage_runs WHERE run_id = ? "
                        "GROUP BY stage", [run_id]).rows)


def test_a_changed_prompt_recomputes_its_stage_and_nothing_before_it(web, live, questions_file, data_root,
                                                                      run_flow, tmp_path):
    run_flow(questions_file, live)
    prompts = tmp_path / "prompts"
    shutil.copytree(PROJECT_ROOT / "prompts", prompts)
    path = prompts / "section_rank.txt"
    path.write_text(path.read_text() + "\nPrefer sections that answer the question directly.\n")
    before = _calls(web)
    changed = run_flow(questions_file, [*live, f"prompts.dir={prompts}"])
    delta = _delta(before, _calls(web))
    assert delta.get("section_rank", 0) >= 3
    for upstream in ("query_plan", "search", "url_filter", "scrape"):
        assert upstream not in delta, delta
    computed = _computed(Warehouse(data_root), changed["run_id"])
    assert computed["section_rank"] == 3
    assert all(computed[s] == 0 for s in ("query_plan", "search", "url_filter", "fetch", "sections"))


def test_changed_refine_examples_recompute_only_the_refine_pass_and_citations(web, live, questions_file,
                                                                             data_root, run_flow, tmp_path):
    run_flow(questions_file, live)
    shorter = tmp_path / "short.jsonl"
    shorter.write_text("".join(f'{{"question": "{e["question"]}", "answer": "Run tidewater doctor."}}\n'
                               for e in EXAMPLES))
    before = _calls(web)
    changed = run_flow(questions_file, [*live, f"generation.examples={shorter}"])
    delta = _delta(before, _calls(web))
    assert delta.get("refine") == 3 and set(delta) <= {"refine", "citations"}, delta
    computed = _computed(Warehouse(data_root), changed["run_id"])
    assert computed["draft"] == 0 and computed["section_rank"] == 0 and computed["refine"] == 3


def test_reprocess_from_section_rank_reuses_the_parent_and_recomputes_the_rest(web, live, questions_file,
                                                                              data_root, run_flow, tmp_path):
    from flows.environment import stage_cache_at
    from flows.reprocess import reprocess

    parent = run_flow(questions_file, live)
    prompts = tmp_path / "prompts"
    shutil.copytree(PROJECT_ROOT / "prompts", prompts)
    (prompts / "section_rank.txt").write_text((prompts / "section_rank.txt").read_text() + "\nBe strict.\n")
    before = _calls(web)
    with stage_cache_at(data_root):
        child = reprocess(run_id=parent["run_id"], from_stage="section_rank", questions=["T1", "T2"],
                          overrides=[f"prompts.dir={prompts}"], data_root=str(data_root))
    delta = _delta(before, _calls(web))
    assert delta.get("section_rank", 0) >= 2 and delta.get("draft") == 2 and delta.get("refine") == 2
    for upstream in ("query_plan", "search", "url_filter", "scrape"):
        assert upstream not in delta, delta
    w = Warehouse(data_root)
    run_id = child["run_id"]
    for table in ("questions", "query_plans", "search_results", "url_decisions", "pages", "sections",
                  "section_decisions", "drafts", "citations", "answers", "stage_runs"):
        (n,) = w.query(f"SELECT count(DISTINCT question_id) FROM {table} WHERE run_id = ?", [run_id]).rows[0]
        assert n == 3, table  # complete in every view, T3 included
    parent_id, overrides = w.query("SELECT parent_run_id, overrides_json FROM runs WHERE run_id = ?",
                                   [run_id]).rows[0]
    assert parent_id == parent["run_id"] and "prompts.dir" in overrides
    reused = dict(w.query("SELECT question_id, count(*) FILTER (WHERE source_run_id IS NOT NULL) FROM stage_runs "
                          "WHERE run_id = ? GROUP BY question_id", [run_id]).rows)
    assert reused == {"T1": 5, "T2": 5, "T3": 10}
    (paid,) = w.query("SELECT count(*) FROM llm_calls WHERE run_id = ? AND NOT cache_hit", [run_id]).rows[0]
    assert paid == sum(delta.values())


def test_evidence_replay_reads_the_other_runs_pages_byte_for_byte(web, live, questions_file, data_root, run_flow):
    first = run_flow(questions_file, live)
    before = _calls(web)
    second = run_flow(questions_file, [*live, "limits.caps=on", "url_filter.max_urls=2"], evidence_from=first["run_id"])
    delta = _delta(before, _calls(web))
    assert "search" not in delta and "scrape" not in delta and "query_plan" not in delta, delta
    w = Warehouse(data_root)
    shas = w.query("SELECT run_id, list(DISTINCT content_sha256 ORDER BY content_sha256) FROM pages "
                   "WHERE run_id IN (?, ?) GROUP BY run_id", [first["run_id"], second["run_id"]]).rows
    by_run = dict(shas)
    assert set(by_run[second["run_id"]]) <= set(by_run[first["run_id"]])
    (evidence,) = w.query("SELECT evidence_from FROM runs WHERE run_id = ?", [second["run_id"]]).rows[0]
    assert evidence == first["run_id"]


def test_a_page_is_crawled_once_within_its_age(web, live, questions_file, data_root, run_flow):
    run_flow(questions_file, live)
    scrapes = web.scrapingdog.count()
    # a cap on the model's URLs: the fetch stage runs again, but every page comes from the page cache
    changed = run_flow(questions_file, [*live, "limits.caps=on", "url_filter.max_urls=3"])
    assert web.scrapingdog.count() == scrapes
    w = Warehouse(data_root)
    sources = {s for (s,) in w.query("SELECT DISTINCT reused_from FROM pages WHERE run_id = ?",
                                     [changed["run_id"]]).rows}
    assert sources == {"page-cache"}
    stale = run_flow(questions_file, [*live, "limits.caps=on", "url_filter.max_urls=4", "fetch.max_age_hours=0"])
    assert web.scrapingdog.count() > scrapes and stale["n_answered"] == 3


def test_variants_share_the_stages_they_have_in_common(web, live, questions_file, data_root, run_flow):
    run_flow(questions_file, live, variant="rag_filters_rewrite")
    before = _calls(web)
    final = run_flow(questions_file, live, variant="final")
    delta = _delta(before, _calls(web))
    assert set(delta) <= {"refine", "citations"}, delta  # only what final adds to rag_filters_rewrite
    assert final["n_answered"] == 3


def test_the_evidence_funnel(web, live, questions_file, data_root, run_flow):
    summary = run_flow(questions_file, live)
    rows = Warehouse(data_root).query(
        "SELECT question_id, in_search_results, kept_by_url_filter, fetched, gold_section_parsed, "
        "gold_section_kept, cited FROM evidence_funnel WHERE run_id = ? ORDER BY question_id",
        [summary["run_id"]]).rows
    assert [r[0] for r in rows] == ["T1", "T2", "T3"]
    for row in rows:
        flags = list(row[1:])
        assert flags[0] is True  # the gold page is found by search on this small site
        assert flags == sorted(flags, reverse=True)  # once lost, never found again downstream


def test_stage_results_are_not_held_in_prefects_shared_memory_cache():
    # Prefect keeps in-memory results in one 1,000-entry LRU shared by a flow's threads; past 1,000
    # stage results its concurrent evictions raised KeyError on a cache hit and lost an answer.
    from hifirag_core.pipeline.specs import STAGE_NAMES
    from tasks.stage_tasks import STAGE_TASKS

    stage_tasks = list(STAGE_TASKS.values())
    assert [t.name for t in stage_tasks] == list(STAGE_NAMES)
    assert all(t.cache_key_fn is not None for t in stage_tasks)
    assert [t.name for t in stage_tasks if t.cache_result_in_memory] == []
    assert all(t.persist_result for t in stage_tasks)
