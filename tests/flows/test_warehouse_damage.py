"""A damaged warehouse: a cut-short or deleted file stops nothing, says so, and comes back from the stage cache;
a full disk is one clear error (issue 42)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.cli.common import EXIT_INCOMPLETE
from hifirag_core.pipeline.repair import STAGE_TABLES
from hifirag_core.pipeline.repair import check as find_damage
from hifirag_core.records import AnswerRecord, RunRecord, SectionRecord
from hifirag_core.store.disk import DiskFullError, ensure_free, free_mb, is_disk_full
from hifirag_core.store.integrity import deep_problem, footer_problem
from hifirag_core.store.warehouse import COMPACTED, MISSING, Warehouse, WarehouseError

runner = CliRunner()


def _finished_run(w: Warehouse, run_id: str, answers: list[str]) -> None:
    w.write("runs", [RunRecord(status="finished", variant="final")], run_id=run_id, stage="run")
    for n, text in enumerate(answers):
        w.write("answers", [AnswerRecord(text=text)], run_id=run_id, stage="answer", question_id=f"q{n}")
        w.write(
            "sections",
            [SectionRecord(url="https://a", heading=text)],
            run_id=run_id,
            stage="sections",
            question_id=f"q{n}",
        )
    w.compact_run(run_id)


def _truncate(path: Path, size: int = 200) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


@pytest.fixture
def two_runs(tmp_path) -> Warehouse:
    w = Warehouse(tmp_path)
    _finished_run(w, "old", ["a1", "a2"])
    _finished_run(w, "new", ["b1"])
    return w


def test_a_truncated_file_is_skipped_and_named_by_every_query_that_reads_its_table(two_runs):
    bad = two_runs.partition("answers", "old") / COMPACTED
    _truncate(bad)
    result = two_runs.query("SELECT run_id, text FROM answers ORDER BY text")
    assert result.rows == [("new", "b1")]
    assert [(d.path, d.table, d.run_id) for d in result.skipped] == [(bad, "answers", "old")]
    assert not result.complete
    # a query that reads no damaged table is complete; one through a view that reads it is not
    assert two_runs.query("SELECT count(*) FROM sections").complete
    assert two_runs.query("SELECT count(*) FROM runs").complete
    assert not two_runs.query("SELECT count(*) FROM question_trace").complete


def test_a_deleted_file_makes_the_queries_of_its_table_incomplete(two_runs):
    part = two_runs.partition("sections", "old")
    (part / COMPACTED).unlink()
    result = two_runs.query("SELECT count(*) FROM sections")
    assert [(d.table, d.run_id, d.reason) for d in result.skipped] == [("sections", "old", MISSING)]
    assert [(d.table, d.run_id) for d in find_damage(two_runs)] == [("sections", "old")]
    assert two_runs.query("SELECT count(*) FROM answers").complete


def test_a_partition_written_before_the_mark_is_marked_when_seen_and_its_deletion_then_found(two_runs):
    part = two_runs.partition("sections", "old")
    (part / ".written").unlink()  # as an older version wrote it
    assert two_runs.query("SELECT count(*) FROM sections").complete and (part / ".written").exists()
    (part / COMPACTED).unlink()
    assert [d.reason for d in two_runs.query("SELECT count(*) FROM sections").skipped] == [MISSING]


def test_a_partition_whose_first_write_failed_lost_nothing(two_runs, monkeypatch):
    def no_space(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("pyarrow.parquet.write_table", no_space)
    with pytest.raises(DiskFullError):
        two_runs.write("answers", [AnswerRecord(text="x")], run_id="stopped", stage="answer", question_id="q0")
    monkeypatch.undo()
    assert two_runs.partition("answers", "stopped").is_dir()  # made, and empty
    assert two_runs.query("SELECT count(*) FROM answers").complete
    assert find_damage(two_runs) == []
    # a run that emptied a partition on purpose (fewer follow-up rounds on a rerun) lost nothing either
    two_runs.write("query_plans", [], run_id="rounds", stage="followup", question_id="q0", round=1)
    assert two_runs.drop_rounds_after("rounds", "q0", 0, ["followup"]) == 1
    assert two_runs.query("SELECT count(*) FROM query_plans").complete and find_damage(two_runs) == []


def test_damage_in_another_run_never_blocks_a_new_run(two_runs):
    _truncate(two_runs.partition("answers", "old") / COMPACTED)
    _finished_run(two_runs, "third", ["c1"])  # writes, compacts: its own partitions only
    two_runs.refresh_duckdb_file()
    assert two_runs.query("SELECT text FROM answers WHERE run_id = 'third'").rows == [("c1",)]
    # the run whose file is damaged refuses to write over it, and names the repair
    with pytest.raises(WarehouseError, match="hifirag warehouse check --repair --run old"):
        two_runs.write("answers", [AnswerRecord(text="x")], run_id="old", stage="answer", question_id="q0")


def test_a_file_damaged_past_its_footer_is_found_when_read_and_by_the_deep_check(two_runs):
    bad = two_runs.partition("sections", "old") / COMPACTED
    data = bytearray(bad.read_bytes())
    middle = len(data) // 3
    data[middle - 40 : middle + 40] = b"\x00" * 80  # pages overwritten, footer intact
    bad.write_bytes(bytes(data))
    assert footer_problem(bad) is None
    assert deep_problem(bad) is not None
    assert [d.path for d in find_damage(two_runs, deep=True)] == [bad]


def test_the_cli_prints_the_rows_then_one_line_per_skipped_file_and_exits_incomplete(two_runs):
    _truncate(two_runs.partition("answers", "old") / COMPACTED)
    root = str(two_runs.root)
    result = runner.invoke(
        app, ["sql", "SELECT run_id, text FROM answers", "--format", "csv", "--data-root", root]
    )
    assert result.exit_code == EXIT_INCOMPLETE, result.output
    assert "new,b1" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "INCOMPLETE: skipped tables/answers/run_id=old/_compacted.parquet"
    )
    assert "hifirag warehouse check --repair --run old" in lines[0]
    ok = runner.invoke(app, ["runs", "--data-root", root])
    assert ok.exit_code == 0 and "new" in ok.stdout and "INCOMPLETE" not in ok.stderr


def test_check_lists_a_truncated_and_a_deleted_file_and_repair_quarantines_never_deletes(two_runs):
    truncated = two_runs.partition("answers", "old") / COMPACTED
    deleted = two_runs.partition("sections", "new") / COMPACTED
    _truncate(truncated)
    original = truncated.read_bytes()
    deleted.unlink()
    root = str(two_runs.root)
    found = runner.invoke(app, ["warehouse", "check", "--data-root", root])
    assert found.exit_code == EXIT_INCOMPLETE
    assert "tables/answers/run_id=old/_compacted.parquet" in found.stdout
    assert "tables/sections/run_id=new/_compacted.parquet" in found.stdout and "missing" in found.stdout
    repaired = runner.invoke(app, ["warehouse", "check", "--repair", "--run", "old", "--data-root", root])
    moved = list((two_runs.root / "quarantine").rglob("_compacted.parquet"))
    assert [p.read_bytes() for p in moved] == [original]
    assert moved[0].relative_to(two_runs.root / "quarantine").parts[1:] == (
        "answers",
        "run_id=old",
        COMPACTED,
    )
    # no stage_runs rows here, so nothing says which cached stages made them: the command says what to run
    assert repaired.exit_code == EXIT_INCOMPLETE and "--run-id old" in repaired.stderr
    # the file is out of the tables, its rows not back: the queries say so (missing), the damaged file is gone
    result = two_runs.query("SELECT count(*) FROM answers")
    assert [(d.run_id, d.reason) for d in result.skipped] == [("old", MISSING)]


def test_every_stage_table_is_rebuilt_by_the_stages_that_write_it():
    assert STAGE_TABLES["answers"] == ("answer",)
    assert STAGE_TABLES["query_plans"] == ("query_plan", "followup")
    assert STAGE_TABLES["drafts"] == ("draft", "refine")


# --- the whole pipeline: rows before the damage equal the rows after the repair ------------------------------


def _dump(w: Warehouse, run_id: str) -> dict[str, list]:
    tables = [*STAGE_TABLES, "llm_calls"]
    return {
        t: sorted(map(repr, w.query(f"SELECT * FROM {t} WHERE run_id = ?", [run_id]).rows)) for t in tables
    }


def test_a_run_with_a_truncated_and_a_deleted_file_comes_back_equal_from_the_stage_cache(
    prefect_harness, run_flow, data_root, questions_file, tmp_path
):
    from flows.stage_cache import cached_outputs
    from hifirag_core.pipeline.repair import repair
    from tests.support.sitegen import QUESTIONS, write_questions

    first = run_flow(questions_file, run_id="damaged")
    w = Warehouse(data_root)
    before = _dump(w, "damaged")
    assert before["answers"] and before["sections"]  # offline models make no llm_calls rows
    truncated = w.partition("answers", "damaged") / COMPACTED
    deleted = w.partition("sections", "damaged") / COMPACTED
    _truncate(truncated, 2000 if truncated.stat().st_size > 2000 else 100)
    deleted.unlink()

    # another run over other questions is not stopped, and reads as finished
    other = write_questions(tmp_path / "other.jsonl", QUESTIONS[:1])
    assert run_flow(other, run_id="another")["status"] == "finished"
    result = w.query("SELECT count(*) FROM answers")
    assert [d.path for d in result.skipped] == [truncated]

    found = find_damage(w, "damaged")
    assert {(d.table, d.path) for d in found} == {("answers", truncated), ("sections", deleted)}
    report = repair(w, found, cached_outputs(data_root))
    assert report.repaired, report.todo
    assert [src for src, _ in report.moved] == [truncated]
    assert report.rebuilt[("damaged", "answers")] == len(before["answers"])
    assert report.rebuilt[("damaged", "sections")] == len(before["sections"])
    assert _dump(w, "damaged") == before
    assert find_damage(w) == []
    assert first["n_questions"] == len(before["answers"])


def test_what_the_stage_cache_no_longer_holds_is_named_with_the_reprocess_that_computes_it(
    prefect_harness, run_flow, data_root, questions_file
):
    from flows.environment import results_path
    from flows.stage_cache import cached_outputs
    from hifirag_core.pipeline.repair import repair

    run_flow(questions_file, run_id="gone")
    w = Warehouse(data_root)
    keys = [
        k
        for (k,) in w.query(
            "SELECT cache_key FROM stage_runs WHERE run_id = 'gone' AND stage = 'answer'"
        ).rows
    ]
    for key in keys:
        (results_path(data_root) / key).unlink()
    (w.partition("answers", "gone") / COMPACTED).unlink()
    report = repair(w, find_damage(w, "gone"), cached_outputs(data_root))
    assert not report.repaired
    assert "hifirag reprocess gone --from answer --questions" in report.todo[0]


# --- a full disk ----------------------------------------------------------------------------------------------


def test_the_free_space_floor_stops_a_run_before_it_writes(tmp_path):
    with pytest.raises(DiskFullError) as caught:
        ensure_free(tmp_path, free_mb(tmp_path) + 10_000)
    message = str(caught.value)
    assert str(tmp_path) in message and "MB free" in message and "limits.min_free_mb" in message
    assert "\n" not in message and "the same command again" in message
    assert is_disk_full(caught.value) and is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    ensure_free(tmp_path, 0)  # 0: never checked


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, mounted as root; skipped where mounting is not allowed."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-limited tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_write_that_finds_the_disk_full_leaves_nothing_half_written(small_disk):
    import pyarrow as pa

    w = Warehouse(small_disk)
    w.write("answers", [AnswerRecord(text="kept")], run_id="r", stage="answer", question_id="q0")
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"\0" * 65536)
    big = pa.table({"x": [os.urandom(64).hex() * 64 for _ in range(2000)]})
    with pytest.raises(DiskFullError) as caught:
        Warehouse._atomic_write(big, w.partition("answers", "r") / "big.parquet")
    assert str(small_disk / "tables" / "answers" / "run_id=r") in str(caught.value)
    assert "nothing half-written is visible" in str(caught.value)
    part = w.partition("answers", "r")
    assert sorted(p.name for p in part.iterdir() if p.name not in (".lock", ".written")) == [
        w.key_path("answers", "r", "answer", "q0").name
    ]  # no temporary file, no half file
    assert w.query("SELECT text FROM answers").rows == [("kept",)]


def test_the_service_answers_503_with_the_reason_below_its_floor_and_stays_healthy(tmp_path):
    from starlette.testclient import TestClient

    from hifirag_core.serving.app import create_app
    from hifirag_core.serving.service import Service
    from hifirag_core.serving.settings import ServiceSettings

    class NoAnswerer:
        def warm_up(self, plan) -> None:
            pass

        def answer(self, question, plan, observer):
            raise AssertionError("a service whose disk is full takes no question")

    floor = f"limits.min_free_mb={free_mb(tmp_path) + 10_000:.0f}"
    client = TestClient(
        create_app(Service(ServiceSettings(data_root=tmp_path, overrides=(floor,)), NoAnswerer())),
        base_url="http://127.0.0.1",  # a Host the service answers to (its access guard refuses others with 421)
    )
    for path, body in (("/run", {"question": "How?"}), ("/evaluate", {"query": "How?", "iid": "1"})):
        reply = client.post(path, json=body)
        assert reply.status_code == 503 and reply.headers["Retry-After"] == "60", path
        assert "disk is full" in reply.json()["error"] and "MB free" in reply.json()["error"]
    assert client.get("/health").status_code == 200


def test_a_service_whose_disk_fills_mid_question_says_so_answers_503_stays_healthy_and_recovers(small_disk):
    from starlette.testclient import TestClient

    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.pipeline.runner import QuestionResult
    from hifirag_core.records import StageRunRecord
    from hifirag_core.serving.app import create_app
    from hifirag_core.serving.service import Service
    from hifirag_core.serving.settings import ServiceSettings

    class InstantAnswerer:
        """An answer at once: the service then stores its rows on the small disk."""

        asked = 0

        def warm_up(self, plan) -> None:
            pass

        def answer(self, question, plan, observer):
            InstantAnswerer.asked += 1
            output = StageOutput(stage="answer", records=[AnswerRecord(text="Run tidewater doctor.")])
            return QuestionResult(question, [output], [StageRunRecord(stage="answer", status="ok", n_rows=1)])

    settings = ServiceSettings(data_root=small_disk, overrides=("limits.min_free_mb=0",))  # the floor never refuses
    service = Service(settings, InstantAnswerer())
    client = TestClient(create_app(service), base_url="http://127.0.0.1")
    ask = {"question": "How do I check a tidewater install?"}
    first = client.post("/run", json=ask)
    assert first.status_code == 200 and '"complete"' in first.text, first.text
    service.bookkeeping.submit(lambda: None).result()  # its served_requests row is written before the disk fills
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"\0" * 65536)

    second = client.post("/run", json=ask)  # admitted: nothing knew yet; its rows find no space
    assert second.status_code == 200
    assert "its disk is full" in second.text and "No space left" not in second.text, second.text
    third = client.post("/run", json=ask)
    assert third.status_code == 503 and third.headers["Retry-After"] == "60"
    assert "disk is full" in third.json()["error"]
    assert client.get("/health").status_code == 200
    assert InstantAnswerer.asked == 1  # the second stopped at storing its question; the third was refused

    filler.unlink()
    fourth = client.post("/run", json=ask)
    assert fourth.status_code == 200 and '"complete"' in fourth.text, fourth.text
    assert InstantAnswerer.asked == 2


def _fill(folder: Path, keep: int) -> Path:
    """Fill the disk of ``folder``, then give back ``keep`` bytes; the filler file, to delete to free the disk."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:  # unbuffered: closing it has nothing left to write
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - keep))
    return filler


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_that_fills_its_disk_stops_with_one_line_and_the_same_run_resumes(small_disk, data_root, examples_file,
                                                                                questions_file):
    import io
    import logging

    from prefect.exceptions import FailedRun

    from flows.answer import answer_questions
    from flows.environment import stage_cache_at
    from hifirag_core.store.disk import DISK_FULL, RESUME

    root = small_disk / "data"
    root.mkdir()
    for name in ("corpus", "blobs"):  # the corpus stays on the big disk; the run's rows and cache go on the small
        (root / name).symlink_to(data_root / name)

    def run() -> dict:
        with stage_cache_at(root):
            return answer_questions(questions=str(questions_file), data_root=str(root), run_id="full",
                                    overrides=[f"generation.examples={examples_file}", "limits.min_free_mb=0"])

    filler = _fill(small_disk, keep=400_000)
    # a terminal as Prefect's console handler is one: a handler of the root logger, where its records end up
    terminal = io.StringIO()
    handler = logging.StreamHandler(terminal)
    logging.getLogger().addHandler(handler)
    try:
        with pytest.raises(FailedRun) as stopped:
            run()
    finally:
        logging.getLogger().removeHandler(handler)
    line = str(stopped.value)
    assert line.startswith(DISK_FULL) and str(small_disk) in line and line.endswith(RESUME) and "\n" not in line
    printed = terminal.getvalue()
    assert "Run full: 3 questions" in printed  # the flow's own records reach it
    for noise in ("Traceback", "No space left on device", "committing transaction", "Failed to write result",
                  "database or disk is full"):
        assert noise not in printed, printed
    w = Warehouse(root)
    assert find_damage(w) == []  # every file that was written reads
    assert not list(root.rglob("*.tmp"))  # and no temporary file is left

    filler.unlink()
    summary = run()
    assert summary["status"] == "finished" and summary["n_answered"] == 3
    assert summary["cache_hits"] > 0  # what the stopped run computed and stored is not computed again
    rows, keys, questions = w.query("SELECT count(*), count(DISTINCT (question_id, stage, round)), "
                                    "count(DISTINCT question_id) FROM stage_runs WHERE run_id = 'full'").rows[0]
    assert rows == keys and questions == 3
    assert w.query("SELECT count(*), count(DISTINCT question_id) FROM answers WHERE run_id = 'full'").rows == [(3, 3)]
