"""The production database: a Prefect server on PostgreSQL runs the answer flow with its tasks on Dask.

Needs Debian's PostgreSQL server (``deployments/production.sh start`` installs it) and a ``postgres``
system user; skipped with the reason where either is missing. The test makes a throwaway cluster in
a temporary folder (trust authentication on 127.0.0.1 only) and removes it afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hifirag_core.store.warehouse import Warehouse
from tests import PROJECT_ROOT
from tests.support.prefect_server import prefect_server

pytestmark = pytest.mark.slow


def _server_bin() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*/bin/postgres")), key=lambda p: float(p.parts[-3]), reverse=True)
    return versions[0].parent if versions else None


def _skip_reason() -> str | None:
    if _server_bin() is None:
        return "no PostgreSQL server installed (apt-get install postgresql, or deployments/production.sh start)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres system user to run the server as"
    if os.geteuid() != 0:
        return "starting a PostgreSQL cluster as the postgres user needs root"
    return None


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    bin_dir = _server_bin()
    folder = Path(tempfile.mkdtemp(prefix="hifirag-pg-"))
    shutil.chown(folder, "postgres")
    data = folder / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    def as_postgres(*cmd: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, capture_output=True)

    as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
                f"-p {port} -k {folder} -c listen_addresses=127.0.0.1", "start")
    try:
        as_postgres("psql", "-h", "127.0.0.1", "-p", str(port), "-d", "postgres", "-c", "CREATE DATABASE prefect")
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/prefect"
    finally:
        as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def _count(url: str, table: str) -> int:
    port = url.rsplit(":", 1)[1].split("/", 1)[0]
    done = subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-h", "127.0.0.1", "-p", port, "-d", "prefect",
                           "-Atc", f"SELECT count(*) FROM {table}"], check=True, capture_output=True, text=True)
    return int(done.stdout.strip())


def test_a_run_with_dask_tasks_against_a_prefect_server_on_postgresql(
        postgres_url, data_root, questions_file, examples_file, tmp_path):
    with prefect_server(tmp_path / "prefect-home", database_url=postgres_url) as api:
        env = {**os.environ, "PREFECT_API_URL": api,
               "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(data_root / "cache" / "prefect-results")}
        cmd = [sys.executable, "-m", "flows.cli", "run", str(questions_file), "--data-root", str(data_root),
               "--set", f"generation.examples={examples_file}", "--runner", "dask", "--dask-workers", "2"]
        done = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # the server kept the flow run and every task run in PostgreSQL
        assert _count(postgres_url, "flow_run") == 1
        assert _count(postgres_url, "task_run") >= 3 * (1 + 10)  # each question's task and its ten stage tasks
    answered = Warehouse(data_root).query("SELECT count(*) FROM answers WHERE status = 'ok'").rows
    assert answered == [(3,)]
