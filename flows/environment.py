"""Process settings for Prefect and the model libraries, applied before either is imported.

Prefect reads its settings when it is imported, so every entry point (the CLI, the deployment
serve script, the tests) calls ``configure`` first. Values the user has already set win.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from hifirag_core.resources import default_prefect_home

DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # One line per question from the flow; a task's own log only when it fails.
    "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "WARNING",
    # A busy SQLite server answers 503 while its database is locked; Prefect's client retries with
    # doubling waits, by default 5 times (about 1 min in all), which a 3-variant evaluation on two
    # busy cores outlasted. 8 retries ride out a stall of about 8 min instead of failing the night.
    "PREFECT_CLIENT_MAX_RETRIES": "8",
    # The temporary server's shutdown drops queued events and logs it as an error; that is noise.
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
    # Models load from local folders only; a hub name must fail at once, not after a minute of retries.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def configure(data_root: Path) -> None:
    """Set the defaults above, and keep Prefect's cached stage results beside the warehouse."""
    # Prefect keeps its database and state in the project's .prefect (or the per-user data folder of an
    # installed package), not in ~/.prefect.
    os.environ.setdefault("PREFECT_HOME", str(default_prefect_home()))
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(results_path(data_root)))
    # bm25s logs every small index it builds at DEBUG, and sets its logger to DEBUG when imported:
    # imported here first, so the level set after it holds.
    import bm25s  # noqa: F401

    logging.getLogger("bm25s").setLevel(logging.WARNING)


def results_path(data_root: Path) -> Path:
    """Where Prefect persists stage results (the stage cache) for a data root."""
    return Path(data_root) / "cache" / "prefect-results"


@contextlib.contextmanager
def stage_cache_at(data_root: Path) -> Iterator[None]:
    """Run flows with their stage cache under ``data_root``.

    A flow resolves its result storage when it starts, so the setting has to be in place around
    the flow call, not inside it.
    """
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: results_path(data_root)}):
        yield


def exit_on_sigterm() -> None:
    """Make SIGTERM (a supervisor, ``kill``) end this process as Ctrl-C does: by an exception, so that
    context managers and exit handlers run (Prefect records the flow run as crashed, a Dask cluster
    closes, the temporary server stops at once). Python's default would end it on the spot; the
    processes it started would still end, as each watches its parent, but nothing would be recorded."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


class ServerStartError(RuntimeError):
    """Prefect's temporary server did not come up, so the command cannot run its flow."""


