"""``limits.overlap``: the same answers, rows and cache keys with and without it, offline and through the fakes.

With overlap on, the query plan's searches run at once, the fetch stage sections and ranks each page as it
arrives (``hifirag_core.pipeline.overlap``), and answerability's embeddings are computed while the writer
writes. None of that may change what a run stores; these tests compare whole row sets, timing columns
left out, between a run with overlap and one without, each on its own data root and stage cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hifirag_core.config import build_config
from hifirag_core.llm.examples import resolve_example_set
from hifirag_core.pipeline.plan import RunContext
from hifirag_core.pipeline.runner import run_trail
from hifirag_core.pipeline.wiring import build_runtime
from hifirag_core.questions import Question
from hifirag_core.records import content_row
from hifirag_core.store.warehouse import Warehouse
from tests.flows.test_runners import STAGE_TABLES, content, second_root

pytestmark = pytest.mark.usefixtures("prefect_harness")

# The ledger's columns that say what a stage produced and under which key (not when, or how long).
LEDGER = "SELECT question_id, stage, round, status, cached, n_rows, cache_key FROM stage_runs WHERE run_id = ? ORDER BY ALL"


def _with_overlap(questions_file: Path, data_root: Path, tmp_path: Path, examples_file: Path,
                  overrides: list[str]) -> tuple[Path, dict]:
    """The flow with overlap on a second data root (the same corpus, its own stage cache and warehouse)."""
    from flows.answer import answer_questions
    from flows.environment import stage_cache_at

    other = second_root(data_root, tmp_path / "overlap-root")
    with stage_cache_at(other):
        return other, answer_questions(questions=str(questions_file), data_root=str(other),
                                       overrides=[f"generation.examples={examples_file}", *overrides,
                                                  "limits.overlap=true"])


def _same_rows(off: tuple[Path, dict], on: tuple[Path, dict], *, paid: bool) -> None:
    (root_off, s_off), (root_on, s_on) = off, on
    assert s_off["run_id"] != s_on["run_id"]  # two runs (the setting is part of the run's config) ...
    assert s_off["stage_computations"] == s_on["stage_computations"] and s_on["cache_hits"] == 0
    for table in (*STAGE_TABLES, "answer_sentences"):
        rows = content(root_on, s_on["run_id"], table)
        assert rows or (table == "llm_calls" and not paid), table  # the offline models make no paid calls
        assert rows == content(root_off, s_off["run_id"], table), table  # ... with the same rows
    ledger_off = Warehouse(root_off).query(LEDGER, [s_off["run_id"]]).rows
    assert Warehouse(root_on).query(LEDGER, [s_on["run_id"]]).rows == ledger_off  # and the same cache keys


def test_offline_flow_stores_the_same_rows_and_keys_with_and_without_overlap(
        run_flow, questions_file, data_root, examples_file, tmp_path):
    off = (data_root, run_flow(questions_file, ["limits.overlap=false"]))
    on = _with_overlap(questions_file, data_root, tmp_path, examples_file, [])
    _same_rows(off, on, paid=False)
    cpu = Warehouse(on[0]).query("SELECT count(*), count(cpu_seconds), min(cpu_seconds) FROM stage_runs "
                                 "WHERE run_id = ? AND NOT cached", [on[1]["run_id"]]).rows[0]
    assert cpu[0] == cpu[1] and cpu[2] >= 0  # every computed stage says what CPU it took


def test_through_the_fakes_the_same_rows_and_the_same_calls_with_and_without_overlap(
        web, run_flow, questions_file, data_root, examples_file, tmp_path):
    # one question at a time: with several, whether a page shared by two questions comes from the page cache
    # depends on which fetched it first (with or without overlap)
    overrides = [*web.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
                 "limits.concurrency=1"]
    off = (data_root, run_flow(questions_file, [*overrides, "limits.overlap=false"]))
    calls_off = dict(web.gemini.kinds)
    searches, scrapes = web.google.count(), web.scrapingdog.count()
    on = _with_overlap(questions_file, data_root, tmp_path, examples_file, overrides)
    _same_rows(off, on, paid=True)
    # every paid call made once, as without overlap: no page ranked twice, no search asked twice
    assert {k: v - calls_off.get(k, 0) for k, v in web.gemini.kinds.items()} == calls_off
    assert (web.google.count() - searches, web.scrapingdog.count() - scrapes) == (searches, scrapes)


def _runtime(data_root: Path, examples_file: Path, overlap: bool, **nested):
    cfg = build_config(overrides={"limits": {"overlap": overlap}, **nested})
    ctx = RunContext(f"overlap-{overlap}", str(data_root), cfg, resolve_example_set(str(examples_file), "custom"))
    return build_runtime(ctx)


def _outputs(trail) -> dict[str, list]:
    return {stage: sorted(map(repr, (content_row(r) for r in out.records))) for stage, out in trail.outputs.items()}


def test_the_fetch_stage_leaves_sections_and_rankings_that_the_next_stages_take(web, data_root, examples_file,
                                                                               tmp_path):
    """Without Prefect: with overlap the sections and section ranking stages take every page's work from the
    fetch stage, and their outputs are what computing them gives."""
    from tests.support.sitegen import QUESTIONS

    nested = web.config_overrides(llm="gemini", search="google", fetch="scrapingdog")
    question = Question(QUESTIONS[0]["iid"], QUESTIONS[0]["query"], None, 1)
    rt_off = _runtime(data_root, examples_file, False, **nested)
    plain = run_trail(question, rt_off)
    assert rt_off.early.taken == 0 and len(rt_off.early) == 0
    ranked_off = web.gemini.kinds["section_rank"]

    # on a second root: the first run's page cache would otherwise serve its pages
    rt_on = _runtime(second_root(data_root, tmp_path / "overlap-root"), examples_file, True, **nested)
    overlapped = run_trail(question, rt_on)
    pages = [p for p in overlapped["fetch"].records if p.ok]
    ranked = {d.url for d in overlapped["section_rank"].records}
    assert pages and rt_on.early.taken == len(pages) + len(ranked)  # each page's sections, each ranking
    assert len(rt_on.early) == 0  # nothing left over
    assert web.gemini.kinds["section_rank"] - ranked_off == ranked_off  # each page ranked once
    assert _outputs(overlapped) == _outputs(plain)


def test_the_query_plans_searches_run_at_once(web, data_root, examples_file):
    """With overlap the second search is asked before the first has answered; without, after."""
    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.pipeline.stages import search as search_stage

    nested = web.config_overrides(llm="gemini", search="google", fetch="scrapingdog")
    web.google.latency = 1.0
    question = Question("q", "How do I limit the sync rate?", None, 1)
    plan = StageOutput(value=["limit sync rate", "sync max rate option", "throttle transfers"])
    for overlap in (False, True):
        before = len(web.google.requests)
        out = search_stage.search(question, plan, _runtime(data_root, examples_file, overlap, **nested))
        arrivals = sorted(r.at for r in web.google.requests[before:])
        assert len(arrivals) == 3 and [r.query_index for r in out.records if r.rank == 1] == [0, 1, 2]
        spread = arrivals[-1] - arrivals[0]
        # at once: all three asked before the first answer came; in turn: each after the one before answered
        assert (spread < 1.0) if overlap else (spread >= 2.0), (overlap, spread)
