"""Every process a command starts ends with it: a SIGTERM to ``hifirag serve`` in the middle of a request,
and a SIGKILL (which no handler sees) to ``hifirag run`` on the Dask runner in the middle of its run.

Each command runs with a marker in its environment, which every process it starts inherits; after the
command has gone, no process carrying the marker may remain (the temporary Prefect server, the Dask
workers, anything else). Each test prints the processes it saw and what became of them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from tests import PROJECT_ROOT
from tests.support.service_process import free_port
from tests.support.sitegen import QUESTIONS, write_questions

pytestmark = pytest.mark.slow

MARK = "HIFIRAG_TEST_PROCESS_MARK"
ENDS_WITHIN_S = 30.0  # a bound for the wait, not a measurement: the server's own grace is 10 s


def _env(tmp_path: Path, mark: str) -> dict[str, str]:
    """The command's environment: its own Prefect home and no server named, so it starts its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_UI_URL")}
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect-home"), MARK: mark,
            "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(tmp_path / "prefect-results")}


def _role(cmdline: list[str]) -> str:
    text = " ".join(cmdline)
    for needle, role in (("flows.server_process", "prefect server"), ("flows.cli", "the command"),
                         ("prefect.server.api.server:create_app", "prefect server (Prefect's own start)"),
                         ("resource_tracker", "multiprocessing resource tracker"),
                         ("spawn_main", "dask worker"), ("forkserver", "multiprocessing forkserver")):
        if needle in text:
            return role
    return text[:80]


