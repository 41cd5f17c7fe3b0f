"""``hifirag warehouse check``: find the warehouse files that cannot be read or are gone, move them aside, and
write their rows again from the stage cache.

Every stage's output is kept twice: as warehouse rows, and as the stage cache (the orchestrator's persisted
task results, keyed by the cache key each ``stage_runs`` row records). So a run's stage tables, and its
``llm_calls`` and ``search_calls``, can be written again from the cache: the same records, stamped the same way, as the run wrote
them (``write_output``; a call of a stage reused from the cache is marked reused). What the cache does not
hold is said instead: which stages a ``reprocess`` must compute again, or the command that writes the
table again (``runs``, ``questions`` and ``stage_runs`` are the run's own bookkeeping: running the same
command again, under the same run id, writes them again and takes every stage from the cache).

What counts as damaged:

* a file whose footer does not read (``footer_problem``), or with ``deep``, a page that does not read or
  whose checksum does not match (``deep_problem``);
* a partition that held a file and holds none (a run's compacted file deleted): ``emptied``, by the ``.written``
  mark a partition gets once its first file is in place (one whose first write failed, on a full disk say,
  has no mark: it held nothing and lost nothing);
* a stage that ``stage_runs`` says wrote rows, of which no table it writes holds any (a key's file deleted).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hifirag_core.pipeline.output import CALL_TABLES, StageOutput, question_calls
from hifirag_core.pipeline.reuse import StoredRun
from hifirag_core.pipeline.specs import PIPELINE, STAGE_NAMES, spec
from hifirag_core.questions import Question
from hifirag_core.records import StageRunRecord
from hifirag_core.records.tables import TABLES
from hifirag_core.store.integrity import DamagedFile, deep_problem, footer_problem, quarantine
from hifirag_core.store.warehouse import COMPACTED, MISSING, Warehouse, emptied

# cache key -> the stage's output as the stage cache holds it, or None when it holds none
LoadOutput = Callable[[str], StageOutput | None]
STAGE_TABLES: dict[str, tuple[str, ...]] = {
    table: tuple(s.name for s in PIPELINE if table in s.tables) for s in PIPELINE for table in s.tables
}
BOOKKEEPING = ("runs", "questions", "stage_runs")


@dataclass
class RepairReport:
    found: list[DamagedFile]
    moved: list[tuple[Path, Path]] = field(default_factory=list)
    rebuilt: dict[tuple[str, str], int] = field(default_factory=dict)  # (run, table) -> rows written again
    todo: list[str] = field(default_factory=list)  # what the stage cache could not give back, and the command

    @property
    def repaired(self) -> bool:
        return not self.todo


def check(warehouse: Warehouse, run_id: str | None = None, deep: bool = False) -> list[DamagedFile]:
    """Every damaged or missing file of the warehouse (of one run, with ``run_id``)."""
    found: list[DamagedFile] = []
    pattern = f"*/run_id={run_id}" if run_id else "*/run_id=*"
    parts = (
        sorted(p for p in warehouse.tables_dir.glob(pattern) if p.is_dir())
        if warehouse.tables_dir.exists()
        else []
    )
    probe = deep_problem if deep else footer_problem
    for part in parts:
        table, run = part.parent.name, part.name.removeprefix("run_id=")
        files = sorted(part.glob("*.parquet"))
        if emptied(part):
            found.append(DamagedFile(part / COMPACTED, table, run, MISSING))
        for path in files:
            if problem := probe(path):
                found.append(DamagedFile(path, table, run, problem))
    found += _missing_keys(warehouse, run_id, {(d.table, d.run_id) for d in found})
    return found


def _missing_keys(warehouse: Warehouse, run_id: str | None, known: set[tuple[str, str]]) -> list[DamagedFile]:
    """Stages that wrote rows by ``stage_runs`` of which no table holds any: a key's file deleted."""
    where = "WHERE s.run_id = ?" if run_id else ""
    ledger = warehouse.query(
        f"SELECT run_id, question_id, stage, coalesce(round, 0), n_rows FROM stage_runs s {where}",
        [run_id] if run_id else [],
    ).rows
    if not ledger:
        return []
    held: dict[tuple[str, str, str, int], int] = defaultdict(int)
    for table in STAGE_TABLES:
        for run, qid, stage, round_no, n in warehouse.query(
            f"SELECT run_id, question_id, stage, coalesce(round, 0), count(*) FROM {table} s {where} GROUP BY ALL",
            [run_id] if run_id else [],
        ).rows:
            held[(run, qid, stage, round_no)] += n
    missing: list[DamagedFile] = []
    for run, qid, stage, round_no, n_rows in ledger:
        if not n_rows or stage not in STAGE_NAMES or held[(run, qid, stage, round_no)]:
            continue
        for table in spec(stage).tables:
            if (table, run) in known:
                continue
            missing.append(
                DamagedFile(
                    warehouse.key_path(table, run, stage, qid, round_no),
                    table,
                    run,
                    f"missing: stage_runs says stage {stage} wrote {n_rows} row(s) for "
                    f"question {qid}, the table holds none",
                )
            )
    return missing


