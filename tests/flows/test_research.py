"""Looking again (the final_deep variant): the sufficiency check, follow-up rounds, their rows and cache.

The test site holds the two halves of a two-part question on two pages; with the URL filter capped at
one page, the first pass reads only one of them, the check finds the other part missing, and a
follow-up round aimed at it finds the other page.
"""

from __future__ import annotations

import json

import pytest

from hifirag_core.evidence.sufficiency import check_coverage, followup_queries, question_parts
from hifirag_core.llm.parsing import parse_sufficiency
from hifirag_core.pipeline.runner import question_steps
from hifirag_core.pipeline.specs import ROUND, STAGE_NAMES
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.types import SourceSection
from tests.support.sitegen import BASE_URL

TWO_PART = "How do I limit the bandwidth Tidewater uses during a sync, and what does error E204 mean?"
ONE_PAGE = ["url_filter.max_urls=1", "fetch.max_pages=1"]


def _questions(tmp_path, *queries: str, gold: dict[str, dict] | None = None):
    """A question file (R1, R2, ...); ``gold`` gives a question's ``gold_url`` and ``gold_anchor`` by its id."""
    path = tmp_path / "two-part.jsonl"
    rows = [{"iid": f"R{i}", "query": q, **(gold or {}).get(f"R{i}", {})} for i, q in enumerate(queries, 1)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# --- the offline check and planner ---------------------------------------------------------------------


def test_a_question_is_cut_into_the_parts_it_asks():
    assert question_parts(TWO_PART) == ["How do I limit the bandwidth Tidewater uses during a sync",
                                        "what does error E204 mean"]
    assert question_parts("Why can't lambda expressions contain statements?") == [
        "Why can't lambda expressions contain statements"]
    assert question_parts("How do I vacuum a table? What does VACUUM FULL lock?") == [
        "How do I vacuum a table", "What does VACUUM FULL lock"]
    # "and" inside a part ("list and tuple") does not cut it
    assert len(question_parts("What is the difference between a list and a tuple?")) == 1


def test_the_check_names_the_part_no_section_covers_and_the_planner_searches_for_it():
    sync = SourceSection("s1", ("Syncing folders", "Limiting bandwidth"),
                         "Use the --max-rate option to limit the bandwidth that a sync uses.")
    check = check_coverage(TWO_PART, [sync])
    assert check.verdict == "partial" and check.falls_short
    assert check.covered == ("How do I limit the bandwidth Tidewater uses during a sync",)
    # the uncovered part, then the question's keywords no section holds that the part does not name already
    assert check.missing == ("what does error E204 mean", "Tidewater")
    errors = SourceSection("s2", ("Troubleshooting", "Error E204: checksum mismatch"),
                           "Error E204 means a file changed while it was being copied.")
    assert check_coverage(TWO_PART, [sync, errors]).verdict == "sufficient"
    assert check_coverage(TWO_PART, []).verdict == "not_found"
    queries = followup_queries(TWO_PART, check.missing, [TWO_PART], 2)
    assert queries == ["what does error E204 mean", "error E204 mean"]
    # never a query searched before, whatever its case and spacing
    assert followup_queries(TWO_PART, check.missing, [TWO_PART, "What does  error E204 MEAN"], 2) == ["error E204 mean"]


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"verdict": "partial", "covered": ["bandwidth"], "missing": ["error E204"]}',
     ("partial", ["bandwidth"], ["error E204"])),
    ('```json\n{"Verdict": "Not Found", "covered": [], "missing": "error E204; bandwidth"}\n```',
     ("not_found", [], ["error E204", "bandwidth"])),
    ('Here is my check: {"verdict": "sufficient", "covered": ["a", "b"], "missing": []} Done.',
     ("sufficient", ["a", "b"], [])),
    ('{"status": "partially answered", "missing": [{"part": "error E204"}]}', ("partial", [], ["error E204"])),
])
def test_the_sufficiency_reply_is_read_tolerantly(reply, expected):
    parsed = parse_sufficiency(reply)
    assert parsed.ok and parsed.value == [expected]


def test_a_sufficient_verdict_with_parts_missing_is_partial_and_an_unknown_verdict_is_refused():
    parsed = parse_sufficiency('{"verdict": "sufficient", "covered": ["a"], "missing": ["b"]}')
    assert parsed.value == [("partial", ["a"], ["b"])] and parsed.problems
    assert not parse_sufficiency('{"verdict": "maybe", "missing": []}').ok
    assert not parse_sufficiency("The sources look fine to me.").ok
    assert not parse_sufficiency(None).ok


# --- rounds in the plain loop ----------------------------------------------------------------------------


def _runtime(data_root, variant: str, overrides: list[str]):
    from hifirag_core.config import build_config, parse_overrides
    from hifirag_core.llm.examples import ExampleSet
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.variants import variant_overrides
    from hifirag_core.pipeline.wiring import build_runtime

    cfg = build_config(variant_overrides(variant), parse_overrides(["generation.examples=none", *overrides]),
                       variant=variant)
    return build_runtime(RunContext(f"research-{variant}", str(data_root), cfg, ExampleSet("", ())))


