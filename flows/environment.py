"""Process settings for Prefect and the model libraries, applied before either is imported.

Prefect reads its settings when it is imported, so every entry point (the CLI, the deployment
serve script, the tests) calls ``configure`` first. Values the user has already set win.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from hifirag_core.config import PROJECT_ROOT

DEFAULTS = {
    # Prefect keeps its database and state inside the project, not in ~/.prefect.
    "PREFECT_HOME": str(PROJECT_ROOT / ".prefect"),
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


@contextlib.contextmanager
def server_starting() -> Iterator[None]:
    """Start Prefect's temporary server in the background while the block runs; wait for it after.

    A run without ``PREFECT_API_URL`` starts a temporary server (uvicorn in a process of its own,
    about 5 s; 9 s more when it creates its database) before its flow can begin. Work that needs no
    Prefect, such as building the corpus, can run meanwhile. The flow then finds the server running
    (Prefect keeps one per process). Should the start fail here, the flow starts it again itself and
    reports why.
    """
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    def start() -> None:
        with contextlib.suppress(Exception):
            SubprocessASGIServer().start()

    starting = threading.Thread(target=start, name="prefect-server-start", daemon=True)
    starting.start()
    try:
        yield
    finally:
        starting.join()


def make_server_database() -> Path | None:
    """Create and migrate the temporary server's database under ``PREFECT_HOME`` now, by starting that
    server once and stopping it (the first start does this, about 9 s on two cores). Returns the
    Prefect home, or None when ``PREFECT_API_URL`` names a server, which keeps its own database."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:
        return None
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    try:
        server.start()
    finally:
        server.stop()
    return Path(settings.home)
