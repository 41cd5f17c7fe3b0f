"""Cases for tests/system/test_local_model_watch.py, run by it in a pytest of their own (the name keeps them out of
the suite): a watched "server" process, which writes 25 log lines and waits, is killed with a signal during
a test that then passes its asserts, and the next test asks for the same server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.llama_server import LocalModel, watching

LOG_SCRIPT = (
    "import time\nfor i in range(1, 26): print(f'fake llama log line {i}', flush=True)\ntime.sleep(600)"
)
FAKE = LocalModel("fake-llama", lambda: None, None)  # type: ignore[arg-type,return-value]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("watch") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", LOG_SCRIPT], stdout=log, stderr=subprocess.STDOUT)
        with watching(process, FAKE, log_path) as watched:
            yield watched
            watched.stopping = True  # reported by the tests, as tests/support/llama_server.py's fixtures do


def test_a_test_whose_server_dies_fails_though_its_asserts_pass(server):
    while server.log_path.read_text().count("\n") < 25:
        pass
    os.kill(server.process.pid, getattr(signal, os.environ.get("WATCH_CASE_SIGNAL", "SIGSEGV")))
    server.process.wait()
    assert True


def test_the_next_test_on_the_dead_server_fails_at_setup(server):
    raise AssertionError("never reached: setup fails first")