def damage_in_sources(warehouse: Warehouse, run_ids: Sequence[str | None]) -> list[str]:
    """One line per damaged or missing file of the runs a new run takes rows from (a reprocess's parent, pinned
    evidence): the new run goes on, and computes again the stages whose rows it finds missing (``StoredRun``)."""
    return [
        damaged.line(warehouse.root, then="this run computes the stages it held again")
        for run_id in dict.fromkeys(r for r in run_ids if r)
        for damaged in check(warehouse, run_id)
    ]


def repair(
    warehouse: Warehouse, found: Sequence[DamagedFile], load_output: LoadOutput, when: datetime | None = None
) -> RepairReport:
    """Move each damaged file into the quarantine folder, then write the rows of each (run, table) it held
    again from the stage cache; say what the cache cannot give back."""
    report = RepairReport(list(found))
    when = when or datetime.now(UTC)
    compacted: set[str] = set()
    for damaged in found:
        if damaged.path.name == COMPACTED:
            compacted.add(damaged.run_id)
        if damaged.path.exists():
            report.moved.append((damaged.path, quarantine(warehouse.root, damaged, when)))
    for run, table in sorted({(d.run_id, d.table) for d in found}):
        if table in STAGE_TABLES or table in CALL_TABLES:
            n, todo = _rebuild(warehouse, run, table, load_output)
            report.rebuilt[(run, table)] = n
            report.todo += todo
        elif table in BOOKKEEPING:
            report.todo.append(
                f"{table} of run {run} is the run's own record, not in the stage cache: run the "
                f"command that made the run again with --run-id {run} (every stage comes from "
                "the cache and its rows are written again)"
            )
        else:
            report.todo.append(
                f"{table} of run {run} is not in the stage cache: compute it again with the "
                "command that wrote it (hifirag eval, for scores)"
            )
    for run in sorted(compacted):
        warehouse.compact_run(run)  # laid out again as the finished run was
    warehouse.refresh_duckdb_file()
    return report


def _ledger(warehouse: Warehouse, run_id: str) -> list[StageRunRecord]:
    return [r for r in warehouse.read_records("stage_runs", run_id) if isinstance(r, StageRunRecord)]


def _rebuild(warehouse: Warehouse, run_id: str, table: str, load_output: LoadOutput) -> tuple[int, list[str]]:
    """Write one run's rows of a stage table (or of a call table) again from the stage cache."""
    ledger = _ledger(warehouse, run_id)
    if not ledger:
        return 0, [
            f"{table} of run {run_id}: its stage_runs rows are unreadable too, so which cached stages "
            f"made it is unknown: run the command that made the run again with --run-id {run_id}"
        ]
    stages = STAGE_TABLES.get(table, STAGE_NAMES)
    stored: dict[str, StoredRun] = {}
    outputs: dict[tuple[str, str, int], StageOutput] = {}
    lost: dict[str, set[str]] = defaultdict(set)  # stage -> questions the cache has no output for
    for row in ledger:
        if row.stage not in stages:
            continue
        output = _output(row, load_output, warehouse, stored)
        if output is None:
            lost[row.stage].add(row.question_id)
            continue
        outputs[(row.question_id, row.stage, row.round or 0)] = output
    written = 0
    if table in CALL_TABLES:  # every stage's calls of a question at once
        by_question: dict[str, list[StageRunRecord]] = defaultdict(list)
        for row in ledger:
            by_question[row.question_id].append(row)
        for qid, rows in by_question.items():
            if any(r.stage in lost and qid in lost[r.stage] for r in rows):
                continue
            pairs = ((outputs[(qid, r.stage, r.round or 0)], r.cached) for r in rows)
            calls = question_calls(table, pairs)
            written += warehouse.write(table, calls, run_id=run_id, stage=None, question_id=qid)
    else:
        cls = TABLES[table]
        for (qid, stage, round_no), output in outputs.items():
            rows = [r for r in output.records if isinstance(r, cls)]
            written += warehouse.write(
                table, rows, run_id=run_id, stage=stage, question_id=qid, round=round_no
            )
    todo = []
    if lost:
        first = min(lost, key=STAGE_NAMES.index)
        qids = sorted(set().union(*lost.values()))
        todo.append(
            f"{table} of run {run_id}: the stage cache no longer holds {', '.join(sorted(lost))} for "
            f"{len(qids)} question(s); compute them again with: hifirag reprocess {run_id} --from {first} "
            f"--questions {','.join(qids)}"
        )
    return written, todo


def _output(
    row: StageRunRecord, load_output: LoadOutput, warehouse: Warehouse, stored: dict[str, StoredRun]
) -> StageOutput | None:
    """The output a ``stage_runs`` row stands for: from the stage cache by its key, or from the run it reused."""
    if row.cache_key:
        output = load_output(row.cache_key)
        if output is not None:
            return output
    if row.source_run_id:
        source = stored.setdefault(row.source_run_id, StoredRun(warehouse, row.source_run_id))
        return source.output(row.stage, Question(row.question_id, "", None, 0), row.round or 0)
    return None
