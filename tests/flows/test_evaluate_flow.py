"""The evaluate flow end to end on the Tidewater site: scores, report, the regression gate, the CLI,
and the MMU-RAGent submission file."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from hifirag_core.evaluation.eval_steps import RegressionDetected
from hifirag_core.evaluation.export import build_submission, check_submission
from hifirag_core.serving.contract import NO_ANSWER_RESPONSE
from hifirag_core.store.warehouse import Warehouse
from tests.support.sitegen import BASE_URL, QUESTIONS, write_questions

pytestmark = pytest.mark.usefixtures("prefect_harness")
runner = CliRunner()
FAST = ["bootstrap_resamples=500"]
# Leaving the pages that hold the answers out of the corpus: a deliberately worse system.
WORSE = f"corpus.exclude={json.dumps([BASE_URL + 'sync.html', BASE_URL + 'config.html'])}"


@pytest.fixture
def evaluate_on_site(data_root, examples_file, questions_file, tmp_path):
    """Run the evaluate flow on the test site; returns the final state."""
    from flows.environment import stage_cache_at
    from flows.eval_flow import evaluate

    def run(overrides: list[str] | None = None, variants: list[str] | None = None, **kwargs):
        with stage_cache_at(data_root):
            return evaluate(dataset=str(questions_file), variants=variants or ["final"], data_root=str(data_root),
                            overrides=[f"generation.examples={examples_file}", *(overrides or [])],
                            eval_settings=FAST, report_dir=str(tmp_path / "reports"), return_state=True, **kwargs)

    return run


def test_evaluate_scores_every_question_and_writes_a_self_contained_report(evaluate_on_site, data_root):
    state = evaluate_on_site(variants=["final", "rag"])
    assert state.is_completed()
    result = state.result()
    assert result["verdicts"] == {"final": "first", "rag": "first"}
    w = Warehouse(data_root)
    eid = result["evaluation_id"]
    rows = dict(w.query("""SELECT metric, count(*) FROM scores WHERE run_id = ? AND variant = 'final'
                           GROUP BY metric""", [eid]).rows)
    for metric in ("rouge_l_f1", "bertscore_minilm_f1", "echo_bertscore_minilm_f1", "citation_recall",
                   "answer_words", "gold_section_cited", "cost_usd", "latency_s"):
        assert rows.get(metric) == 3, metric
    assert "bertscore_deberta_f1" not in rows  # no DeBERTa folder configured: never mixed in
    (mean,) = w.query("""SELECT mean FROM evaluation_summary WHERE evaluation_id = ? AND variant = 'final'
                         AND metric = 'gold_section_cited'""", [eid]).rows[0]
    assert mean == pytest.approx(1.0)  # every Tidewater answer comes from its gold section
    (joined,) = w.query("""SELECT count(*) FROM evaluation_scores s JOIN answers a USING (run_id, question_id)
                           WHERE s.evaluation_id = ? AND s.metric = 'rouge_l_f1'""", [eid]).rows[0]
    assert joined == 6
    (latency,) = w.query("""SELECT min(value) FROM scores WHERE run_id = ? AND metric = 'latency_s'""", [eid]).rows[0]
    assert latency is not None and latency > 0

    md = result["markdown"]
    assert "| final |" in md and "| rag |" in md and "echo floor" in md
    assert re.search(r"ROUGE-L F1 .*\| BERTScore F1 \(MiniLM\)", md)
    page = Path(result["html_path"]).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    links = re.findall(r"""(?:src|href)\s*=\s*['"]?([^'" >]*)""", page, re.IGNORECASE)
    assert links and all(link.startswith("data:") for link in links)  # nothing to fetch
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) >= 4  # metrics, cost vs quality, stages, funnel
    assert all(base64.b64decode(img).startswith(b"\x89PNG") for img in images)
    assert "Questions that changed most" in page and "SELECT * FROM question_trace" in page


def test_a_worse_system_is_flagged_and_the_same_one_passes(evaluate_on_site, data_root):
    first = evaluate_on_site().result()
    assert first["verdicts"] == {"final": "first"}

    same = evaluate_on_site()
    assert same.is_completed()
    assert same.result()["verdicts"] == {"final": "passed"}
    assert same.result()["baselines"] == {"final": first["evaluation_id"]}
    # the rerun took every stage from the cache; its latency is still the time the stages took to compute
    w = Warehouse(data_root)
    latencies = w.query("SELECT run_id, min(value), count(value) FROM scores WHERE metric = 'latency_s' AND run_id IN "
                        "(?, ?) GROUP BY run_id ORDER BY run_id", [first["evaluation_id"],
                                                                   same.result()["evaluation_id"]]).rows
    assert [n for _, _, n in latencies] == [3, 3] and latencies[0][1] == latencies[1][1] > 0

    worse = evaluate_on_site(overrides=[WORSE])
    assert worse.is_failed()
    assert "gold_section_cited" in worse.message and "regressed" in worse.message
    detected = worse.result(raise_on_failure=False)
    assert isinstance(detected, RegressionDetected)
    assert detected.outcome["regressed"]["final"]
    verdict, regressed = w.query("SELECT verdict, regressed_metrics FROM evaluations WHERE run_id = ?",
                                 [detected.outcome["evaluation_id"]]).rows[0]
    assert verdict == "regressed" and "gold_section_cited" in regressed
    (high,) = w.query("""SELECT diff_high FROM evaluation_summary WHERE evaluation_id = ? AND
                         metric = 'gold_section_cited'""", [detected.outcome["evaluation_id"]]).rows[0]
    assert high < 0
    assert "REGRESSED" in detected.outcome["markdown"]

    # a regressed evaluation never becomes the baseline: the next one compares with the last passing one
    again = evaluate_on_site().result()
    assert again["verdicts"] == {"final": "passed"} and again["baselines"]["final"] == same.result()["evaluation_id"]


