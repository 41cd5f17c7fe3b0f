"""The warehouse: the one writer of stage records, and DuckDB views over them.

Layout under the data root::

    tables/<table>/run_id=<run>/<stage>--<question-key>.parquet   one file per (run, stage, question)
    tables/<table>/run_id=<run>/_compacted.parquet                a finished run's files, merged
    hifirag.duckdb                                                 the views, for external SQL tools

Writes are idempotent: the file name is a function of (table, run, stage, question), and a file
is written to a temporary name and renamed into place, so writing the same key twice leaves one
copy and a crash never leaves half a file where a query can see it. Writes and compaction of a
partition hold its file lock, so two processes writing at once never lose or duplicate a row.

A damaged file (cut short, overwritten: ``hifirag_core.store.integrity``) stops nothing: the views read the
readable files, a query says which files it skipped (``QueryResult.skipped``, and ``Warehouse.skipped``
over every query of the instance), and ``hifirag warehouse check --repair`` moves it aside and rebuilds
its rows. Only a write into the damaged run's own partition refuses, and names that command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hifirag_core.hashing import text_hash
from hifirag_core.records import Record, arrow_schema, to_table
from hifirag_core.records.tables import TABLES
from hifirag_core.resources import views_folder
from hifirag_core.store.disk import disk_full, is_disk_full
from hifirag_core.store.integrity import DamagedFile, footer_problem, located, mark_damaged, repair_command

COMPACTED = "_compacted.parquet"
MISSING = "missing: the partition has no file left (deleted?)"
# Made in a partition once its first file is in place: a partition holding it but no file lost its files. One
# without it never held a file (its first write failed, say on a full disk), so it lost nothing.
WRITTEN = ".written"
T = TypeVar("T")
ALL_STAGES = "all"
# Tables written whole per question (every stage's rows at once), keyed by question only.
PER_QUESTION_TABLES = frozenset({"llm_calls", "search_calls", "stage_runs"})
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DUCKDB_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


class WarehouseError(RuntimeError):
    """A warehouse operation that cannot be done as asked (bad run id, bad SQL, ...)."""


def check_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.match(run_id):
        raise WarehouseError(
            f"run id {run_id!r} must be 1-128 characters of letters, digits, '.', '_' or '-' "
            "and start with a letter or digit"
        )
    return run_id


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    # damaged files of the tables the query read, left out: the rows are then not the whole answer
    skipped: tuple[DamagedFile, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.skipped


class Warehouse:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.tables_dir = self.root / "tables"
        self.duckdb_path = self.root / "hifirag.duckdb"
        # damaged files that a read of this instance left out, by path (what a command reports at its end)
        self.skipped: dict[Path, DamagedFile] = {}
        self.damage: dict[Path, DamagedFile] = {}  # every damaged file the checks have met
        self.view_statements_cache: list[str] = []

    # --- writing ------------------------------------------------------------------------------

    def partition(self, table: str, run_id: str) -> Path:
        return self.tables_dir / table / f"run_id={check_run_id(run_id)}"

    def key_path(self, table: str, run_id: str, stage: str | None, question_id: str, round: int = 0) -> Path:
        """The file one key's rows are written to (until the run is compacted)."""
        return self.partition(table, run_id) / self._key_file(stage, question_id, round)

    @staticmethod
    def _key_file(stage: str | None, question_id: str, round: int = 0) -> str:
        key = text_hash(question_id, 16) if question_id else "run"
        at = f"@{round}" if round else ""  # a follow-up round's rows live beside the first pass's
        return f"{stage or ALL_STAGES}{at}--{key}.parquet"

    def write(self, table: str, records: Sequence[Record], *, run_id: str, stage: str | None,
              question_id: str = "", round: int = 0) -> int:
        """Persist one stage's rows for one question, replacing any earlier write of the same key.

        ``stage=None`` writes every stage's rows of the question at once (the rows keep their own
        ``stage``), for tables written whole per question: ``llm_calls``, ``search_calls`` and ``stage_runs``.

        The run id, the question id and (unless ``stage=None``) the stage are stamped on every row (the
        records themselves are not changed, so they still fingerprint the same); a row that names
        another stage is refused, since a later write of its stage could not replace it. Rows may be
        empty (the stage ran and produced nothing), which still replaces what an earlier attempt wrote.
        """
        stamps = {"question_id": question_id} if question_id else {}
        if stage is not None:
            other = sorted({r.stage for r in records if r.stage and r.stage != stage})
            if other:
                raise WarehouseError(f"{table}: rows of stage {', '.join(other)} written as stage {stage!r}")
            stamps["stage"] = stage
            stamps["round"] = round
        # the partition directory carries the run id
        arrow = to_table(list(records), TABLES[table], **stamps).drop_columns(["run_id"])
        arrow = arrow.append_column(
            "_written_at", pa.array([datetime.now(UTC)] * arrow.num_rows, pa.timestamp("us", tz="UTC"))
        )
        part = self.partition(table, run_id)
        part.mkdir(parents=True, exist_ok=True)
        with self._lock(part):  # so a concurrent compaction never deletes this write
            compacted = part / COMPACTED
            if compacted.exists():
                self._drop_from_compacted(compacted, stage, question_id, round)
            self._atomic_write(arrow, part / self._key_file(stage, question_id, round))
            if not (part / WRITTEN).exists():
                (part / WRITTEN).touch()
        return arrow.num_rows

    def drop_rounds_after(self, run_id: str, question_id: str, last: int, stages: Iterable[str]) -> int:
        """Remove one question's rows of the follow-up rounds after ``last`` (of the ``stages`` a round runs)
        from every table of the run: a rerun under the same run id that looks again fewer times leaves no
        earlier attempt's later rounds beside its own. Rounds are numbered without gaps, so the files are
        looked for by name, round after round, until one has none. Returns the files removed or rewritten."""
        parts = sorted(self.tables_dir.glob(f"*/run_id={check_run_id(run_id)}"))
        stages = list(stages)
        changed, later = 0, last + 1
        while found := [f for part in parts for stage in stages
                        if (f := part / self._key_file(stage, question_id, later)).exists()]:
            for path in found:
                with self._lock(path.parent):
                    path.unlink(missing_ok=True)
                    if not any(path.parent.glob("*.parquet")):  # emptied on purpose: nothing was lost
                        (path.parent / WRITTEN).unlink(missing_ok=True)
            changed += len(found)
            later += 1
        for part in parts:
            compacted = part / COMPACTED
            if not compacted.exists():
                continue
            with self._lock(part):
                merged = self._read_own(compacted)
                if "round" not in merged.column_names:
                    continue
                stale = pc.and_(pc.equal(merged["question_id"], question_id),
                                pc.greater(pc.fill_null(merged["round"], 0), last))
                if pc.any(stale).as_py():
                    self._atomic_write(merged.filter(pc.invert(stale)), compacted)
                    changed += 1
        return changed

    @staticmethod
    def _atomic_write(arrow: pa.Table, target: Path) -> None:
        """Write to a hidden temporary name, then rename: a write cut short (a crash, a full disk) leaves
        no file a query reads, and its temporary file is removed. Pages carry checksums (``--deep`` checks)."""
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            pq.write_table(arrow, tmp, compression="zstd", write_page_checksum=True)
            os.replace(tmp, target)
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            if is_disk_full(exc):
                raise disk_full(target.parent, exc) from exc
            raise

    @contextlib.contextmanager
    def _lock(self, part: Path) -> Iterator[None]:
        with open(part / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _drop_from_compacted(self, compacted: Path, stage: str | None, question_id: str, round: int = 0) -> None:
        """Remove a key's rows from the compacted file before that key is written again."""
        merged = self._read_own(compacted)
        same = pc.equal(merged["question_id"], question_id)
        if stage is not None:
            same = pc.and_(pc.equal(merged["stage"], stage), same)
            if "round" in merged.column_names:  # files written before rounds hold only the first pass
                same = pc.and_(pc.equal(pc.fill_null(merged["round"], 0), round), same)
        if pc.any(same).as_py():
            self._atomic_write(merged.filter(pc.invert(same)), compacted)

    def uncompact_run(self, run_id: str) -> int:
        """Split a finished run's compacted files back into one file per key, before it is written again.

        Writing a key of a compacted run means rewriting the compacted file without it; done for every
        key of a rerun, that is quadratic. Split once, and the rerun's writes replace plain files.
        """
        split = 0
        for part in self._partitions(run_id):
            with self._lock(part):
                compacted = part / COMPACTED
                if not compacted.exists():
                    continue
                merged = self._read_own(compacted)
                per_question = part.parent.name in PER_QUESTION_TABLES
                keys = merged.select(["question_id"] if per_question else ["stage", "question_id"])
                rounds = ([0] * merged.num_rows if per_question or "round" not in merged.column_names
                          else [r or 0 for r in merged["round"].to_pylist()])
                groups: dict[tuple, list[int]] = {}
                for i, key in enumerate(zip(*(keys[c].to_pylist() for c in keys.column_names), strict=True)):
                    groups.setdefault((*key, rounds[i]), []).append(i)
                for key, rows in groups.items():
                    stage, qid, round_no = (None, key[0], 0) if per_question else key
                    target = part / self._key_file(stage, qid, round_no)
                    if not target.exists():  # a key file written since compaction is newer
                        self._atomic_write(merged.take(rows), target)
                        split += 1
                compacted.unlink()
        return split

    def _partitions(self, run_id: str) -> list[Path]:
        if not self.tables_dir.exists():
            return []
        check_run_id(run_id)
        return [p / f"run_id={run_id}" for p in sorted(self.tables_dir.iterdir())
                if (p / f"run_id={run_id}").is_dir()]

    def _read_own(self, path: Path) -> pa.Table:
        """A file of the partition being written; damaged, it stops that write with the command that repairs it
        (its rows would be lost by rewriting the file without them)."""
        problem = footer_problem(path)
        if problem is None:
            try:
                return pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                problem = f"a page cannot be read ({str(exc).strip().splitlines()[0] if str(exc).strip() else exc})"
                mark_damaged(path, problem)
        bad = located(path, problem)
        raise WarehouseError(f"{bad.path} (table {bad.table}, run {bad.run_id}) is damaged: {problem}; "
                             f"run `{repair_command(bad.run_id)}`, then the same command again")

    def compact_run(self, run_id: str) -> int:
        """Merge each table's small files for a run into one; returns the files removed."""
        removed = 0
        if not self.tables_dir.exists():
            return 0
        for table_dir in sorted(p for p in self.tables_dir.iterdir() if p.is_dir()):
            part = table_dir / f"run_id={check_run_id(run_id)}"
            if not part.exists():
                continue
            with self._lock(part):
                files = sorted(p for p in part.glob("*.parquet") if p.name != COMPACTED)
                if not files:
                    continue
                sources = files + ([part / COMPACTED] if (part / COMPACTED).exists() else [])
                merged = pa.concat_tables([self._read_own(p) for p in sources], promote_options="permissive")
                self._atomic_write(merged, part / COMPACTED)
                for p in files:
                    p.unlink()
                removed += len(files)
        return removed

    # --- reading ------------------------------------------------------------------------------

    def read_records(self, table: str, run_id: str) -> list[Record]:
        """Every row of one run's table, as records again (for reuse by a later run)."""
        cls = TABLES[table]
        part = self.partition(table, run_id)
        files = sorted(part.glob("*.parquet")) if part.exists() else []
        if not files:
            return []
        names = {f.name for f in dataclasses.fields(cls)}
        records = []
        for path in self._readable(files):
            for row in pq.read_table(path).to_pylist():
                records.append(cls(**{k: v for k, v in row.items() if k in names}, run_id=run_id))
        return records

    def _glob(self, table: str) -> str:
        return (self.tables_dir / table / "*" / "*.parquet").as_posix()

    def _readable(self, files: Iterable[Path]) -> list[Path]:
        """The files whose footer reads; the others are noted in ``damage`` (checks cached per file version)."""
        readable = []
        for path in files:
            if problem := footer_problem(path):
                self.damage[path] = located(path, problem)
            else:
                self.damage.pop(path, None)
                readable.append(path)
        return readable

    def _note_emptied(self, base: Path) -> None:
        """Note each partition left without a file (its compacted file deleted, say): from its first write on, a
        partition holds one (and ``WRITTEN``), so one that held a file and holds none has lost rows."""
        if not base.exists():
            return
        for part in base.iterdir():
            if part.is_dir() and emptied(part):
                self.damage[part / COMPACTED] = located(part / COMPACTED, MISSING)
            elif (noted := self.damage.get(part / COMPACTED)) is not None and noted.reason == MISSING:
                del self.damage[part / COMPACTED]

    def damaged_files(self, table: str | None = None) -> list[DamagedFile]:
        """The damaged files the footer checks found so far (of ``table``, or of every table)."""
        return [d for d in self.damage.values() if table is None or d.table == table]

    def table_source(self, table: str) -> str | None:
        """What a table's view reads: the glob of its files (always current) while every one reads, else the list
        of those that read; None when it has none."""
        base = self.tables_dir / table
        files = sorted(base.glob("*/*.parquet")) if base.exists() else []
        readable = self._readable(files)
        self._note_emptied(base)
        if not readable:
            return None
        if len(readable) == len(files):
            return f"'{self._glob(table)}'"
        return "[" + ", ".join("'" + p.as_posix().replace("'", "''") + "'" for p in readable) + "]"

    def view_statements(self) -> list[str]:
        """CREATE VIEW statements: one per stage table, then the SQL files in warehouse/views."""
        views = views_folder()
        template = views.joinpath("00_tables.sql").read_text(encoding="utf-8")
        statements = []
        for table, cls in TABLES.items():
            cols = ", ".join(f"CAST(NULL AS {_duckdb_type(f.type)}) AS {f.name}" for f in arrow_schema(cls))
            source = self.table_source(table)
            if source is not None:
                statements.append(template.format(table=table, source=source, columns=cols))
            else:
                statements.append(f"CREATE OR REPLACE VIEW {table} AS SELECT {cols} WHERE false;")
        for path in sorted((p for p in views.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name):
            if path.name != "00_tables.sql":
                statements.append(path.read_text(encoding="utf-8"))
        self.view_statements_cache = statements
        return statements

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every view defined (always current)."""
        con = duckdb.connect(":memory:")
        _define_views(con, self.view_statements)
        return con

    def query(self, sql: str, params: Sequence[Any] | None = None) -> QueryResult:
        """Rows of ``sql`` over the views. A damaged file is left out, and named in the result's ``skipped``
        when the query reads its table (directly or through a view); a file whose footer reads but whose pages
        do not is found when the query meets it, and the query runs again without it."""
        for _attempt in range(_DAMAGE_RETRIES):
            con = None
            try:  # connecting defines the views, so damage can show here as well as in the query
                con = self.connect()
                cur = _while_compacting(lambda con=con: con.execute(sql, params or []))
                columns = [d[0] for d in cur.description] if cur.description else []
                rows = cur.fetchall()
            except duckdb.Error as exc:
                if self._met_damage(exc):
                    continue
                raise WarehouseError(str(exc).strip()) from None
            finally:
                if con is not None:
                    con.close()
            read = tables_read(sql, self.view_statements_cache)
            skipped = tuple(d for d in self.damage.values() if d.table in read)
            self.skipped.update((d.path, d) for d in skipped)
            return QueryResult(columns, rows, skipped)
        raise WarehouseError(f"gave up after finding {_DAMAGE_RETRIES} damaged files in one query; "
                             "run `hifirag warehouse check --repair`")

    def _met_damage(self, exc: duckdb.Error) -> bool:
        """Whether DuckDB's error names a warehouse file that exists (so is damaged past its footer): it is
        marked damaged, and left out of the views from now on."""
        text = str(exc)
        for match in re.finditer(re.escape(self.tables_dir.as_posix()) + r"/[^'\"\s]+?\.parquet", text):
            path = Path(match.group(0))
            if path.exists() and path not in self.damage:
                reason = text.strip().splitlines()[0][:200]
                mark_damaged(path, f"a page cannot be read ({reason})")
                self.damage[path] = located(path, f"a page cannot be read ({reason})")
                return True
        return False

    def refresh_duckdb_file(self) -> Path:
        """Write ``hifirag.duckdb`` with the views, for DuckDB's CLI and other SQL tools.

        Built under a temporary name and renamed, so a tool holding the old file open is never
        blocked and never sees a half-made one.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".hifirag.{uuid.uuid4().hex}.duckdb"
        con = duckdb.connect(str(tmp))
        try:
            _define_views(con, self.view_statements)
        finally:
            con.close()
        os.replace(tmp, self.duckdb_path)
        return self.duckdb_path


def emptied(part: Path) -> bool:
    """Whether a partition held a file once and holds none now (it lost its rows). A partition written before
    partitions were marked gets its mark the first time it is seen holding a file (best effort: a read-only
    data root keeps none)."""
    holds = any(part.glob("*.parquet"))
    marked = (part / WRITTEN).exists()
    if holds and not marked:
        with contextlib.suppress(OSError):
            (part / WRITTEN).touch()
    return marked and not holds


_DAMAGE_RETRIES = 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VIEW = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def tables_read(sql: str, statements: Sequence[str]) -> set[str]:
    """The stage tables ``sql`` may read, directly or through the views (by the names it mentions: a name in a
    string counts too, so a query is never reported complete when it may have read a damaged table)."""
    uses: dict[str, set[str]] = {}
    for statement in statements:
        for match in _VIEW.finditer(statement):  # a file may define several views, each to the next
            end = _VIEW.search(statement, match.end())
            body = statement[match.end(): end.start() if end else len(statement)]
            uses[match.group(1).lower()] = {w.lower() for w in _NAME.findall(body)}
    seen: set[str] = set()
    todo = [w.lower() for w in _NAME.findall(sql)]
    while todo:
        name = todo.pop()
        if name in seen or name not in uses and name not in TABLES:
            continue
        seen.add(name)
        todo += [w for w in uses.get(name, ()) if w != name]
    return seen & set(TABLES)


def _while_compacting(action: Callable[[], T], attempts: int = 6) -> T:
    """``action``, again when a file it globbed was gone by the time DuckDB opened it.

    Another process compacting its run (``compact_run``) deletes that run's small files after
    writing their merge; a view bound or a query read in between meets a missing file. The next
    glob sees the merged file instead.
    """
    for attempt in range(attempts):
        try:
            return action()
        except duckdb.IOException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


def _define_views(con: duckdb.DuckDBPyConnection, statements: Callable[[], list[str]]) -> None:
    def define() -> None:
        for statement in statements():  # listed again on a retry: the glob may have changed
            con.execute(statement)

    _while_compacting(define)


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"{_duckdb_type(t.value_type)}[]"
    return _DUCKDB_TYPES[t]