def test_a_round_starts_only_while_the_runner_allows_it(data_root):
    rt = _runtime(data_root, "final_deep", ONE_PAGE)
    trail = Trail(Question("R1", TWO_PART, None, 1), rt)
    steps = []
    for stage, round_no in question_steps(trail, may_look_again=lambda: False):  # the deadline or the budget
        steps.append((stage.name, round_no))
        trail.record(stage.run(trail.question, stage.gather_for(trail, round_no), rt, round_no))
    assert trail.falls_short() and all(r == 0 for _, r in steps)
    assert [n for n, _ in steps] == [n for n in STAGE_NAMES if n != "followup"]


def _rounds_through_the_runner(data_root, overrides: list[str], *, spent_share: float = 0.0,
                               budget=None) -> list[tuple[str, int]]:
    """The steps of a two-part question whose first pass falls short, run by the question runner the flow
    uses (``QuestionRunner.run``, its gate ``may_look_again``), each stage in this process (no Prefect engine);
    ``spent_share``: the share of the question's deadline already gone when it starts."""
    import time

    from hifirag_core.limits import RunGuards
    from hifirag_core.pipeline.runner import QuestionRunner

    rt = _runtime(data_root, "final_deep", [*ONE_PAGE, *overrides])
    if budget is not None:
        rt.guards = RunGuards(rt.cfg.limits, budget=budget)
    runner = QuestionRunner(Question("R1", TWO_PART, None, 1), rt)
    runner.started = time.monotonic() - spent_share * rt.cfg.limits.deadline_s
    result = runner.run()  # what the flow runs, with the plain loop's execute
    steps = [(row.stage, row.round) for row in result.ledger]
    assert all(row.status != "deadline_exceeded" for row in result.ledger), "the deadline itself never passed"
    assert runner.trail.falls_short() or any(r == 1 for _, r in steps)
    return steps


def test_the_flows_runner_looks_again_only_with_deadline_left_and_budget_unspent(data_root):
    from hifirag_core.limits import Budget

    looked = _rounds_through_the_runner(data_root, [])
    assert {s for s, r in looked if r == 1} == {s.name for s in ROUND}  # it falls short, and may look again
    # 60% of the deadline gone: less than min_deadline_left (50%) is left, so no round starts
    late = _rounds_through_the_runner(data_root, ["research.min_deadline_left=0.5"], spent_share=0.6)
    assert all(r == 0 for _, r in late) and "sufficiency" in [s for s, _ in late]
    spent = Budget(tokens=100)
    spent.charge(tokens=100)
    broke = _rounds_through_the_runner(data_root, [], budget=spent)
    assert spent.exhausted and all(r == 0 for _, r in broke)
    # the same budget unspent, and 40% of the deadline gone: it looks again
    assert any(r == 1 for _, r in _rounds_through_the_runner(data_root, [], spent_share=0.4, budget=Budget(tokens=100)))


def test_the_paper_rows_never_check_or_look_again(data_root):
    rt = _runtime(data_root, "final", ONE_PAGE)
    trail = Trail(Question("R1", TWO_PART, None, 1), rt)
    names = [stage.name for stage, _ in question_steps(trail)]
    assert "sufficiency" not in names and "followup" not in names


