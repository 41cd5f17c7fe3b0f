"""``hifirag serve`` in its own process on 127.0.0.1, as a deployment runs it, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

from tests import PROJECT_ROOT
from tests.support.prefect_server import stop_group


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def hifirag_service(data_root: Path, *args: str, env: Mapping[str, str] | None = None, log_path: Path | None = None,
                    timeout_s: float = 600) -> Iterator[str]:
    """Start ``hifirag serve --data-root data_root *args``; yields its base URL once /health answers; stops it
    with SIGTERM and waits for it."""
    port = free_port()
    cmd = [sys.executable, "-m", "flows.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--data-root", str(data_root), *args]
    log_path = log_path or data_root.parent / f"service-{port}.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"`hifirag serve` exited with {proc.returncode}:\n"
                                       f"{log_path.read_text(errors='replace')[-3000:]}")
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"`hifirag serve` did not answer /health within {timeout_s:.0f} s")
                time.sleep(0.5)
            yield url
        finally:
            stop_group(proc, 180)  # it finishes and records the questions in flight first
