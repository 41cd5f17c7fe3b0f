"""The command line: every command documented with an example, clear errors, warehouse queries."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from flows.cli import app
from hifirag_core.records import AnswerRecord, PageRecord, RunRecord, SectionRecord
from hifirag_core.store.warehouse import Warehouse

runner = CliRunner()


def _commands(group, prefix: str = ""):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group of subcommands
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_every_command_has_help_with_an_example():
    commands = dict(_commands(get_command(app)))
    assert {"run", "demo", "sql", "runs", "variants", "corpus build", "corpus search"} <= set(commands)
    for name, cmd in commands.items():
        assert cmd.help and "Example" in cmd.help, f"`hifirag {name}` has no example in its help"
        result = runner.invoke(app, [*name.split(), "--help"])
        assert result.exit_code == 0 and "Example" in result.output, name


def test_variants_names_the_default_and_says_why_it_does_not_abstain():
    result = runner.invoke(app, ["variants"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "final_deep_judged (default of run and serve)" in text
    assert "only once its judgment meets the transfer targets on a corpus it was not fitted on" in text
    assert "--variant final_deep abstains" in text
    run_help = " ".join(runner.invoke(app, ["run", "--help"], env={"COLUMNS": "250"}).output.split())
    assert "final_deep abstains" in run_help


def test_sql_prints_a_table_and_json(tmp_path):
    w = Warehouse(tmp_path)
    w.write("answers", [AnswerRecord(text="hello", cited_urls=["https://a"])], run_id="r1", stage="answer",
            question_id="q1")
    result = runner.invoke(app, ["sql", "SELECT question_id, text FROM answers", "--data-root", str(tmp_path)])
    assert result.exit_code == 0 and "hello" in result.output and "1 row(s)" in result.output
    result = runner.invoke(app, ["sql", "SELECT text FROM answers", "--format", "json", "--data-root", str(tmp_path)])
    assert json.loads(result.output) == [{"text": "hello"}]


def test_bad_sql_is_a_clear_error_not_a_traceback(tmp_path):
    result = runner.invoke(app, ["sql", "SELEC nonsense", "--data-root", str(tmp_path)])
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output


def test_runs_lists_runs(tmp_path):
    runner_empty = runner.invoke(app, ["runs", "--data-root", str(tmp_path)])
    assert "No runs yet" in runner_empty.output
    Warehouse(tmp_path).write("runs", [RunRecord(run_id="r1", status="finished", n_questions=3)], run_id="r1",
                              stage="run")
    result = runner.invoke(app, ["runs", "--data-root", str(tmp_path)])
    assert result.exit_code == 0 and "r1" in result.output and "finished" in result.output


def test_run_with_a_bad_file_names_the_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"query": "", "iid": "A"}\n')
    result = runner.invoke(app, ["run", str(bad), "--data-root", str(tmp_path / "data")])
    assert result.exit_code == 2 and "line 1: empty query" in result.output
    assert not (tmp_path / "data" / "tables").exists()


@pytest.mark.parametrize("args, message", [
    (["--set", "url_filter.max_url=3"], "url_filter.max_url"),
    (["--variant", "nope"], "unknown variant"),
])
def test_run_with_bad_settings_is_a_clear_error(tmp_path, questions_file, args, message):
    result = runner.invoke(app, ["run", str(questions_file), *args, "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and message in result.output


def test_corpus_search(data_root):
    result = runner.invoke(app, ["corpus", "search", "conflict newest version", "--num", "2",
                                 "--data-root", str(data_root)])
    assert result.exit_code == 0 and "https://docs.tidewater.example/sync.html" in result.output


def _cited_run(root) -> Warehouse:
    from hifirag_core.records import AnswerSentenceRecord, QuestionRecord

    w = Warehouse(root)
    w.write("runs", [RunRecord(run_id="r1", status="finished", n_questions=1, dataset="mmu_ragent")], run_id="r1",
            stage="run")
    w.write("questions", [QuestionRecord(query="How is bandwidth limited?", line_no=1)], run_id="r1", stage="input",
            question_id="q1")
    w.write("answers", [AnswerRecord(text="Use max-rate to limit it. Accounts are throttled.",
                                     cited_text="Use max-rate to limit it. [1] Accounts are throttled. [2]",
                                     cited_urls=["https://a/sync", "https://b/plans"])],
            run_id="r1", stage="answer", question_id="q1")
    w.write("answer_sentences", [
        AnswerSentenceRecord(sentence_index=0, sentence="Use max-rate to limit it.", source_indices=[2],
                             urls=["https://a/sync"], support=0.91, method="llm+support", section_ids=["s-rate"],
                             evidence=["Pass --max-rate to cap the bandwidth."], evidence_scores=[0.91]),
        AnswerSentenceRecord(sentence_index=1, sentence="Accounts are throttled.", source_indices=[1],
                             urls=["https://b/plans"], support=0.66, method="llm+marker")],
        run_id="r1", stage="citations", question_id="q1")
    w.write("pages", [PageRecord(url="https://a/sync", final_url="https://a/sync/", content_sha256="ab" * 32,
                                 fetched_at=datetime(2026, 11, 30, 9, 15, tzinfo=UTC))],
            run_id="r1", stage="fetch", question_id="q1")
    w.write("sections", [SectionRecord(url="https://a/sync", section_id="s-rate", heading_path=["Sync", "Rate limits"],
                                       text="Pass --max-rate to cap the bandwidth.")],
            run_id="r1", stage="sections", question_id="q1")
    return w


def test_answers_prints_each_sentence_with_its_citation(tmp_path):
    _cited_run(tmp_path)
    result = runner.invoke(app, ["answers", "r1", "--question", "q1", "--detail", "--data-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Use max-rate to limit it. [1] Accounts are throttled. [2]" in result.output
    assert "[1] https://a/sync" in result.output and "[2] https://b/plans" in result.output
    assert "0.91" in result.output and "llm+marker" in result.output
    # the ledger: the section and source sentence behind the first sentence, and the snapshot read
    assert "Sync > Rate limits" in result.output and "Pass --max-rate to cap the bandwidth." in result.output
    assert "abababababab 2026-11-30 09:15" in result.output and "model" in result.output
    missing = runner.invoke(app, ["answers", "r1", "--question", "nope", "--data-root", str(tmp_path)])
    assert missing.exit_code == 2 and "no question(s) nope" in missing.output


def test_export_with_citations_carries_the_markers_and_sources(tmp_path):
    _cited_run(tmp_path)
    out = tmp_path / "s.jsonl"
    plain = runner.invoke(app, ["export-mmu", "r1", "--out", str(out), "--data-root", str(tmp_path)])
    assert plain.exit_code == 0 and json.loads(out.read_text())["generated_response"] == (
        "Use max-rate to limit it. Accounts are throttled.")
    cited = runner.invoke(app, ["export-mmu", "r1", "--out", str(out), "--citations", "--data-root", str(tmp_path)])
    assert cited.exit_code == 0
    assert json.loads(out.read_text())["generated_response"] == (
        "Use max-rate to limit it. [1] Accounts are throttled. [2]\n\nSources:\n[1] https://a/sync\n[2] https://b/plans")


def test_corpus_build_from_a_manifest_and_its_errors(tmp_path, site_dir):
    manifest = tmp_path / "pages.jsonl"
    manifest.write_text(json.dumps({"path": "sync.html", "url": "https://mirror.example/sync/", "title": "Sync"}) + "\n")
    result = runner.invoke(app, ["corpus", "build", "--folder", str(site_dir), "--manifest", str(manifest),
                                 "--name", "mirror", "--data-root", str(tmp_path / "data")])
    assert result.exit_code == 0 and "1 pages" in result.output, result.output
    missing = runner.invoke(app, ["corpus", "build", "--folder", str(site_dir), "--data-root", str(tmp_path)])
    assert missing.exit_code == 2 and "--base-url" in missing.output and "--manifest" in missing.output
    alone = runner.invoke(app, ["corpus", "build", "--manifest", str(manifest), "--data-root", str(tmp_path)])
    assert alone.exit_code == 2 and "--folder" in alone.output
    manifest.write_text('{"path": "nope.html", "url": "https://mirror.example/x"}\n')
    bad = runner.invoke(app, ["corpus", "build", "--folder", str(site_dir), "--manifest", str(manifest),
                              "--data-root", str(tmp_path / "data")])
    assert bad.exit_code == 2 and "line 1: no file" in bad.output


def test_answers_shows_the_text_and_whether_the_sources_answer(tmp_path):
    from hifirag_core.records import QuestionRecord

    w = Warehouse(tmp_path)
    w.write("questions", [QuestionRecord(query="How do you make paella?", line_no=1)], run_id="r1", stage="input",
            question_id="q1")
    w.write("answers", [AnswerRecord(text="The sources I found do not answer this question.\n\nSee also:\n- A: https://a",
                                     answerability="not_found", answerability_score=0.04, abstained=True,
                                     see_also_urls=["https://a"])],
            run_id="r1", stage="answer", question_id="q1")
    w.write("runs", [RunRecord(run_id="r1", status="finished", n_questions=1, dataset="custom")], run_id="r1",
            stage="run")
    result = runner.invoke(app, ["answers", "r1", "--data-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "How do you make paella?" in result.output and "See also:" in result.output
    assert "not_found (evidence score 0.04)" in result.output and "[1]" not in result.output
