"""Read-only questions the command line asks of the warehouse: the runs, and where gold evidence is lost.

Each is one function over a ``Warehouse`` that returns a ``QueryResult``, so the command only prints.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from hifirag_core.store.warehouse import QueryResult, Warehouse, WarehouseError

RUNS_SQL = """SELECT run_id, status, variant, coalesce(parent_run_id, '') AS parent, config_hash AS config,
                     n_questions AS questions, n_answered AS answered, cache_hits AS reused,
                     llm_calls_paid AS paid_calls, round(wall_seconds, 1) AS seconds,
                     strftime(started_at, '%m-%d %H:%M') AS started
              FROM runs ORDER BY started_at DESC"""


def list_runs(warehouse: Warehouse, limit: int | None = None) -> QueryResult:
    """Every run (or the ``limit`` newest) with its status, variant, parent, config and counts, newest first."""
    if limit is None:
        return warehouse.query(RUNS_SQL)
    return warehouse.query(f"{RUNS_SQL} LIMIT ?", [int(limit)])


def funnel_summary(warehouse: Warehouse, run_ids: Sequence[str]) -> QueryResult:
    """For each run, the share of questions whose gold evidence survived each step (``evidence_funnel_summary``);
    the first three columns are the run, its variant and its question count, then one column per step."""
    if not run_ids:
        raise WarehouseError("name at least one run")
    marks = ",".join("?" * len(run_ids))
    result = warehouse.query(f"SELECT * FROM evidence_funnel_summary WHERE run_id IN ({marks})", list(run_ids))
    if not result.rows:
        raise WarehouseError("none of these runs has questions with a known gold page (the FAQ set has them)")
    return result


def stored_page_sha(warehouse: Warehouse, url: str) -> str | None:
    """The content hash of the newest successful fetch of ``url`` in any run."""
    rows = warehouse.query("SELECT content_sha256 FROM pages WHERE url = ? AND status = 'ok' "
                           "ORDER BY fetched_at DESC LIMIT 1", [url]).rows
    return rows[0][0] if rows and rows[0][0] else None


LEDGER_SQL = """SELECT sentence_index, sentence, marker, source_rank, url, section_id, heading_path,
                       supporting_sentence, support, support_method, decided_by, content_sha256, fetched_at, final_url
                FROM citation_ledger WHERE run_id = ? AND question_id = ?
                ORDER BY sentence_index, source_rank NULLS FIRST"""


def citation_ledger(warehouse: Warehouse, run_id: str, question_id: str) -> QueryResult:
    """One answer's ``citation_ledger`` rows: each sentence with its cited sections and their snapshots."""
    return warehouse.query(LEDGER_SQL, [run_id, question_id])


def snapshot_known(warehouse: Warehouse, content_sha256: str) -> bool:
    """Whether a fetched page of some run was stored under this content hash (only those are served)."""
    return bool(warehouse.query("SELECT 1 FROM pages WHERE content_sha256 = ? LIMIT 1", [content_sha256]).rows)


# --- SQL from someone else: read only, bounded -------------------------------------------------------------

# What a caller who is not the warehouse's owner (an MCP client) may run: queries, and the plan of a query.
READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})
# The most memory one such query may take (DuckDB's own default is 80% of the machine's, beside the pipeline's).
READ_ONLY_MEMORY = "1GB"
# What may follow EXPLAIN: the plan of a query only. EXPLAIN ANALYZE runs its statement (EXPLAIN ANALYZE COPY ...
# TO writes a file, also into the warehouse's own folder, which a query may read), and options in parentheses
# may ask for ANALYZE too.
_RUNS_ITS_STATEMENT = frozenset({"analyze", "analyse", "("})


