"""A real Prefect server on 127.0.0.1 for tests whose runs span several processes, as a deployment has.

Processes of one run (a Dask cluster's workers, two concurrent runs) then share one API; a temporary
server per process would each start on the same SQLite file and cost 10-20 s of start-up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


@contextlib.contextmanager
def prefect_server(home: Path, timeout_s: float = 180, database_url: str | None = None) -> Iterator[str]:
    """Start ``prefect server start`` (its SQLite database under ``home``, or ``database_url``); yields the
    API URL; stops it by pid."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"the Prefect server did not start within {timeout_s:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        stop_group(server, 60)


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM a process started in its own session (and its children), SIGKILL after ``grace_s``."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