def _interruptible() -> None:
    """In the child before it runs the command: SIGINT delivered and not ignored, as an interactive shell leaves
    it. A disposition of 'ignore' and a blocked mask are inherited through exec, and a full test run once gave
    the command SIGINT with no effect (it answered every question and exited 0) where the test alone did not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _marked(mark: str) -> dict[int, psutil.Process]:
    """Live processes (zombies have ended) whose environment carries ``mark``."""
    found = {}
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARK) == mark:
                found[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _describe(processes: dict[int, psutil.Process]) -> dict[int, str]:
    out = {}
    for pid, proc in processes.items():
        try:
            out[pid] = _role(proc.cmdline())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            out[pid] = "(ended)"
    return out


def _orphan_check(label: str, command_pid: int, seen: dict[int, str], mark: str) -> list[str]:
    """Wait for every marked process to end; print what was seen and what remains; return the survivors."""
    deadline = time.monotonic() + ENDS_WITHIN_S
    ended_at: dict[int, float] = {}
    began = time.monotonic()
    while True:
        alive = _marked(mark)
        for pid in seen:
            if pid not in alive and pid not in ended_at:
                ended_at[pid] = time.monotonic() - began
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    survivors = []
    print(f"\n[orphan check] {label}: command pid {command_pid}, marker {MARK}={mark}")
    for pid, role in sorted(seen.items()):
        state = f"ended (seen gone {ended_at[pid]:.1f} s after the command)" if pid in ended_at else "ALIVE"
        print(f"  pid {pid:>7}  {role:<34} {state}")
    for pid, proc in alive.items():
        try:
            line = f"pid {pid} ppid {proc.ppid()} {' '.join(proc.cmdline())[:160]}"
        except psutil.NoSuchProcess:
            continue
        survivors.append(line)
        print(f"  SURVIVOR {line}")
    print(f"  processes carrying the marker after the command: {len(survivors)}")
    return survivors


def _kill(survivors: list[str]) -> None:
    """Leave no process behind for the next test, whatever this one found."""
    for line in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[1]), signal.SIGKILL)


def test_sigterm_to_serve_in_the_middle_of_a_request_leaves_no_process(tmp_path, data_root, examples_file):
    mark = uuid.uuid4().hex
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "flows.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--data-root", str(data_root), "--set", f"generation.examples={examples_file}", "--heartbeat", "5"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=_env(tmp_path, mark), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "hifirag serve did not answer /health"
            time.sleep(0.5)
        first_line = threading.Event()
        lines: list[str] = []

        def ask() -> None:
            try:
                with httpx.Client(timeout=300) as client, client.stream(
                        "POST", f"{url}/run",
                        json={"question": "How do I limit the bandwidth Tidewater uses during a sync?"}) as response:
                    for line in response.iter_lines():
                        if line.startswith("data: "):
                            lines.append(line)
                            first_line.set()
            except httpx.HTTPError:
                pass
            first_line.set()

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        assert first_line.wait(300) and lines, log.read_text(errors="replace")[-3000:]
        seen = _describe(_marked(mark))
        assert any(role.startswith("prefect server") for role in seen.values()), seen  # a temporary server runs
        os.kill(proc.pid, signal.SIGTERM)  # the command alone, as `kill PID` does
        proc.wait(timeout=300)
        asker.join(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"hifirag serve: {len(lines)} stream messages before it stopped, exit code {proc.returncode}")
    survivors = _orphan_check("SIGTERM to hifirag serve mid-request", proc.pid, seen, mark)
    _kill(survivors)
    assert survivors == []
    assert proc.returncode == 128 + signal.SIGTERM  # it ended by our handler, its exit handlers run


@pytest.mark.parametrize("sig,runner", [(signal.SIGKILL, "dask"), (signal.SIGINT, "threads")],
                         ids=["sigkill-dask", "sigint-threads"])
def test_a_run_stopped_in_the_middle_leaves_no_process(tmp_path, data_root, examples_file, sig,
                                                       runner):
    mark = uuid.uuid4().hex
    log = tmp_path / "run.log"
    # 30 questions one at a time: the offline pipeline answers the test site's three in under a second
    many = write_questions(tmp_path / "many.jsonl", [{**q, "iid": f"{q['iid']}-{n}"} for n in range(10)
                                                     for q in QUESTIONS])
    cmd = [sys.executable, "-m", "flows.cli", "run", str(many), "--data-root", str(data_root),
           "--set", f"generation.examples={examples_file}", "--set", "limits.concurrency=1",
           "--runner", runner, "--dask-workers", "2"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=_env(tmp_path, mark), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=_interruptible)
    try:
        deadline = time.monotonic() + 900
        while "[1/" not in log.read_text(errors="replace"):  # the first question is answered: mid-run
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the run answered no question"
            time.sleep(0.5)
        seen = _describe(_marked(mark))
        roles = list(seen.values())
        assert "prefect server" in roles and roles.count("dask worker") >= (2 if runner == "dask" else 0), seen
        os.kill(proc.pid, sig)  # the command alone (Ctrl-C in a shell signals its whole group)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    label = f"{signal.Signals(sig).name} to hifirag run --runner {runner} mid-run (exit code {proc.returncode})"
    survivors = _orphan_check(label, proc.pid, seen, mark)
    # stopped mid-run (the log's end says how the run ended when it was not)
    assert proc.returncode != 0 and "[30/30]" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
    _kill(survivors)
    assert survivors == []



# A server whose graceful stop hangs (here: it ignores SIGTERM) still ends once its parent has gone.
HANGING_CHILD = """
import signal, sys, threading, time
from flows.server_process import watch_parent
signal.signal(signal.SIGTERM, signal.SIG_IGN)
threading.Thread(target=watch_parent, args=(int(sys.argv[1]), 0.05, 1.0), daemon=True).start()
time.sleep(600)
"""
MIDDLE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_server_whose_graceful_stop_hangs_is_ended_after_its_grace(tmp_path):
    mark = uuid.uuid4().hex
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, HANGING_CHILD], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                              env={**os.environ, MARK: mark}, text=True, start_new_session=True)
    child = psutil.Process(int(middle.stdout.readline()))
    seen = {middle.pid: "the parent", child.pid: "a server ignoring SIGTERM"}
    middle.kill()
    middle.wait()
    survivors = _orphan_check("SIGKILL to the parent of a server that ignores SIGTERM", middle.pid, seen, mark)
    _kill(survivors)
    assert survivors == []


def test_sigterm_to_the_deployments_serve_script_leaves_no_process(tmp_path):
    """``deployments/serve.py`` without PREFECT_API_URL: its temporary server ends with it."""
    mark = uuid.uuid4().hex
    log = tmp_path / "deployments.log"
    env = {**_env(tmp_path, mark), "HIFIRAG_DATA_ROOT": str(tmp_path / "data")}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(PROJECT_ROOT / "deployments" / "serve.py")], cwd=PROJECT_ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while "deployments are being served" not in log.read_text(errors="replace").replace("\n", " "):
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the deployments were not served"
            time.sleep(0.5)
        seen = _describe(_marked(mark))
        assert "prefect server" in seen.values(), seen
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    survivors = _orphan_check(f"SIGTERM to deployments/serve.py (exit code {proc.returncode})", proc.pid, seen, mark)
    _kill(survivors)
    assert survivors == []