@dataclass(frozen=True)
class LimitedResult:
    """At most ``row_limit`` rows of a query; ``truncated`` when it had more."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_limit: int
    truncated: bool


def read_only_query(warehouse: Warehouse, sql: str, *, max_rows: int, timeout_s: float) -> LimitedResult:
    """One ``SELECT`` (or ``EXPLAIN`` of one) over the warehouse views, refused otherwise, with at most
    ``max_rows`` rows and stopped after ``timeout_s`` seconds (``WarehouseError`` saying which).

    Two fences, so that a statement the first misreads still cannot reach outside the warehouse: only a single
    read statement is accepted (DuckDB's own parser says what each is, and what an ``EXPLAIN`` explains; ``EXPLAIN
    ANALYZE``, which runs its statement, is refused), and the connection may then touch no file outside the
    warehouse's tables (``enable_external_access`` off, ``allowed_directories`` the tables folder), with at most
    ``READ_ONLY_MEMORY`` and its configuration locked, so no ``COPY ... TO``, ``ATTACH``, ``INSTALL``, ``SET``
    or ``read_text('/etc/...')``.
    """
    kind = _statement_kind(sql)
    if kind not in READ_ONLY_STATEMENTS:
        raise WarehouseError(f"only SELECT (or EXPLAIN of a SELECT) is allowed here: the warehouse is read only, "
                             f"and this statement is {kind}")
    con = warehouse.connect()
    timer = threading.Timer(timeout_s, con.interrupt)
    try:
        tables = warehouse.tables_dir.resolve().as_posix().rstrip("/") + "/"
        con.execute("SET allowed_directories = ?", [[tables]])
        con.execute("SET enable_external_access = false")
        con.execute(f"SET memory_limit = '{READ_ONLY_MEMORY}'")
        con.execute("SET lock_configuration = true")
        timer.start()
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        raise WarehouseError(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it "
                             "(a WHERE on run_id, a LIMIT)") from None
    except duckdb.Error as exc:
        raise WarehouseError(str(exc).strip()) from None
    finally:
        timer.cancel()
        con.close()
    return LimitedResult(columns, rows[:max_rows], max_rows, len(rows) > max_rows)


def _statement_kind(sql: str) -> str:
    """The kind of the one statement ``sql`` holds (``WarehouseError`` for none or several, or one DuckDB cannot
    parse). An ``EXPLAIN`` is ``EXPLAIN`` only when what follows the keyword is one ``SELECT``, explained without
    being run; ``EXPLAIN ANALYZE`` (which runs it) and ``EXPLAIN (options)`` are named as such."""
    parser = duckdb.connect(":memory:")
    try:
        statements = parser.extract_statements(sql)
        if len(statements) != 1:
            raise WarehouseError(f"send exactly one SQL statement, not {len(statements)}")
        kind = statements[0].type.name
        if kind != "EXPLAIN":
            return kind
        text = statements[0].query
        tokens = [position for position, sort in duckdb.tokenize(text) if sort != duckdb.token_type.comment]
        after = text[tokens[1]:] if len(tokens) > 1 else ""
        first = after[:1] if after.startswith("(") else (after.split(None, 1) or [""])[0].lower()
        if first in _RUNS_ITS_STATEMENT:
            return "EXPLAIN ANALYZE" if first != "(" else "EXPLAIN with options"
        try:
            inner = [s.type.name for s in parser.extract_statements(after)]
        except duckdb.Error:
            inner = []
        return kind if inner == ["SELECT"] else f"EXPLAIN of {' and '.join(inner) or 'something not a query'}"
    except duckdb.Error as exc:
        raise WarehouseError(str(exc).strip()) from None
    finally:
        parser.close()


# --- follow-up turns ---------------------------------------------------------------------------------------

THREAD_SQL = """SELECT * FROM thread_turns
                WHERE thread_id = (SELECT any_value(thread_id) FROM thread_turns WHERE run_id = ? AND question_id = ?)
                ORDER BY turn, answer_id"""


def thread_of(warehouse: Warehouse, run_id: str, question_id: str) -> QueryResult:
    """Every turn of the thread an answer is a turn of (``thread_turns``), in order; no rows when it is in none."""
    return warehouse.query(THREAD_SQL, [run_id, question_id])


def turn_places(warehouse: Warehouse, run_id: str) -> dict[str, tuple[str, int, str | None]]:
    """Question id -> (thread id, turn, the answer it follows) for the run's questions that are turns of a thread."""
    rows = warehouse.query("SELECT question_id, thread_id, turn, follows FROM thread_turns WHERE run_id = ?",
                           [run_id]).rows
    return {qid: (thread, turn, follows) for qid, thread, turn, follows in rows}