def test_calling_the_flow_directly_raises_the_regression(evaluate_on_site, data_root, examples_file, questions_file):
    from flows.environment import stage_cache_at
    from flows.eval_flow import evaluate

    evaluate_on_site()
    with stage_cache_at(data_root), pytest.raises(RegressionDetected, match="regressed"):
        evaluate(dataset=str(questions_file), data_root=str(data_root), eval_settings=FAST,
                 overrides=[f"generation.examples={examples_file}", WORSE])


def test_cli_eval_exits_non_zero_on_a_regression(data_root, examples_file, questions_file, tmp_path):
    args = ["eval", "--dataset", str(questions_file), "--set", f"generation.examples={examples_file}",
            "--eval-set", "bootstrap_resamples=500", "--out", str(tmp_path / "r"), "--data-root", str(data_root)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "first evaluation" in first.output and "Report:" in first.output
    worse = runner.invoke(app, [*args, "--set", WORSE])
    assert worse.exit_code == 1, worse.output
    assert "REGRESSED" in worse.output
    accepted = runner.invoke(app, [*args, "--set", WORSE, "--accept"])
    assert accepted.exit_code == 0, accepted.output
    bad = runner.invoke(app, ["eval", "--dataset", str(tmp_path / "missing.jsonl"), "--data-root", str(data_root)])
    assert bad.exit_code == 2 and "no file" in " ".join(bad.output.split())


def test_null_references_are_reported_unscorable(evaluate_on_site, data_root, questions_file):
    write_questions(questions_file, [*QUESTIONS[:2], {**QUESTIONS[2], "reference": None}])
    result = evaluate_on_site().result()
    assert "Unscorable (reference is null, not scored): T3" in result["markdown"]
    rows = Warehouse(data_root).query("""SELECT value, detail_json FROM scores WHERE run_id = ? AND question_id = 'T3'
                                         AND metric = 'rouge_l_f1'""", [result["evaluation_id"]]).rows
    assert rows == [(None, json.dumps({"unscorable": "reference is null"}))]
    (n, missing) = Warehouse(data_root).query("""SELECT n, n_missing FROM evaluation_metrics WHERE run_id = ?
                                                 AND metric = 'rouge_l_f1'""", [result["evaluation_id"]]).rows[0]
    assert (n, missing) == (2, 1)


# --- the MMU-RAGent submission file ---------------------------------------------------------------


def test_export_has_every_id_once_and_no_empty_response(run_flow, data_root, tmp_path):
    questions = write_questions(tmp_path / "q.jsonl", [
        *QUESTIONS, {"iid": "T9", "query": "zyxwv qqqqj", "reference": None}])  # nothing in the corpus matches
    summary = run_flow(questions)
    submission = build_submission(Warehouse(data_root), summary["run_id"])
    assert [line["query_id"] for line in submission.lines] == ["T1", "T2", "T3", "T9"]
    assert [q for q, _ in submission.no_answer] == ["T9"]
    assert submission.lines[3]["generated_response"] == NO_ANSWER_RESPONSE

    out = tmp_path / "submission.jsonl"
    result = runner.invoke(app, ["export-mmu", summary["run_id"], "--out", str(out), "--data-root", str(data_root)])
    assert result.exit_code == 0, result.output
    assert "1 question(s) had no answer" in result.output and "T9" in result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [set(line) for line in lines] == [{"query_id", "generated_response"}] * 4
    assert all(line["generated_response"].strip() for line in lines)
    assert check_submission(out, ["T1", "T2", "T3", "T9"]) == []
    assert "--max-rate" in lines[0]["generated_response"]

    strict = runner.invoke(app, ["export-mmu", summary["run_id"], "--out", str(tmp_path / "s.jsonl"), "--strict",
                                 "--data-root", str(data_root)])
    assert strict.exit_code == 2 and "T9" in strict.output and not (tmp_path / "s.jsonl").exists()
    missing = runner.invoke(app, ["export-mmu", "no-such-run", "--data-root", str(data_root)])
    assert missing.exit_code == 2 and "no run" in missing.output


def test_check_submission_catches_contract_breaks(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "a", "generated_response": "x"}\n{"query_id": "a", "generated_response": " "}\n'
                   '{"query_id": "b"}\nnot json\n')
    problems = check_submission(bad, ["a", "c"])
    assert any("empty response" in p for p in problems)
    assert any("appears again" in p for p in problems)
    assert any("exactly the keys" in p for p in problems)
    assert any("not JSON" in p for p in problems)
    assert any("missing ids: c" in p for p in problems)