# --- through the flow ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_a_two_part_question_looks_again_finds_the_other_page_and_cites_both(tmp_path, data_root, run_flow):
    # the gold of the part the first pass misses: the funnel says it was kept in the follow-up round
    e204 = {"gold_url": BASE_URL + "troubleshooting.html", "gold_anchor": "error-e204-checksum-mismatch"}
    questions = _questions(tmp_path, TWO_PART, "How do I limit the bandwidth Tidewater uses during a sync?",
                           gold={"R1": e204})
    summary = run_flow(questions, ONE_PAGE, variant="final_deep")
    assert summary["n_answered"] == 2 and summary["n_looked_again"] == 1 and summary["follow_up_rounds"] == 1
    w = Warehouse(data_root)
    run_id = summary["run_id"]
    rows = {qid: (rounds, before, after, queries, urls) for qid, rounds, before, after, queries, urls in w.query(
        "SELECT question_id, rounds, sufficiency_before, sufficiency_after, follow_up_queries, new_urls_kept "
        "FROM research_rounds WHERE run_id = ?", [run_id]).rows}
    assert rows["R2"][:3] == (0, "sufficient", "sufficient")  # a single-part question answered at once
    rounds, before, after, queries, urls = rows["R1"]
    assert (rounds, before, after, urls) == (1, "partial", "sufficient", 1)
    assert queries == [["what does error E204 mean", "error E204 mean"]]
    # the round's rows carry its number, in every table it wrote
    staged = w.query("SELECT stage, round FROM stage_runs WHERE run_id = ? AND question_id = 'R1' ORDER BY ALL",
                     [run_id]).rows
    assert {s for s, r in staged if r == 1} == {s.name for s in ROUND}
    (page,) = w.query("SELECT url FROM pages WHERE run_id = ? AND question_id = 'R1' AND round = 1", [run_id]).rows
    assert page == (BASE_URL + "troubleshooting.html",)
    (cited,) = w.query("SELECT cited_urls FROM answers WHERE run_id = ? AND question_id = 'R1'", [run_id]).rows[0]
    assert set(cited) == {BASE_URL + "sync.html", BASE_URL + "troubleshooting.html"}
    (funnel,) = w.query("SELECT gold_kept_round, rounds FROM evidence_funnel WHERE run_id = ?", [run_id]).rows
    assert funnel == (1, 1)
    (share, mean_rounds) = w.query("SELECT kept_in_follow_up, follow_up_rounds FROM evidence_funnel_summary "
                                   "WHERE run_id = ?", [run_id]).rows[0]
    assert (share, mean_rounds) == (1.0, 1.0)  # one question with a known gold place, found in round 1

    again = run_flow(questions, ONE_PAGE, variant="final_deep")  # every round is cached by its inputs
    assert again["stage_computations"] == 0 and again["n_looked_again"] == 1

    # the same run id again, looking again no more: round 1's rows go, from every table
    fewer = run_flow(questions, [*ONE_PAGE, "research.max_rounds=0"], variant="final_deep", run_id=run_id)
    assert fewer["run_id"] == run_id and fewer["n_looked_again"] == 0
    for table in ("stage_runs", "pages", "sections", "section_decisions", "search_results"):
        (later,) = w.query(f"SELECT count(*) FROM {table} WHERE run_id = ? AND round > 0", [run_id]).rows[0]
        assert later == 0, table
    # the gold section, kept only in round 1, is now kept in no round (the stale rows said round 1)
    assert w.query("SELECT gold_kept_round, rounds FROM evidence_funnel WHERE run_id = ?", [run_id]).rows == [(None, 0)]

    paper = run_flow(questions, ONE_PAGE, variant="final")
    (checks,) = w.query("SELECT count(*) FROM stage_runs WHERE run_id = ? AND stage IN ('sufficiency', 'followup')",
                        [paper["run_id"]]).rows[0]
    assert checks == 0 and paper["n_looked_again"] == 0


@pytest.mark.usefixtures("prefect_harness")
def test_through_the_model_fakes_a_missing_part_is_searched_with_the_models_queries(tmp_path, data_root, run_flow):
    from tests.conftest import corpus_web
    from tests.support.fakes.services import fake_services

    search, _ = corpus_web(data_root)
    with fake_services(search=search) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(llm="openai"), "backends.search=local", "backends.fetch=local",
                     "models.filter=local-small", "models.writer=local-large", "limits.caps=on", *ONE_PAGE]
        summary = run_flow(_questions(tmp_path, TWO_PART), overrides, variant="final_deep")
        kinds = fakes.openai.kinds
        assert kinds["sufficiency"] == 2 and kinds["followup"] == 1  # checked twice, looked again once
    w = Warehouse(data_root)
    (method, missing), = w.query("SELECT method, missing FROM sufficiency_checks WHERE run_id = ? AND round = 0",
                                 [summary["run_id"]]).rows
    assert method == "llm" and missing == ["what does error E204 mean"]
    (queries, method), = w.query("SELECT queries, method FROM query_plans WHERE run_id = ? AND stage = 'followup'",
                                 [summary["run_id"]]).rows
    assert queries == ["what does error E204 mean"] and method == "llm"
    (model,) = w.query("SELECT DISTINCT model FROM llm_calls WHERE run_id = ? AND stage IN ('sufficiency', 'followup')",
                       [summary["run_id"]]).rows
    assert model == ("local-small",)  # the cheap model checks and plans
    assert summary["n_looked_again"] == 1
    # the round read the page the first pass missed, and the writer wrote once over both rounds' evidence
    (page,) = w.query("SELECT url FROM pages WHERE run_id = ? AND round = 1 AND status = 'ok'", [summary["run_id"]]).rows
    assert page == (BASE_URL + "troubleshooting.html",)
    (drafts, sources), = w.query("SELECT count(*), any_value(source_urls) FROM drafts WHERE run_id = ? AND stage = 'draft'",
                                 [summary["run_id"]]).rows
    assert drafts == 1 and {BASE_URL + "sync.html", BASE_URL + "troubleshooting.html"} <= set(sources)


def test_the_stream_says_when_it_looks_again_and_why():
    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.records import QueryPlanRecord, SufficiencyRecord
    from hifirag_core.serving.answer_report import stage_step

    short = StageOutput(stage="sufficiency", records=[SufficiencyRecord(
        verdict="partial", covered=["bandwidth"], missing=["what does error E204 mean"], sections=3)])
    assert stage_step(short, {}) == ("**Sources checked**: they cover part of the question. "
                                     "Missing: what does error E204 mean.")
    plan = StageOutput(stage="followup", records=[QueryPlanRecord(queries=["error E204"])], value=["error E204"],
                       round=1)
    step = stage_step(plan, {})
    assert step.startswith("**Looking again** (round 1)") and "1. error E204" in step
    done = StageOutput(stage="sufficiency", round=1, records=[SufficiencyRecord(verdict="sufficient", sections=5)])
    assert stage_step(done, {}) == "**Sources checked** after round 1: they cover every part of the question (5 sections)."
