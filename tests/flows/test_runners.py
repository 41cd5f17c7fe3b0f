"""Runs that leave one process: a Dask cluster writes what the thread pool writes, and concurrent runs
into one warehouse lose and duplicate nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hifirag_core.pipeline.specs import BASE_STAGES
from hifirag_core.store.warehouse import Warehouse
from tests import PROJECT_ROOT
from tests.support.prefect_server import prefect_server

pytestmark = pytest.mark.slow

STAGE_TABLES = ("query_plans", "search_results", "url_decisions", "pages", "sections", "section_decisions", "drafts",
                "citations", "answers", "llm_calls")
# When and where a row was made, not what it holds.
VOLATILE = {"run_id", "_written_at", "fetched_at", "started_at", "call_id", "seconds", "compute_seconds",
            "latency_s", "finished_at", "wall_seconds"}


def _rounded(value):
    # MiniLM's vectors differ in the last bits with the batch a text was embedded in, and a shared
    # vector cache keeps whichever batch came first
    return round(value, 5) if isinstance(value, float) else value


def content(root: Path, run_id: str, table: str) -> list[tuple]:
    w = Warehouse(root)
    columns = [c for (c, *_rest) in w.query(f"DESCRIBE {table}").rows if c not in VOLATILE]
    cols = ", ".join(f'"{c}"' for c in columns)
    rows = w.query(f"SELECT {cols} FROM {table} WHERE run_id = ? ORDER BY ALL", [run_id]).rows
    return [tuple(_rounded(v) for v in row) for row in rows]


def ledger(root: Path, run_id: str) -> list[tuple]:
    return Warehouse(root).query("SELECT question_id, stage, status, cached, n_rows, cache_key FROM stage_runs "
                                 "WHERE run_id = ? ORDER BY question_id, stage", [run_id]).rows


def second_root(data_root: Path, dst: Path) -> Path:
    """Another data root on the same built corpus, with its own caches and warehouse."""
    (dst / "corpus").mkdir(parents=True)
    (dst / "corpus" / "docs").symlink_to(data_root / "corpus" / "docs")
    (dst / "blobs").symlink_to(data_root / "blobs")
    return dst


def test_a_dask_run_writes_the_rows_of_a_thread_run(data_root, questions_file, examples_file, tmp_path):
    from flows.answer import answer_questions
    from flows.environment import stage_cache_at

    roots = {"threads": data_root, "dask": second_root(data_root, tmp_path / "dask-root")}
    for runner, root in roots.items():
        with stage_cache_at(root):
            summary = answer_questions(questions=str(questions_file), data_root=str(root), run_id="same",
                                       overrides=[f"generation.examples={examples_file}"], runner=runner,
                                       dask_workers=2)
        assert (summary["status"], summary["n_answered"], summary["stage_computations"]) == ("finished", 3, 3 * len(BASE_STAGES))
    for table in STAGE_TABLES:
        threads, dask = (content(root, "same", table) for root in roots.values())
        assert dask == threads, table
        assert threads or table == "llm_calls", table  # the offline models make no LLM calls
    assert ledger(roots["dask"], "same") == ledger(roots["threads"], "same")


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


def _cli_run(root: Path, questions: Path, examples: Path, variant: str, api: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flows.cli", "run", str(questions), "--variant", variant, "--data-root", str(root),
           "--set", f"generation.examples={examples}"]
    env = {**os.environ, "PREFECT_API_URL": api,
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(root / "cache" / "prefect-results")}
    return subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_two_runs_writing_to_one_warehouse_at_once_lose_and_duplicate_nothing(
        data_root, questions_file, examples_file, tmp_path, prefect_api):
    variants = ("final", "rag_filters")
    together = data_root
    procs = [_cli_run(together, questions_file, examples_file, v, prefect_api) for v in variants]
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out.decode()[-3000:]
    alone = second_root(data_root, tmp_path / "one-at-a-time")
    for variant in variants:
        proc = _cli_run(alone, questions_file, examples_file, variant, prefect_api)
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out.decode()[-3000:]

    w = Warehouse(together)
    run_ids = sorted(r for (r,) in w.query("SELECT run_id FROM runs WHERE status = 'finished'").rows)
    assert len(run_ids) == 2 and run_ids == sorted(r for (r,) in Warehouse(alone).query("SELECT run_id FROM runs").rows)
    dupes = w.query("SELECT count(*) FROM (SELECT run_id, question_id, stage FROM stage_runs GROUP BY ALL "
                    "HAVING count(*) > 1)").rows
    assert dupes == [(0,)]
    for run_id in run_ids:
        assert len(ledger(together, run_id)) == 30
        for table in (*STAGE_TABLES, "questions"):
            assert content(together, run_id, table) == content(alone, run_id, table), (run_id, table)


def test_local_cluster_workers_share_the_cores_between_their_model_replicas_and_do_not_profile(monkeypatch):
    from distributed import Client

    from flows.runners import RunnerChoice, local_cluster

    monkeypatch.delenv("HIFIRAG_ENCODERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    with local_cluster(RunnerChoice(kind="dask", dask_workers=2), concurrency=4) as address, Client(address) as client:
        # a function of the worker (os.environ.get would carry this process's environment along)
        seen = client.run(lambda: os.environ.get("HIFIRAG_ENCODERS"))
        profiling = client.run(_worker_profiles)
    assert len(seen) == 2 and set(seen.values()) == {str(max(1, cores // 2))}
    assert set(profiling.values()) == {False}  # no statistical profiler eating the cores


def _worker_profiles() -> bool:
    import dask

    return dask.config.get("distributed.worker.profile.enabled")
