"""What a command does before its flow: Prefect's database made at set-up, its server started early."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A command's start: the server starts while the block runs (here: nothing), and is up after it.
STARTED_EARLY = """
import sys, time
from pathlib import Path
from flows.environment import configure, server_starting
configure(Path(sys.argv[1]))
with server_starting():
    inside = time.monotonic()
waited = time.monotonic() - inside
from prefect.server.api.server import SubprocessASGIServer
import httpx
server = SubprocessASGIServer()
print(server.running, httpx.get(server.api_url + "/health").status_code, round(waited, 1))
server.stop()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect-home"), "HIFIRAG_DATA_ROOT": str(tmp_path / "data")}


def test_prepare_makes_prefects_database_and_a_command_finds_its_server_started(tmp_path):
    env = _env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "flows.cli", "prepare"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "runs on ONNX Runtime" in done.stdout and "Prefect's database is ready under" in done.stdout
    assert (tmp_path / "prefect-home" / "prefect.db").stat().st_size > 0
    started = subprocess.run([sys.executable, "-c", STARTED_EARLY, str(tmp_path / "data")], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=600)
    assert started.returncode == 0, started.stderr
    running, health, waited = started.stdout.split()
    assert (running, health) == ("True", "200")
    assert float(waited) > 0  # the block ended before the server was up: its start was waited for after it


def test_no_server_is_started_for_a_command_that_has_one(prefect_harness):
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import get_current_settings

    from flows.environment import server_starting

    assert get_current_settings().api.url  # the test harness's server
    before = dict(SubprocessASGIServer._instances)
    with server_starting():
        pass
    assert SubprocessASGIServer._instances == before


def test_bm25s_stays_quiet_after_configure(tmp_path):
    """bm25s sets its logger to DEBUG when imported; configure imports it first, then quiets it."""
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from flows.environment import configure; configure(Path(sys.argv[1])); "
                           "import hifirag_core.retrieval, logging; print(logging.getLogger('bm25s').level)",
                           str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == logging.WARNING