class TemporaryServer:
    """Prefect's temporary API server, started by this process as a process of its own.

    Prefect starts a temporary server itself when ``PREFECT_API_URL`` is unset, but only after importing
    its server code in the command's own process (sqlalchemy, FastAPI and every API route: 5-6 s on two
    cores, spent before the server process even exists). Started from here, the server process begins at
    once and this process never imports that code. The server is Prefect's documented ``prefect server
    start`` (``flows.server_process``: no UI, the services a temporary server needs) on a port the system
    chose; it stops when this process stops, however it stops, and ``PREFECT_API_URL`` names it for the
    rest of this process and the processes it starts.
    """

    ATTEMPTS = 3  # a port taken between choosing it and binding it: choose again

    def __init__(self) -> None:
        from prefect.settings import get_current_settings

        settings = get_current_settings()
        self.timeout_s = float(settings.server.ephemeral.startup_timeout_seconds)
        self.env = {**os.environ, **settings.to_environment_variables(exclude_unset=True)}
        self.env.pop("PREFECT_API_URL", None)
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> TemporaryServer:
        """Start the server process and point Prefect at it; ``wait`` tells whether it came up."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/api"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flows.server_process", "--parent", str(os.getpid()), "--port", str(port)],
            env=self.env, stdout=subprocess.DEVNULL)
        atexit.register(self.stop)  # after Prefect's own exit handlers, which flush events and logs to it
        _use_api(self.url)
        return self

    def wait(self) -> None:
        """Block until the server answers; raise ``RuntimeError`` (and leave Prefect unpointed) if it cannot."""
        import httpx

        deadline = time.monotonic() + self.timeout_s
        for attempt in range(self.ATTEMPTS):
            with httpx.Client(timeout=5) as client:
                while self.process.poll() is None and time.monotonic() < deadline:
                    with contextlib.suppress(httpx.HTTPError):
                        if client.get(f"{self.url}/health").status_code == 200:
                            return
                    time.sleep(0.1)
            code = self.process.poll()
            self.stop()
            if code is None or attempt + 1 == self.ATTEMPTS:
                _use_api(None)
                state = f"exited with code {code}" if code is not None else f"did not answer in {self.timeout_s:.0f} s"
                raise RuntimeError(f"Prefect's temporary server {state}")
            self.start()  # it exited (its port was taken, say): once more on another port

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_NO_UI = ""  # PREFECT_UI_URL for a server that serves no UI
# The URL of the temporary server a command started, in its environment and its children's (Dask workers)
TEMPORARY_API_URL = "HIFIRAG_TEMPORARY_API_URL"


def shared_api_url() -> str | None:
    """The Prefect API server that other processes can reach too, or None.

    That is the server ``PREFECT_API_URL`` or the active Prefect profile names, as any process started
    with this environment would see it: not a temporary server, whether this command started it (its
    URL is in ``HIFIRAG_TEMPORARY_API_URL``) or Prefect did (Prefect does not name it in the
    environment). Two processes share rate limits and budgets only through such a server.
    """
    from prefect.settings import Settings

    url = Settings().api.url  # the environment and the profile, without this process's temporary settings
    if not url or url == os.environ.get(TEMPORARY_API_URL):
        return None
    return url


def _use_api(url: str | None) -> None:
    """Point this process's Prefect settings (and its child processes) at ``url``, or at no server."""
    from prefect.context import refresh_global_settings_context

    if url:
        os.environ["PREFECT_API_URL"] = os.environ[TEMPORARY_API_URL] = url
        if "PREFECT_UI_URL" not in os.environ:  # the server serves no UI: no "View at" links to it
            os.environ["PREFECT_UI_URL"] = _NO_UI
    else:
        os.environ.pop("PREFECT_API_URL", None)
        os.environ.pop(TEMPORARY_API_URL, None)
        if os.environ.get("PREFECT_UI_URL") == _NO_UI:
            del os.environ["PREFECT_UI_URL"]
    refresh_global_settings_context()


def temporary_server() -> TemporaryServer | None:
    """A started temporary server, unless Prefect is set to use a server of its own (then None)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return None
    return TemporaryServer().start()


@contextlib.contextmanager
def server_starting() -> Iterator[None]:
    """Start Prefect's temporary server now, run the block, then wait for the server to answer.

    A run without ``PREFECT_API_URL`` needs a temporary server (5-8 s to start on two cores, 9 s more
    when it creates its database) before its flow can begin; work that needs no Prefect, such as
    importing the flow or building the corpus, runs meanwhile. Should it not come up, the command
    fails (``ServerStartError``) rather than leave Prefect to start a server of its own when the flow
    begins: that one is stopped only by this process's exit handlers, which neither SIGKILL nor an
    unhandled SIGTERM runs, so it would outlive the command.
    """
    server = temporary_server()
    try:
        yield
    except BaseException:  # the command is failing (a bad corpus, Ctrl-C): no server to wait for
        if server is not None:
            server.stop()
            _use_api(None)
        raise
    if server is not None:
        try:
            server.wait()
        except RuntimeError as exc:
            raise ServerStartError(f"{exc}; `prefect server start` shows why, or set PREFECT_API_URL "
                                   "to use a running server") from None


def make_server_database() -> Path | None:
    """Create and migrate the temporary server's database under ``PREFECT_HOME`` now, by starting that
    server once and stopping it (the first start does this, about 9 s on two cores). Returns the
    Prefect home, or None when ``PREFECT_API_URL`` names a server, which keeps its own database."""
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home)
    server = temporary_server()
    if server is None:
        return None
    try:
        server.wait()
    finally:
        server.stop()
        _use_api(None)
    return home
