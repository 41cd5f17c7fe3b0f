"""Read-only questions the command line asks of the warehouse: the runs, and where gold evidence is lost.

Each is one function over a ``Warehouse`` that returns a ``QueryResult``, so the command only prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from hifirag_core.store.warehouse import QueryResult, Warehouse, WarehouseError

RUNS_SQL = """SELECT run_id, status, variant, coalesce(parent_run_id, '') AS parent, config_hash AS config,
                     n_questions AS questions, n_answered AS answered, cache_hits AS reused,
                     llm_calls_paid AS paid_calls, round(wall_seconds, 1) AS seconds,
                     strftime(started_at, '%m-%d %H:%M') AS started
              FROM runs ORDER BY started_at DESC"""


def list_runs(warehouse: Warehouse) -> QueryResult:
    """Every run with its status, variant, parent, config and counts, newest first."""
    return warehouse.query(RUNS_SQL)


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
