"""What a command does before its flow: Prefect's database made at set-up, its server started early."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from tests import PROJECT_ROOT

ROOT = PROJECT_ROOT

# A command's start: the server starts while the block runs (here: nothing), and is up after it.
STARTED_EARLY = """
import os, sys, time
from pathlib import Path
from flows.environment import configure, server_starting
configure(Path(sys.argv[1]))
with server_starting():
    inside = time.monotonic()
    named = os.environ.get("PREFECT_API_URL", "")
waited = time.monotonic() - inside
import httpx
from prefect.settings import get_current_settings
settings = get_current_settings()
assert settings.api.url == named, (settings.api.url, named)
print(named.startswith("http://127.0.0.1:"), httpx.get(named + "/health").status_code, round(waited, 1),
      "prefect.server.api.server" in sys.modules, repr(settings.ui_url))
"""

# A server that cannot start (its database cannot be opened): the command fails, Prefect unpointed, rather
# than leave Prefect to start a server of its own that nothing would stop after a SIGKILL.
FAILED_START = """
import os, sys
from pathlib import Path
from flows.environment import ServerStartError, TemporaryServer, configure, server_starting
configure(Path(sys.argv[1]))
os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = "sqlite+aiosqlite:////nonexistent/folder/prefect.db"
from prefect.context import refresh_global_settings_context
refresh_global_settings_context()
TemporaryServer.ATTEMPTS = 1
try:
    with server_starting():
        pointed = os.environ.get("PREFECT_API_URL", "")
except ServerStartError as exc:
    print("failed:", exc, file=sys.stderr)
from prefect.settings import get_current_settings
print(pointed.startswith("http://"), os.environ.get("PREFECT_API_URL"), get_current_settings().api.url,
      "PREFECT_UI_URL" in os.environ)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_UI_URL")}
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
    pointed, health, waited, server_code_imported, ui_url = started.stdout.split()
    assert (pointed, health) == ("True", "200")  # Prefect's settings name the server, and it answers
    assert float(waited) > 0  # the block ended before the server was up: its start was waited for after it
    assert server_code_imported == "False"  # the server's code stays in the server's process
    assert ui_url == "''"  # it serves no UI, so the flow prints no link to one


def test_a_server_that_cannot_start_fails_the_command(tmp_path):
    done = subprocess.run([sys.executable, "-c", FAILED_START, str(tmp_path / "data")], capture_output=True,
                          text=True, env=_env(tmp_path), cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "None", "None", "False"]
    assert "failed: Prefect's temporary server exited with code" in done.stderr
    assert "set PREFECT_API_URL" in done.stderr


# A command that fails before its flow (say, a corpus it cannot build) stops the server at once.
FAILED_COMMAND = """
import os, sys
from pathlib import Path
from flows.environment import TemporaryServer, configure, server_starting
configure(Path(sys.argv[1]))
processes = []
started = TemporaryServer.start
def start(self):
    started(self)
    processes.append(self.process)
    return self
def wait(self):
    raise AssertionError("waited for the server of a failed command")
TemporaryServer.start, TemporaryServer.wait = start, wait
try:
    with server_starting():
        raise ValueError("no corpus")
except ValueError:
    pass
print(len(processes), processes[0].poll() is not None, os.environ.get("PREFECT_API_URL"))
"""


def test_a_command_failing_before_its_flow_stops_the_server_without_waiting(tmp_path):
    done = subprocess.run([sys.executable, "-c", FAILED_COMMAND, str(tmp_path / "data")], capture_output=True,
                          text=True, env=_env(tmp_path), cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True", "None"]  # one server started, stopped, Prefect unpointed


def test_no_server_is_started_for_a_command_that_has_one(prefect_harness):
    from prefect.settings import get_current_settings

    from flows.environment import server_starting, temporary_server

    url = get_current_settings().api.url
    assert url  # the test harness's server
    assert temporary_server() is None
    with server_starting():
        pass
    assert get_current_settings().api.url == url


def test_bm25s_stays_quiet_after_configure(tmp_path):
    """bm25s sets its logger to DEBUG when imported; configure imports it first, then quiets it."""
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from flows.environment import configure; configure(Path(sys.argv[1])); "
                           "import hifirag_core.retrieval.scoring, logging; print(logging.getLogger('bm25s').level)",
                           str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == logging.WARNING
