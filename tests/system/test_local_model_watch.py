"""A local model server that dies is a clear failure: its signal, the last lines of its log and a hint.

The harness (tests/support/llama_server.py) watches every server it starts; tests/conftest.py fails a test during which
a server died, whatever its asserts said, and fails the next test that asks for the dead server at its setup.
Here a stand-in process is killed, in a pytest of its own (tests/support/watch_cases.py), so no model is needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import PROJECT_ROOT
from tests.support.llama_server import LocalServerDied, exit_description

ROOT = PROJECT_ROOT


def _cases(signal_name: str) -> str:
    env = {**os.environ, "WATCH_CASE_SIGNAL": signal_name}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/support/watch_cases.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout
    return run.stdout


@pytest.mark.slow  # a pytest process: a few seconds
def test_a_server_killed_by_sigsegv_fails_the_test_with_signal_log_and_hint() -> None:
    out = _cases("SIGSEGV")
    assert "1 failed, 1 error" in out.splitlines()[-1], out
    # the test that passed its asserts is failed for the death, with the signal, a hint and the log's tail
    assert out.count("killed by SIGSEGV (exit code -11)") >= 2, (
        out
    )  # in the test's failure and at the next setup
    assert "Hint: a llama.cpp built with AMX kernels dies like this" in out
    assert "The last 20 lines of its log" in out
    assert "fake llama log line 25" in out and "fake llama log line 6\n" in out
    assert "fake llama log line 5\n" not in out  # 20 lines, not the whole log
    assert "LocalServerDied" in out  # the next test fails at setup, before its body runs
    assert "never reached" not in out


@pytest.mark.slow
def test_sigill_gets_the_other_cpu_hint() -> None:
    out = _cases("SIGILL")
    assert "killed by SIGILL (exit code -4)" in out
    assert "the llama-cpp-python wheel was built for another CPU" in out


@pytest.mark.parametrize(
    ("code", "words", "hint"),
    [
        (-signal.SIGSEGV, "killed by SIGSEGV (exit code -11)", "AMX"),
        (-signal.SIGILL, "killed by SIGILL (exit code -4)", "another CPU"),
        (-signal.SIGKILL, "killed by SIGKILL (exit code -9)", "out-of-memory"),
        (1, "exited with status 1", "log's last lines"),
    ],
)
def test_exit_descriptions(code: int, words: str, hint: str) -> None:
    described, why = exit_description(code)
    assert described == words and hint in why


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ("fpu sse avx2 amx_bf16 amx_tile amx_int8", "This CPU lists amx_tile: the likely cause"),
        ("fpu sse avx2 avx512f", "This CPU lists no AMX flag, so not the cause here"),
    ],
)
def test_the_sigsegv_hint_says_whether_this_cpu_lists_amx(flags: str, says: str) -> None:
    cpuinfo = f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n"
    _, hint = exit_description(-signal.SIGSEGV, cpuinfo=cpuinfo)
    assert hint.startswith("a llama.cpp built with AMX kernels") and says in hint
    _, other = exit_description(-signal.SIGSEGV, cpuinfo="model name\t: no flags line\n")
    assert "This CPU lists" not in other  # unknown flags: nothing claimed


def test_a_death_inside_a_watched_block_raises_when_the_block_ends(tmp_path: Path) -> None:
    from tests.support.llama_server import LocalModel, watching

    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "print('loading', flush=True); import time; time.sleep(60)"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        fake = LocalModel("fake", lambda: log_path, None)
        with (
            pytest.raises(LocalServerDied, match="killed by SIGSEGV") as raised,
            watching(process, fake, log_path),
        ):
            process.send_signal(signal.SIGSEGV)
            process.wait()
            raise ConnectionError("what the benchmark saw")
    assert isinstance(raised.value.__cause__, ConnectionError)
